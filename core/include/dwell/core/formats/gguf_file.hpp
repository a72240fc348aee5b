// Read-only view of a GGUF model file (versions 2 and 3), memory-mapped.
//
// Every offset, size, count and string length in the file is validated
// before use; a malformed file throws dwell::Error(DWELL_ERR_CORRUPT or
// DWELL_ERR_IO) whose message is one line naming the file and what is wrong,
// e.g. "model.gguf: tensor 'blk.0.attn_q.weight' data [offset 1234, 4096
// bytes] runs past the end of the file (2000 bytes)".
//
// Thread-safety: immutable after open(); safe to share between threads.
// Ownership: owns the mapping; TensorInfo::data and string_views point into
// it and live as long as the GgufFile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/model.h"
#include "dwell/tensor.h"

namespace dwell {

// GGUF metadata value types, as numbered in the file format.
enum class GgufType : uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};

// True for the eight integer value types (not BOOL).
DWELL_CORE_API bool gguf_type_is_integer(GgufType t);

// Limits that keep a hostile file from making the reader allocate or loop
// without bound.
struct GgufLimits {
    uint64_t max_tensors = 1u << 16;
    uint64_t max_kv = 1u << 16;
    uint64_t max_string = 1u << 20;      // bytes in one string
    uint64_t max_name = 1024;            // bytes in a tensor name (ggml's are under 64)
    uint64_t max_array = 1u << 24;       // elements in one array
    int64_t max_dim = int64_t{1} << 40;  // elements along one dimension
};

class DWELL_CORE_API GgufFile {
public:
    struct TensorInfo {
        std::string name;
        uint32_t ggml_type;  // the type id in the file
        dwell_dtype dtype;   // DWELL_DTYPE_COUNT when dwell has no such dtype
        int32_t n_dims;
        int64_t ne[DWELL_MAX_DIMS];  // unused trailing dims are 1
        uint64_t offset;             // from the start of the file
        uint64_t size;               // bytes
        const uint8_t* data;         // into the mapping
    };

    // Throws dwell::Error naming `path` on any problem.
    static GgufFile open(const std::filesystem::path& path, const GgufLimits& limits = {});
    // Parses GGUF bytes held in memory (a dwell pack's metadata blob) with the
    // same checks as open(); messages name `display_name`. Tensor data
    // pointers point into the owned buffer.
    static GgufFile from_bytes(std::vector<uint8_t> bytes,
                               const std::filesystem::path& display_name,
                               const GgufLimits& limits = {});

    GgufFile(GgufFile&&) noexcept;
    GgufFile& operator=(GgufFile&&) noexcept;
    ~GgufFile();

    const std::filesystem::path& path() const;
    uint32_t version() const;
    uint64_t alignment() const;
    uint64_t file_size() const;

    // Metadata accessors. A present key of an incompatible type yields
    // std::nullopt (get_*) or throws (the typed array getters).
    bool has(std::string_view key) const;
    std::optional<GgufType> type_of(std::string_view key) const;
    std::optional<int64_t> get_int(std::string_view key) const;   // any integer or bool
    std::optional<double> get_float(std::string_view key) const;  // any number
    // A uint64 value with all its bits (get_int has no room for those above 2^63 - 1).
    std::optional<uint64_t> get_uint64(std::string_view key) const;
    std::optional<std::string_view> get_string(std::string_view key) const;
    std::optional<uint64_t> array_length(std::string_view key) const;
    std::optional<GgufType> array_type(std::string_view key) const;
    std::vector<std::string_view> get_string_array(std::string_view key) const;
    std::vector<float> get_float_array(std::string_view key) const;
    std::vector<int32_t> get_int_array(std::string_view key) const;
    std::vector<std::string> keys() const;  // in file order

    const std::vector<TensorInfo>& tensors() const;
    const TensorInfo* find_tensor(std::string_view name) const;

    // "" while the mapped bytes can be trusted; otherwise one line naming the
    // file (MappedFile::problem, mapped_file.hpp). Bytes held in memory
    // (from_bytes) always can.
    std::string mapping_problem(bool check_file) const;

private:
    struct DWELL_CORE_LOCAL Impl;
    explicit GgufFile(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// ggml type id -> dwell dtype (DWELL_DTYPE_COUNT if dwell has none), and the
// ggml block geometry used to validate sizes of every type a file may hold.
dwell_dtype dtype_from_ggml(uint32_t ggml_type);
DWELL_CORE_API uint32_t ggml_from_dtype(dwell_dtype dtype);  // throws for dtypes ggml lacks
DWELL_CORE_API const char* ggml_type_name(uint32_t ggml_type);
// Elements per block and bytes per block of a ggml type; 0 for an unknown id.
DWELL_CORE_API int64_t ggml_block_elems(uint32_t ggml_type);
DWELL_CORE_API uint64_t ggml_block_bytes(uint32_t ggml_type);

// The file's metadata as the plugin ABI's dwell_metadata table; valid while
// `file` lives at the same address.
dwell_metadata gguf_metadata(const GgufFile& file);

}  // namespace dwell
