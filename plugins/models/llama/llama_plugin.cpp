// Entry point of the llama model-architecture plugin. Serves GGUF files
// whose general.architecture is "llama" (Llama 1/2/3, TinyLlama, the
// llama2.c models and other models that use the same layout): the kit's
// decoder with RoPE on adjacent pairs (Llama 3.x: divided by the factors of
// rope_freqs.weight), no Q/K/V biases and a SwiGLU FFN; the output tied to
// the embeddings when output.weight is absent (Llama 3.2 1B).
#include <memory>

#include "llama_hparams.hpp"
#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    // Llama 3's frequency scaling arrives as per-pair factors in rope_freqs.weight.
    const kit::DecoderLayout layout{
        .attention = {.rope_mode = DWELL_ROPE_NORM, .rope_factors = "rope_freqs.weight"},
        .feed_forward = kit::GatedActivation::swiglu};
    return std::make_unique<kit::DecoderFamily>(dwell::llama::read_hparams(meta), layout);
}

constexpr const char* kArchitectures[] = {"llama"};
constexpr kit::PluginDescription kPlugin{
    "llama",        "0.1.0", "Llama-family transformer (GQA, RoPE, RMSNorm, SwiGLU)",
    kArchitectures, 1,       make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
