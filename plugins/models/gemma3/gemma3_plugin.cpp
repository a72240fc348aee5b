// Entry point of the gemma3 model-architecture plugin. Serves GGUF files
// whose general.architecture is "gemma3" (the Gemma 3 text models, 270M to
// 27B), with the semantics llama.cpp gives them: when
// attention.sliding_window is set, five local layers to one global one
// (attention.sliding_window_pattern, default 6), the local ones windowed and
// rotating with rope.freq_base_swa (default 10000, unscaled), the global
// ones with rope.freq_base and the file's RoPE scaling; QK-norm; no
// attention soft-cap; the final logits capped only when
// final_logit_softcapping is set; output.weight or the tied embeddings.
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "gemma_sliding_decoder.hpp"
#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;
namespace gemma = dwell::gemma;

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    gemma::SlidingHParams h;
    h.base = kit::read_transformer_hparams(meta, 1e-6f);
    gemma::read_sliding_keys(meta, h, 0, 0, 6, 10000.0f);
    h.rope_scale_swa = 1.0f;
    const std::string cap_key = meta.arch_key("final_logit_softcapping");
    h.final_softcap = meta.float_or(cap_key, 0.0f);
    if (h.final_softcap < 0.0f)
        throw std::runtime_error("metadata key " + cap_key + " must be >= 0 (0: no soft-cap)");
    h.attn_scale = gemma::gemma_attention_scale(h.base, 62);
    h.qk_norm = true;
    return std::make_unique<gemma::SlidingDecoder>(std::move(h));
}

constexpr const char* kArchitectures[] = {"gemma3"};
constexpr kit::PluginDescription kPlugin{
    "gemma3",
    "0.1.0",
    "Gemma 3 transformer (5 local : 1 global layers, local and global RoPE bases, QK-norm, "
    "post-norms, GeGLU)",
    kArchitectures,
    1,
    make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
