// Entry point of the gemma2 model-architecture plugin. Serves GGUF files
// whose general.architecture is "gemma2" (Gemma 2: 2B, 9B, 27B), with the
// semantics llama.cpp gives them: every second layer (0, 2, ...) is local
// with a sliding window (attention.sliding_window, default 4096), attention
// logits capped at attn_logit_softcapping (default 50) and the final
// logits at final_logit_softcapping (default 30), post-attention and
// post-FFN norms, and the output tied to the token embeddings.
#include <memory>
#include <utility>

#include "gemma_sliding_decoder.hpp"
#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;
namespace gemma = dwell::gemma;

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    gemma::SlidingHParams h;
    h.base = kit::read_transformer_hparams(meta, 1e-6f);
    // A window of 0 would hide every row, the token's own included.
    gemma::read_sliding_keys(meta, h, 4096, 1, 2, h.base.rope_freq_base);
    h.rope_scale_swa = h.base.rope_freq_scale;
    h.attn_softcap = meta.positive_float_or(meta.arch_key("attn_logit_softcapping"), 50.0f);
    h.final_softcap = meta.positive_float_or(meta.arch_key("final_logit_softcapping"), 30.0f);
    h.attn_scale = gemma::gemma_attention_scale(h.base, 46);
    h.always_tied = true;
    return std::make_unique<gemma::SlidingDecoder>(std::move(h));
}

constexpr const char* kArchitectures[] = {"gemma2"};
constexpr kit::PluginDescription kPlugin{
    "gemma2",
    "0.1.0",
    "Gemma 2 transformer (alternating sliding-window layers, soft-capped attention and "
    "logits, post-norms, GeGLU)",
    kArchitectures,
    1,
    make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
