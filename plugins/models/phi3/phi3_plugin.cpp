// Entry point of the phi3 model-architecture plugin. Serves GGUF files whose
// general.architecture is "phi3" (Phi-3, Phi-3.5-mini, Phi-4-mini): the
// kit's decoder with NEOX RoPE over the first rope.dimension_count dims of
// each head (partial rotary), one fused attn_qkv weight, one ffn_up weight
// holding the SwiGLU gate rows then the up rows, and LongRoPE: per-pair
// frequency factors rope_factors_short.weight, or rope_factors_long.weight
// when the session's context exceeds rope.scaling.original_context_length,
// with rope.scaling.attn_factor scaling cos and sin. Its sliding window key
// is read by no one: the reference runtime disables Phi-3's window too.
#include <algorithm>
#include <memory>

#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

constexpr const char* kShortFactors = "rope_factors_short.weight";
constexpr const char* kLongFactors = "rope_factors_long.weight";

class Phi3Family : public kit::ModelFamily {
public:
    Phi3Family(const kit::TransformerHParams& h, int64_t n_ctx_orig)
        : short_(h, layout(kShortFactors)),
          long_(h, layout(kLongFactors)),
          n_ctx_orig_(n_ctx_orig) {}

    dwell_model_info info() const override { return short_.info(); }

    std::vector<kit::TensorSpec> tensors() const override {
        std::vector<kit::TensorSpec> t = short_.tensors();
        for (const kit::TensorSpec& s : long_.tensors())
            if (s.name == kLongFactors) t.push_back(s);
        return t;
    }

    void build_graph(const kit::Builder& b, const dwell_batch& batch) const override {
        // A host before ABI 1.5 does not say its context: the short factors,
        // right for contexts up to the original length.
        const bool long_context =
            DWELL_HAS_FIELD(&batch, dwell_batch, n_ctx) && batch.n_ctx > n_ctx_orig_;
        (long_context ? long_ : short_).build_graph(b, batch);
    }

private:
    static kit::DecoderLayout layout(const char* factors) {
        return {
            .attention = {.rope_mode = DWELL_ROPE_NEOX, .rope_factors = factors, .fused_qkv = true},
            .feed_forward = kit::GatedActivation::swiglu,
            .fused_gate_up = true};
    }

    kit::DecoderFamily short_;
    kit::DecoderFamily long_;
    int64_t n_ctx_orig_;
};

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    const std::string eps = meta.arch_key("attention.layer_norm_rms_epsilon");
    if (!meta.has(eps)) throw std::runtime_error("metadata key " + eps + " is missing");
    const kit::TransformerHParams h = kit::read_transformer_hparams(meta);
    if (h.q_width() != h.n_embd)
        throw std::runtime_error(meta.arch_key("attention.key_length") + " times head_count (" +
                                 std::to_string(h.q_width()) + ") must equal embedding_length (" +
                                 std::to_string(h.n_embd) + ") for phi3");
    const int64_t n_ctx_orig = meta.int_or(meta.arch_key("rope.scaling.original_context_length"),
                                           h.n_ctx_train, 1, int64_t{1} << 24);
    return std::make_unique<Phi3Family>(h, n_ctx_orig);
}

constexpr const char* kArchitectures[] = {"phi3"};
constexpr kit::PluginDescription kPlugin{
    "phi3",
    "0.1.0",
    "Phi-3 transformer (fused QKV and gate/up, partial NEOX RoPE with LongRoPE factors)",
    kArchitectures,
    1,
    make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
