#include "model/moe_feed_forward.hpp"

namespace dwell::model_kit {

int32_t moe_feed_forward(const Builder& b, const MoeShape& s, int32_t layer, int32_t x,
                         int64_t n_tokens) {
    const int64_t k = s.n_expert_used;
    const int32_t logits =
        b.op(DWELL_OP_MATMUL, {b.weight(layer_tensor(layer, "ffn_gate_inp")), x});    // [E, T]
    const int32_t chosen = b.op(DWELL_OP_TOPK, {logits}, {static_cast<int32_t>(k)});  // I32 [k, T]
    const int32_t weights = b.op(DWELL_OP_SOFTMAX, {b.op(DWELL_OP_GATHER, {logits, chosen})});

    const int32_t gate =
        b.op(DWELL_OP_EXPERT_MATMUL, {b.weight(layer_tensor(layer, "ffn_gate_exps")), x, chosen});
    const int32_t up =
        b.op(DWELL_OP_EXPERT_MATMUL, {b.weight(layer_tensor(layer, "ffn_up_exps")), x, chosen});
    int32_t hidden = b.op(DWELL_OP_SWIGLU, {gate, up});  // [n_ff, k, T]

    // Each (token, slot) has its own input to the down projection: seen as
    // k * T tokens routed to one expert each, it is the per-token form of
    // EXPERT_MATMUL that every backend implements.
    hidden = b.reshape(hidden, {s.n_ff, k * n_tokens});
    const int32_t one_each = b.reshape(chosen, {1, k * n_tokens});
    int32_t down = b.op(DWELL_OP_EXPERT_MATMUL,
                        {b.weight(layer_tensor(layer, "ffn_down_exps")), hidden, one_each});
    down = b.reshape(down, {s.n_embd, k, n_tokens});
    return b.op(DWELL_OP_MOE_COMBINE, {down, weights});
}

void add_moe_tensors(std::vector<TensorSpec>& t, const MoeShape& s, int32_t layer) {
    t.push_back({layer_tensor(layer, "ffn_gate_inp"), {s.n_embd, s.n_expert}});
    t.push_back({layer_tensor(layer, "ffn_gate_exps"), {s.n_embd, s.n_ff, s.n_expert}});
    t.push_back({layer_tensor(layer, "ffn_up_exps"), {s.n_embd, s.n_ff, s.n_expert}});
    t.push_back({layer_tensor(layer, "ffn_down_exps"), {s.n_ff, s.n_embd, s.n_expert}});
}

}  // namespace dwell::model_kit
