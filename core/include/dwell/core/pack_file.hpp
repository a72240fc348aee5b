// The dwell pack (.dwell): dwell's native model file, built for phones.
//
//  - a fixed header (magic "DWELLPK\0", version, section offsets, checksum
//    of the header and directory);
//  - metadata, encoded exactly like a GGUF key/value section (a GGUF blob
//    with no tensors), so model plugins see the same keys either way;
//  - the sentencepiece tokenizer model, embedded as a serialized ModelProto;
//  - a tensor directory: name, dtype, shape, where the data is, how it is
//    stored, and an XXH3-64 checksum of the tensor's raw bytes;
//  - tensor data, each tensor starting at a multiple of 16 KiB, stored raw
//    (used in place from the mapping) or as independent zstd frames of a
//    fixed raw size (a frame table gives random access to each frame).
//
// Every offset, size and count is validated before use; every tensor's
// checksum is verified on open. Errors are dwell::Error with one line
// naming the file and, where it applies, the tensor.
//
// Thread-safety: a PackWriter is used by one thread; an opened pack is
// immutable. Ownership: the source owns the mapping and decompressed data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/gguf_writer.hpp"
#include "dwell/core/model_source.hpp"

namespace dwell {

inline constexpr char kPackMagic[8] = {'D', 'W', 'E', 'L', 'L', 'P', 'K', '\0'};
inline constexpr uint32_t kPackVersion = 1;
inline constexpr uint64_t kPackAlignment = 16384;

enum class PackCompression : uint32_t { None = 0, Zstd = 1 };

// How one tensor is stored, for `dwell convert`'s report and for tests.
struct PackTensorStorage {
    std::string name;
    dwell_dtype dtype;
    PackCompression compression;
    uint64_t raw_bytes;
    uint64_t stored_bytes;
    uint32_t frames;
};

struct PackLimits {
    uint64_t max_tensors = 1u << 16;
    uint64_t max_name = 1024;
    uint64_t max_frames_per_tensor = 1u << 24;
    uint64_t max_tensor_bytes = uint64_t{1} << 40;
    // Sum of the raw sizes of all zstd tensors (memory the source allocates).
    uint64_t max_decompressed_bytes = uint64_t{1} << 40;
};

class PackSource : public ModelSource {
public:
    virtual const std::vector<PackTensorStorage>& storage() const = 0;
    // The embedded serialized sentencepiece model; empty when there is none.
    virtual std::string_view tokenizer_model() const = 0;
};

// Throws dwell::Error (DWELL_ERR_IO / DWELL_ERR_CORRUPT) naming the file and tensor.
std::unique_ptr<PackSource> open_pack_source(const std::filesystem::path& path,
                                             const PackLimits& limits = {},
                                             TensorData data = TensorData::Resident);

class PackWriter {
public:
    struct Options {
        PackCompression compression = PackCompression::None;
        int zstd_level = 9;
        uint64_t frame_bytes = uint64_t{256} * 1024;  // raw bytes per zstd frame
    };

    // Streams tensor data into a temporary beside `path` (output_file.hpp)
    // as tensors are added, so converting a large model never holds it all
    // in memory; finish() renames it to `path`.
    PackWriter(const std::filesystem::path& path, Options options);
    ~PackWriter();  // an unfinished pack is deleted
    PackWriter(const PackWriter&) = delete;
    PackWriter& operator=(const PackWriter&) = delete;

    // The key/value metadata (add keys with its add_* functions, no tensors).
    GgufWriter& metadata();
    void set_tokenizer(std::string serialized_model);
    // `data` in the dtype's block layout; its size is checked against the shape.
    void add_tensor(std::string_view name, dwell_dtype dtype, std::span<const int64_t> ne,
                    std::span<const uint8_t> data);
    // Writes the directory and header; the file is complete after this.
    std::vector<PackTensorStorage> finish();
    // The file being written until finish().
    const std::filesystem::path& temporary() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dwell
