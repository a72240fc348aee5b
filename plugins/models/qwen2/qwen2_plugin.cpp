// Entry point of the qwen2 model-architecture plugin. Serves GGUF files
// whose general.architecture is "qwen2" (Qwen1.5, Qwen2, Qwen2.5 dense
// models): the Llama layout with biases on the Q, K and V projections and
// NEOX-style RoPE (rotating pairs (i, i + n_rot/2)).
#include <memory>
#include <stdexcept>
#include <string>

#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

kit::TransformerHParams read_hparams(const kit::MetadataReader& meta) {
    // Qwen2 checkpoints use an RMSNorm epsilon of 1e-6 when the key is absent.
    auto h = kit::read_transformer_hparams(meta, 1e-6f);
    if (h.n_rot != h.head_dim) {
        throw std::runtime_error(meta.arch_key("rope.dimension_count") + " (" +
                                 std::to_string(h.n_rot) + ") must equal the head size (" +
                                 std::to_string(h.head_dim) + ") in qwen2 models");
    }
    return h;
}

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    const kit::DecoderLayout layout{.attention = {.rope_mode = DWELL_ROPE_NEOX, .qkv_bias = true},
                                    .feed_forward = kit::GatedActivation::swiglu};
    return std::make_unique<kit::DecoderFamily>(read_hparams(meta), layout);
}

constexpr const char* kArchitectures[] = {"qwen2"};
constexpr kit::PluginDescription kPlugin{
    "qwen2",        "0.1.0", "Qwen2 transformer (GQA with QKV bias, NEOX RoPE, RMSNorm, SwiGLU)",
    kArchitectures, 1,       make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
