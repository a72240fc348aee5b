// Entry point of the smollm3 model-architecture plugin. Serves GGUF files
// whose general.architecture is "smollm3" (SmolLM3-3B): the Llama layout
// (RoPE on adjacent pairs, as GGUF converters permute Q and K for it, no
// biases, SwiGLU, usually tied output) with NoPE layers: every fourth layer
// (layers 3, 7, 11, ...) uses no position encoding at all. GGUF files carry
// no key for that pattern: it is fixed for the architecture, as the
// reference implementation has it (SmolLM3's no_rope_layer_interval of 4).
#include <memory>

#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

constexpr int32_t kNoRopeLayerStep = 4;

class SmolLM3 final : public kit::DecoderFamily {
public:
    explicit SmolLM3(const kit::TransformerHParams& h)
        : DecoderFamily(h, {.attention = {.rope_mode = DWELL_ROPE_NORM}}) {}

protected:
    kit::AttentionOptions attention_options(int32_t layer) const override {
        kit::AttentionOptions o = layout().attention;
        o.rope = (layer + 1) % kNoRopeLayerStep != 0;
        return o;
    }
};

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    const auto h = kit::read_transformer_hparams(meta);
    kit::require_full_rope_and_rms_eps(meta, h);
    return std::make_unique<SmolLM3>(h);
}

constexpr const char* kArchitectures[] = {"smollm3"};
constexpr kit::PluginDescription kPlugin{
    "smollm3",      "0.1.0", "SmolLM3 transformer (Llama layout, no RoPE in every fourth layer)",
    kArchitectures, 1,       make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
