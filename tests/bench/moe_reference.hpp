// A plain scalar forward pass of a Mixtral-style model (Llama attention,
// top-k mixture-of-experts FFN), one token at a time, in double precision.
// It shares no code with dwell's graph, plugins or kernels: the bench uses
// it to know which experts the router picks for each token, independently
// of what dwell reads, and to check dwell's logits.
//
// It copies the weights (F32 or F16) when made, so later steps never read
// the model's mapping.
//
// Thread-safety: none. Ownership: keeps its own copies of everything.
#pragma once

#include <cstdint>
#include <vector>

#include "dwell/core/model/model_source.hpp"

namespace dwell::bench {

struct MoeRouting {
    // Per layer, the experts chosen for the token, largest router logit first.
    std::vector<std::vector<int32_t>> experts;
    // Over all layers: the smallest gap between the k-th and (k+1)-th largest
    // router logit. A tiny gap means float rounding could flip the choice.
    double min_margin = 0;
};

class MoeReference {
public:
    // Throws std::runtime_error naming the key or tensor it cannot use.
    explicit MoeReference(const ModelSource& source);

    // Appends `token` at the next position; returns its logits.
    std::vector<float> step(int32_t token, MoeRouting* routing);

    int64_t n_layer() const { return n_layer_; }
    int64_t n_expert() const { return n_expert_; }
    int64_t n_expert_used() const { return n_used_; }
    bool tied_output() const { return tied_; }

private:
    using Matrix = std::vector<double>;  // rows of `cols` values
    struct Layer {
        Matrix attn_norm, wq, wk, wv, wo, ffn_norm, router;
        std::vector<Matrix> gate, up, down;  // per expert
        std::vector<double> k_cache, v_cache;
    };

    int64_t n_embd_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0, n_rot_ = 0, n_ff_ = 0;
    int64_t n_layer_ = 0, n_expert_ = 0, n_used_ = 0, n_vocab_ = 0;
    double rms_eps_ = 1e-5, rope_base_ = 10000.0;
    bool tied_ = false;
    Matrix token_embd_, output_norm_, output_;
    std::vector<Layer> layers_;
    int64_t n_past_ = 0;
};

}  // namespace dwell::bench
