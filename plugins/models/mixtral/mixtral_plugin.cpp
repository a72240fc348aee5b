// Entry point of the mixtral model-architecture plugin. Serves the
// mixture-of-experts variant of general.architecture "llama" (Mixtral 8x7B,
// 8x22B and models converted to the same layout): files whose
// llama.expert_count is above 0. It declines dense "llama" files, which the
// llama plugin serves. The graph is the kit's Llama-style decoder with a
// mixture-of-experts feed-forward block in every layer (the kit's moe_feed_forward.hpp).
#include <memory>

#include "mixtral_hparams.hpp"
#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

class Mixtral final : public kit::DecoderFamily {
public:
    explicit Mixtral(const dwell::mixtral::HParams& h)
        : DecoderFamily(h, {.attention = {.rope_mode = DWELL_ROPE_NORM}}),
          moe_{h.n_embd, h.n_ff, h.n_expert, h.n_expert_used} {}

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
    return std::make_unique<Mixtral>(dwell::mixtral::read_hparams(meta));
}

constexpr const char* kArchitectures[] = {"llama"};
constexpr kit::PluginDescription kPlugin{
    "mixtral",
    "0.1.0",
    "Mixtral mixture-of-experts Llama (top-k expert routing; unchosen experts are not read)",
    kArchitectures,
    1,
    make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
