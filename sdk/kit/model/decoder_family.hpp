// The decoder-only transformer as the families here lay it out, written
// once as a ModelFamily: the token embedding (optionally scaled by
// sqrt(n_embd)); per layer RMSNorm -> self-attention -> residual, RMSNorm ->
// feed-forward -> residual; the final RMSNorm of the wanted rows and the
// output projection (output.weight, or the token embeddings when tied).
//
// A family gives its hyper-parameters and a DecoderLayout for what varies;
// one whose feed-forward block is not a dense gated FFN (mixture of experts)
// derives and overrides feed_forward() and add_feed_forward_tensors().
#pragma once

#include <cstdint>
#include <vector>

#include "dwell/model.h"
#include "model/graph_builder.hpp"
#include "model/model_plugin_entry.hpp"
#include "model/tensor_spec.hpp"
#include "model/transformer_blocks.hpp"
#include "model/transformer_hparams.hpp"

namespace dwell::model_kit {

struct DecoderLayout {
    AttentionOptions attention;
    GatedActivation feed_forward = GatedActivation::swiglu;  // of the default (dense) block
    bool scaled_embeddings = false;  // the looked-up embeddings times sqrt(n_embd) (Gemma)
    // The output projection is always the token embeddings: output.weight is
    // neither declared nor read, whatever the file holds (Gemma).
    bool always_tied_output = false;
    // blk.L.ffn_up.weight holds the gate rows, then the up rows; there is no
    // ffn_gate (Phi-3).
    bool fused_gate_up = false;
};

class DecoderFamily : public ModelFamily {
public:
    DecoderFamily(const TransformerHParams& h, const DecoderLayout& layout);

    dwell_model_info info() const override { return h_.model_info(); }
    std::vector<TensorSpec> tensors() const override;
    void build_graph(const Builder& b, const dwell_batch& batch) const override;

protected:
    const TransformerHParams& hparams() const { return h_; }
    const DecoderLayout& layout() const { return layout_; }

    // The attention options of `layer`; by default the layout's for every
    // layer. A family whose layers differ (NoPE layers) overrides it.
    virtual AttentionOptions attention_options(int32_t layer) const;

    // The feed-forward block of `layer` on its normalised input x
    // [n_embd, T] -> [n_embd, T]; by default the layout's dense gated FFN.
    virtual int32_t feed_forward(const Builder& b, int32_t layer, int32_t x,
                                 int64_t n_tokens) const;
    // The tensors feed_forward reads for `layer` (ffn_norm not included).
    virtual void add_feed_forward_tensors(std::vector<TensorSpec>& t, int32_t layer) const;

private:
    TransformerHParams h_;
    DecoderLayout layout_;
};

}  // namespace dwell::model_kit
