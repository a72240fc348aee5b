#include "model/transformer_blocks.hpp"

#include <cmath>

namespace dwell::model_kit {

int32_t rms_norm(const Builder& b, int32_t x, int32_t weight, float eps) {
    return b.op(DWELL_OP_MUL, {b.op(DWELL_OP_RMS_NORM, {x}, {}, {eps}), weight});
}

int32_t linear(const Builder& b, int32_t weight, int32_t x, int32_t bias) {
    const int32_t y = b.op(DWELL_OP_MATMUL, {weight, x});
    return bias >= 0 ? b.op(DWELL_OP_ADD, {y, bias}) : y;
}

int32_t self_attention(const Builder& b, const TransformerHParams& h, int32_t layer, int32_t x,
                       int32_t positions, int64_t n_tokens, const AttentionOptions& o) {
    const auto bias = [&](const char* what) {
        return o.qkv_bias ? b.weight(layer_tensor(layer, what, "bias")) : -1;
    };
    const auto projection = [&](const char* what, int64_t first_row, int64_t rows) {
        if (!o.fused_qkv) return linear(b, b.weight(layer_tensor(layer, what)), x, bias(what));
        return linear(b, b.weight_rows(layer_tensor(layer, "attn_qkv"), first_row, rows), x);
    };
    int32_t q = projection("attn_q", 0, h.q_width());
    int32_t k = projection("attn_k", h.q_width(), h.kv_width());
    int32_t v = projection("attn_v", h.q_width() + h.kv_width(), h.kv_width());
    q = b.reshape(q, {h.head_dim, h.n_head, n_tokens});
    k = b.reshape(k, {h.head_dim, h.n_head_kv, n_tokens});
    v = b.reshape(v, {h.head_dim, h.n_head_kv, n_tokens});
    if (o.qk_norm) {
        q = per_head_rms_norm(b, q, b.weight(layer_tensor(layer, "attn_q_norm")), h.head_dim,
                              h.n_head, n_tokens, h.rms_eps);
        k = per_head_rms_norm(b, k, b.weight(layer_tensor(layer, "attn_k_norm")), h.head_dim,
                              h.n_head_kv, n_tokens, h.rms_eps);
    }
    int32_t factors = o.rope_factors.empty() ? -1 : b.optional_weight(o.rope_factors);
    if (o.rope && !h.rope_freq_factors.empty()) {
        // Angles divide by both: the product is the one factor per pair.
        const int32_t computed =
            b.constant("rope_scaling_factors", {static_cast<int64_t>(h.rope_freq_factors.size())},
                       h.rope_freq_factors);
        factors = factors < 0 ? computed : b.op(DWELL_OP_MUL, {factors, computed});
    }
    const auto rope = [&](int32_t t) {
        // Two fparams and two inputs without factors: what a pre-1.5 backend runs.
        if (factors < 0 && h.rope_attn_factor == 1.0f)
            return b.op(DWELL_OP_ROPE, {t, positions}, {o.rope_mode, h.n_rot},
                        {h.rope_freq_base, h.rope_freq_scale});
        if (factors < 0)
            return b.op(DWELL_OP_ROPE, {t, positions}, {o.rope_mode, h.n_rot},
                        {h.rope_freq_base, h.rope_freq_scale, h.rope_attn_factor});
        return b.op(DWELL_OP_ROPE, {t, positions, factors}, {o.rope_mode, h.n_rot},
                    {h.rope_freq_base, h.rope_freq_scale, h.rope_attn_factor});
    };
    if (o.rope) {
        q = rope(q);
        k = rope(k);
    }
    const float scale =
        o.scale != 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(h.head_dim));
    int32_t attn =
        b.op(DWELL_OP_ATTENTION, {q, k, v, b.kv(layer, 0), b.kv(layer, 1), positions}, {}, {scale});
    attn = b.reshape(attn, {h.q_width(), n_tokens});
    return b.op(DWELL_OP_MATMUL, {b.weight(layer_tensor(layer, "attn_output")), attn});
}

