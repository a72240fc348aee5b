// Entry point of the qwen3 model-architecture plugin. Serves GGUF files
// whose general.architecture is "qwen3" (Qwen3 dense models, 0.6B to 32B):
// the Qwen2 layout without Q/K/V biases and with QK-norm: each head of Q
// and K is RMS-normalised and multiplied by blk.L.attn_{q,k}_norm.weight
// [head_dim] before NEOX RoPE. The head size is attention.key_length (128
// in the published models, whatever n_embd / n_head is).
#include <memory>

#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    const auto h = kit::read_transformer_hparams(meta);
    kit::require_full_rope_and_rms_eps(meta, h);
    const kit::DecoderLayout layout{.attention = {.rope_mode = DWELL_ROPE_NEOX, .qk_norm = true},
                                    .feed_forward = kit::GatedActivation::swiglu};
    return std::make_unique<kit::DecoderFamily>(h, layout);
}

constexpr const char* kArchitectures[] = {"qwen3"};
constexpr kit::PluginDescription kPlugin{
    "qwen3",
    "0.1.0",
    "Qwen3 transformer (GQA, per-head QK-norm, NEOX RoPE, RMSNorm, SwiGLU)",
    kArchitectures,
    1,
    make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
