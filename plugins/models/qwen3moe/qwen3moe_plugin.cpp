// Entry point of the qwen3moe model-architecture plugin. Serves GGUF files
// whose general.architecture is "qwen3moe" (Qwen3-30B-A3B, Qwen3-235B-A22B):
// Qwen3's attention (per-head QK-norm, NEOX RoPE, no biases) and in every
// layer a mixture-of-experts feed-forward block with no shared expert: the
// router's top expert_used_count of expert_count experts, weighted by their
// softmax probabilities renormalised to sum 1 (the kit's moe_feed_forward),
// each expert a SwiGLU FFN of expert_feed_forward_length rows.
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

// The most experts a layer may have (twice the 128 of the published models,
// as the mixtral plugin allows).
constexpr int64_t kMaxExperts = 256;

struct HParams {
    kit::TransformerHParams base;
    kit::MoeShape moe;
};

HParams read_hparams(const kit::MetadataReader& meta) {
    HParams h;
    h.base = kit::read_transformer_hparams(meta);
    kit::require_full_rope_and_rms_eps(meta, h.base);
    const int64_t n_expert = meta.require_int(meta.arch_key("expert_count"), 1, kMaxExperts);
    const int64_t n_used = meta.require_int(meta.arch_key("expert_used_count"), 1, n_expert);
    // Files without the key get what the reference implementation assumes.
    const std::string ff_key = meta.arch_key("expert_feed_forward_length");
    const int64_t n_ff_exp = meta.int_or(ff_key, h.base.n_ff / n_used, 1, 1 << 22);
    if (n_ff_exp < 1) {
        throw std::runtime_error("metadata key " + ff_key + " is missing and " +
                                 meta.arch_key("feed_forward_length") +
                                 " / expert_used_count is 0");
    }
    h.moe = {h.base.n_embd, n_ff_exp, n_expert, n_used};
    return h;
}

class Qwen3Moe final : public kit::DecoderFamily {
public:
    explicit Qwen3Moe(const HParams& h)
        : DecoderFamily(h.base, {.attention = {.rope_mode = DWELL_ROPE_NEOX, .qk_norm = true}}),
          moe_(h.moe) {}

protected:
    int32_t feed_forward(const kit::Builder& b, int32_t layer, int32_t x,
                         int64_t n_tokens) const override {
        return kit::moe_feed_forward(b, moe_, layer, x, n_tokens);
    }
    void add_feed_forward_tensors(std::vector<kit::TensorSpec>& t, int32_t layer) const override {
        kit::add_moe_tensors(t, moe_, layer);
    }

private:
    kit::MoeShape moe_;
};

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    return std::make_unique<Qwen3Moe>(read_hparams(meta));
}

constexpr const char* kArchitectures[] = {"qwen3moe"};
constexpr kit::PluginDescription kPlugin{
    "qwen3moe",
    "0.1.0",
    "Qwen3 mixture of experts (QK-norm attention; normalised top-k routing, no shared expert)",
    kArchitectures,
    1,
    make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
