// What a model file offers the runtime, whatever its format: metadata for
// the model plugin, the weight tensors, and the tokenizer. GGUF files and
// dwell packs both implement it; open_model_source() picks by the file's
// magic bytes.
//
// Thread-safety: immutable after opening; safe to share between threads.
// Ownership: tensor data and metadata strings live as long as the source.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/model.h"
#include "dwell/tensor.h"

namespace dwell {

struct SourceTensor {
    std::string name;
    dwell_dtype dtype = DWELL_DTYPE_COUNT;  // DWELL_DTYPE_COUNT: a type dwell cannot run
    std::string type_name;                  // as the file names it, for messages
    int32_t n_dims = 0;
    int64_t ne[DWELL_MAX_DIMS] = {1, 1, 1, 1};
    const uint8_t* data = nullptr;  // resident bytes: mapped or decompressed; null when deferred
    uint64_t size = 0;              // bytes
    // Where the bytes are in the file, for readers that bypass the mapping
    // (streamed weights).
    struct Stored {
        uint64_t offset = 0;  // first stored byte, from the start of the file
        uint64_t bytes = 0;   // stored bytes (== size unless compressed)
        // zstd: raw bytes per frame and each frame's compressed size, in
        // order; empty: stored raw.
        uint64_t frame_raw = 0;
        std::vector<uint64_t> frame_sizes;
        std::optional<uint64_t> xxh3;  // of the raw bytes, when the format keeps one
    } stored;
};

// Resident: every tensor's bytes are usable through `data` once the source
// is open (packs verify checksums and decompress then). Deferred: packs skip
// both and leave compressed tensors' `data` null; whoever reads the bytes
// through `stored` verifies them.
enum class TensorData { Resident, Deferred };

class DWELL_CORE_API ModelSource {
public:
    virtual ~ModelSource() = default;

    virtual const std::filesystem::path& path() const = 0;
    virtual std::string format() const = 0;  // "GGUF", "dwell pack"
    // Metadata in the plugin ABI's form; valid while the source lives.
    virtual const dwell_metadata& metadata() const = 0;
    virtual const SourceTensor* find_tensor(std::string_view name) const = 0;
    virtual const std::vector<SourceTensor>& tensors() const = 0;
    virtual Tokenizer tokenizer() const = 0;

    // For a source opened Deferred: makes the named tensors' bytes usable
    // through `data` (packs decompress them) and verifies their checksums,
    // so only the tensors a model declares ever cost memory. `reserve` is
    // called once, before anything is allocated, with the bytes this will
    // allocate; it throws to refuse. Names the source lacks are skipped.
    // Call before the source is shared between threads.
    virtual void make_resident(const std::vector<std::string>& names,
                               const std::function<void(uint64_t bytes)>& reserve) {
        (void)names;
        (void)reserve;  // GGUF: every tensor is mapped in place already
    }

    // "" while the bytes mapped from the file can be trusted; otherwise one
    // line naming the file (mapped_file.hpp). `check_file`: the weights are
    // read in place, so a file changed on disk is a problem too.
    virtual std::string file_problem(bool check_file) const = 0;
};

// Opens a GGUF file or a dwell pack; throws dwell::Error naming the file.
DWELL_CORE_API std::unique_ptr<ModelSource> open_model_source(
    const std::filesystem::path& path, TensorData data = TensorData::Resident);

// The GGUF implementation (exposed for tools such as convert).
class GgufFile;
std::unique_ptr<ModelSource> make_gguf_source(GgufFile file);

}  // namespace dwell
