// The dwell pack's on-disk layout, shared by its reader (model/pack_file)
// and its writer (a tool: hosts/tools/pack_writer). The byte table is in
// hosts/cli/docs/pack-format.md and at the top of core/model/pack_file.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/base/little_endian.hpp"
#include "dwell/tensor.h"

namespace dwell {

inline constexpr char kPackMagic[8] = {'D', 'W', 'E', 'L', 'L', 'P', 'K', '\0'};
inline constexpr uint32_t kPackVersion = 1;
inline constexpr uint64_t kPackAlignment = 16384;

enum class PackCompression : uint32_t { None = 0, Zstd = 1 };

// How one tensor is stored in a pack (what the writer reports per tensor).
struct PackTensorStorage {
    std::string name;
    dwell_dtype dtype;
    PackCompression compression;
    uint64_t raw_bytes;
    uint64_t stored_bytes;
    uint32_t frames;
};

namespace pack_layout {

inline constexpr uint64_t kHeaderSize = 128;
inline constexpr uint64_t kChecksumOffset = 120;
inline constexpr uint64_t kEntryFixedBytes = 4 + 4 + 4 + 8 * DWELL_MAX_DIMS + 8 * 3 + 4 + 4 + 8 * 4;
inline constexpr uint64_t kFrameEntryBytes = 16;

// Tensor size in bytes from dtype and shape; nullopt when the dtype is not
// one dwell can store, a dimension is not positive, ne[0] is not a whole
// number of blocks, or the product overflows.
inline std::optional<uint64_t> tensor_bytes(dwell_dtype dtype, std::span<const int64_t> ne) {
    if (ne.empty() || ne.size() > DWELL_MAX_DIMS) return std::nullopt;
    if (dwell_dtype_block_elems(dtype) <= 0 || dwell_dtype_block_bytes(dtype) == 0) {
        return std::nullopt;
    }
    for (int64_t d : ne) {
        if (d <= 0) return std::nullopt;
    }
    uint64_t bytes = dwell_row_bytes(dtype, ne[0]);
    if (bytes == 0) return std::nullopt;
    for (size_t d = 1; d < ne.size(); ++d) {
        if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(ne[d]), &bytes)) {
            return std::nullopt;
        }
    }
    return bytes;
}

inline bool known_dtype(int32_t dtype) {
    return dtype >= 0 && dtype < DWELL_DTYPE_COUNT &&
           dwell_dtype_block_elems(static_cast<dwell_dtype>(dtype)) > 0;
}

// The 128-byte header.
struct Header {
    uint64_t file_size = 0;
    uint64_t metadata_offset = 0, metadata_size = 0;
    uint64_t tokenizer_offset = 0, tokenizer_size = 0;
    uint64_t directory_offset = 0, directory_size = 0;
    uint64_t frames_offset = 0, frames_size = 0;
    uint64_t tensor_count = 0;
    uint64_t checksum = 0;
};

DWELL_CORE_API std::array<uint8_t, kHeaderSize> encode_header(const Header& h);

struct Entry {
    std::string name;
    dwell_dtype dtype = DWELL_DTYPE_COUNT;
    int32_t n_dims = 0;
    int64_t ne[DWELL_MAX_DIMS] = {1, 1, 1, 1};
    uint64_t offset = 0;
    uint64_t stored = 0;
    uint64_t raw = 0;
    PackCompression compression = PackCompression::None;
    uint64_t frame_raw = 0;
    uint64_t frame_count = 0;
    uint64_t frame_table = 0;
    uint64_t checksum = 0;
};

}  // namespace pack_layout
}  // namespace dwell
