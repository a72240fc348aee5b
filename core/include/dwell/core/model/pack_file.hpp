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

#include "dwell/core/base/export.hpp"
#include "dwell/core/formats/pack_layout.hpp"
#include "dwell/core/model/model_source.hpp"

namespace dwell {

struct PackLimits {
    uint64_t max_tensors = 1u << 16;
    uint64_t max_name = 1024;
    uint64_t max_frames_per_tensor = 1u << 24;
    uint64_t max_tensor_bytes = uint64_t{1} << 40;
    // Sum of the raw sizes of all zstd tensors (memory the source allocates).
    uint64_t max_decompressed_bytes = uint64_t{1} << 40;
};

class DWELL_CORE_API PackSource : public ModelSource {
public:
    virtual const std::vector<PackTensorStorage>& storage() const = 0;
    // The embedded serialized sentencepiece model; empty when there is none.
    virtual std::string_view tokenizer_model() const = 0;
};

// Throws dwell::Error (DWELL_ERR_IO / DWELL_ERR_CORRUPT) naming the file and tensor.
DWELL_CORE_API std::unique_ptr<PackSource> open_pack_source(const std::filesystem::path& path,
                                                            const PackLimits& limits = {},
                                                            TensorData data = TensorData::Resident);

}  // namespace dwell
