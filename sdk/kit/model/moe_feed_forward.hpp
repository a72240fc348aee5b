// The mixture-of-experts feed-forward block of Mixtral-style models
// (Mixtral, Qwen3-MoE): a router picks, per token, the k experts with the
// largest logits and weights them by the softmax of those k logits (the
// softmax over all experts renormalised over the chosen ones, which is the
// same); each chosen expert is a SwiGLU FFN, and the block's output is their
// weighted sum.
// Only the chosen experts' weight rows are read (EXPERT_MATMUL).
#pragma once

#include <cstdint>
#include <vector>

#include "model/graph_builder.hpp"
#include "model/tensor_spec.hpp"

namespace dwell::model_kit {

struct MoeShape {
    int64_t n_embd = 0;
    int64_t n_ff = 0;  // rows of one expert's gate/up projection
    int64_t n_expert = 0;
    int64_t n_expert_used = 0;
};

// x [n_embd, T], already normalised -> [n_embd, T]. Reads the layer's
// ffn_gate_inp (router), ffn_gate_exps, ffn_up_exps and ffn_down_exps.
int32_t moe_feed_forward(const Builder& b, const MoeShape& s, int32_t layer, int32_t x,
                         int64_t n_tokens);

// The tensors moe_feed_forward reads for `layer`.
void add_moe_tensors(std::vector<TensorSpec>& t, const MoeShape& s, int32_t layer);

}  // namespace dwell::model_kit