void add_attention_tensors(std::vector<TensorSpec>& t, const TransformerHParams& h, int32_t layer,
                           bool qkv_bias) {
    t.push_back({layer_tensor(layer, "attn_q"), {h.n_embd, h.q_width()}});
    t.push_back({layer_tensor(layer, "attn_k"), {h.n_embd, h.kv_width()}});
    t.push_back({layer_tensor(layer, "attn_v"), {h.n_embd, h.kv_width()}});
    if (qkv_bias) {
        t.push_back({layer_tensor(layer, "attn_q", "bias"), {h.q_width()}});
        t.push_back({layer_tensor(layer, "attn_k", "bias"), {h.kv_width()}});
        t.push_back({layer_tensor(layer, "attn_v", "bias"), {h.kv_width()}});
    }
    t.push_back({layer_tensor(layer, "attn_output"), {h.q_width(), h.n_embd}});
}

int32_t per_head_rms_norm(const Builder& b, int32_t x, int32_t weight, int64_t head_dim,
                          int64_t n_heads, int64_t n_tokens, float eps) {
    // RMS_NORM and the weight's broadcast work on rows: one row per head.
    const int32_t rows = b.reshape(x, {head_dim, n_heads * n_tokens});
    return b.reshape(rms_norm(b, rows, weight, eps), {head_dim, n_heads, n_tokens});
}

namespace {

int32_t gated_down(const Builder& b, int32_t layer, int32_t gate, int32_t up, GatedActivation act) {
    const int32_t hidden = act == GatedActivation::swiglu
                               ? b.op(DWELL_OP_SWIGLU, {gate, up})
                               : b.op(DWELL_OP_MUL, {b.op(DWELL_OP_GELU, {gate}), up});
    return b.op(DWELL_OP_MATMUL, {b.weight(layer_tensor(layer, "ffn_down")), hidden});
}

}  // namespace

int32_t gated_feed_forward(const Builder& b, int32_t layer, int32_t x, GatedActivation act) {
    const int32_t gate = b.op(DWELL_OP_MATMUL, {b.weight(layer_tensor(layer, "ffn_gate")), x});
    const int32_t up = b.op(DWELL_OP_MATMUL, {b.weight(layer_tensor(layer, "ffn_up")), x});
    return gated_down(b, layer, gate, up, act);
}

int32_t fused_gated_feed_forward(const Builder& b, const TransformerHParams& h, int32_t layer,
                                 int32_t x, GatedActivation act) {
    const std::string fused = layer_tensor(layer, "ffn_up");
    const int32_t gate = b.op(DWELL_OP_MATMUL, {b.weight_rows(fused, 0, h.n_ff), x});
    const int32_t up = b.op(DWELL_OP_MATMUL, {b.weight_rows(fused, h.n_ff, h.n_ff), x});
    return gated_down(b, layer, gate, up, act);
}

void add_fused_gated_feed_forward_tensors(std::vector<TensorSpec>& t, const TransformerHParams& h,
                                          int32_t layer) {
    t.push_back({layer_tensor(layer, "ffn_up"), {h.n_embd, 2 * h.n_ff}});
    t.push_back({layer_tensor(layer, "ffn_down"), {h.n_ff, h.n_embd}});
}

void add_attention_tensors(std::vector<TensorSpec>& t, const TransformerHParams& h, int32_t layer,
                           const AttentionOptions& o) {
    if (o.fused_qkv) {
        t.push_back({layer_tensor(layer, "attn_qkv"), {h.n_embd, h.q_width() + 2 * h.kv_width()}});
        t.push_back({layer_tensor(layer, "attn_output"), {h.q_width(), h.n_embd}});
    } else {
        add_attention_tensors(t, h, layer, o.qkv_bias);
    }
    if (o.qk_norm) {
        t.push_back({layer_tensor(layer, "attn_q_norm"), {h.head_dim}});
        t.push_back({layer_tensor(layer, "attn_k_norm"), {h.head_dim}});
    }
}

void add_gated_feed_forward_tensors(std::vector<TensorSpec>& t, const TransformerHParams& h,
                                    int32_t layer) {
    t.push_back({layer_tensor(layer, "ffn_gate"), {h.n_embd, h.n_ff}});
    t.push_back({layer_tensor(layer, "ffn_up"), {h.n_embd, h.n_ff}});
    t.push_back({layer_tensor(layer, "ffn_down"), {h.n_ff, h.n_embd}});
}

}  // namespace dwell::model_kit
