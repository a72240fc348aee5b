// Entry point of the qwen35 model-architecture plugin. Serves GGUF files
// whose general.architecture is "qwen35" (Qwen3.5 dense models, text only):
// gated delta-net linear-attention layers carrying a convolution state and
// a delta-rule state per sequence (ABI 1.7), and gated full-attention
// layers every full_attention_interval layers (qwen35_hybrid_decoder.hpp).
#include <memory>

#include "model/model_kit.hpp"
#include "qwen35_hybrid_decoder.hpp"

namespace {

namespace kit = dwell::model_kit;

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    return std::make_unique<dwell::qwen35::Qwen35HybridDecoder>(
        dwell::qwen35::read_qwen35_hparams(meta));
}

constexpr const char* kArchitectures[] = {"qwen35"};
constexpr kit::PluginDescription kPlugin{
    "qwen35",
    "0.1.0",
    "Qwen3.5 hybrid (gated delta-net layers with carried state, gated GQA attention with "
    "QK-norm and partial NEOX RoPE, RMSNorm, SwiGLU)",
    kArchitectures,
    1,
    make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
