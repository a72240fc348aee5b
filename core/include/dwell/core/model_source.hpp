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
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/tokenizer.hpp"
#include "dwell/model.h"
#include "dwell/tensor.h"

namespace dwell {

struct SourceTensor {
    std::string name;
    dwell_dtype dtype = DWELL_DTYPE_COUNT;  // DWELL_DTYPE_COUNT: a type dwell cannot run
    std::string type_name;                  // as the file names it, for messages
    int32_t n_dims = 0;
    int64_t ne[DWELL_MAX_DIMS] = {1, 1, 1, 1};
    const uint8_t* data = nullptr;  // resident bytes: mapped or decompressed
    uint64_t size = 0;              // bytes
};

class ModelSource {
public:
    virtual ~ModelSource() = default;

    virtual const std::filesystem::path& path() const = 0;
    virtual std::string format() const = 0;  // "GGUF", "dwell pack"
    // Metadata in the plugin ABI's form; valid while the source lives.
    virtual const dwell_metadata& metadata() const = 0;
    virtual const SourceTensor* find_tensor(std::string_view name) const = 0;
    virtual const std::vector<SourceTensor>& tensors() const = 0;
    virtual Tokenizer tokenizer() const = 0;
};

// Opens a GGUF file or a dwell pack; throws dwell::Error naming the file.
std::unique_ptr<ModelSource> open_model_source(const std::filesystem::path& path);

// The GGUF implementation (exposed for tools such as convert).
class GgufFile;
std::unique_ptr<ModelSource> make_gguf_source(GgufFile file);

}  // namespace dwell
