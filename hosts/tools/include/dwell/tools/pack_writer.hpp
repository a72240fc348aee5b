// Writes dwell packs (the reader: dwell/core/model/pack_file.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/formats/pack_layout.hpp"
#include "dwell/tools/gguf_writer.hpp"

namespace dwell {

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
