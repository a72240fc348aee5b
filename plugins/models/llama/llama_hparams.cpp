#include "llama_hparams.hpp"

#include <limits>

#include "model/model_plugin_entry.hpp"

namespace dwell::llama {

HParams read_hparams(const model_kit::MetadataReader& meta) {
    const std::string key = meta.arch_key("expert_count");  // mixture-of-experts files
    if (const int64_t n = meta.int_or(key, 0, std::numeric_limits<int64_t>::min(),
                                      std::numeric_limits<int64_t>::max()))
        throw model_kit::Decline(key + " = " + std::to_string(n) +
                                 ": a mixture-of-experts model, served by the mixtral plugin");
    return model_kit::read_transformer_hparams(meta);
}

}  // namespace dwell::llama
