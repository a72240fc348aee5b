// Entry point of the gemma model-architecture plugin. Serves GGUF files
// whose general.architecture is "gemma" (Gemma 1: 2B and 7B): the kit's
// decoder with the token embeddings scaled by sqrt(n_embd), NEOX RoPE, a
// head size of its own (attention.key_length, not n_embd / n_head), a GeGLU
// FFN (GELU(gate) * up) and the output projection tied to the token
// embeddings. GGUF files store the norm weights with Gemma's "+1" already
// folded in, so they multiply as they are.
#include <memory>

#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    const kit::DecoderLayout layout{.attention = {.rope_mode = DWELL_ROPE_NEOX},
                                    .feed_forward = kit::GatedActivation::geglu,
                                    .scaled_embeddings = true,
                                    .always_tied_output = true};
    // Gemma checkpoints use an RMSNorm epsilon of 1e-6 when the key is absent.
    return std::make_unique<kit::DecoderFamily>(kit::read_transformer_hparams(meta, 1e-6f), layout);
}

constexpr const char* kArchitectures[] = {"gemma"};
constexpr kit::PluginDescription kPlugin{
    "gemma",
    "0.1.0",
    "Gemma transformer (scaled embeddings, NEOX RoPE, RMSNorm, GeGLU, tied output)",
    kArchitectures,
    1,
    make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
