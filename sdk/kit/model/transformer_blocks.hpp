// Graph blocks several decoder families share, and the tensors each reads.
// Activations are [width, T] (row length first), T tokens in the batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/graph_builder.hpp"
#include "model/tensor_spec.hpp"
#include "model/transformer_hparams.hpp"

namespace dwell::model_kit {

// RMSNorm(x) times the weight vector `weight`.
int32_t rms_norm(const Builder& b, int32_t x, int32_t weight, float eps);

// weight x, plus `bias` broadcast over rows when bias >= 0.
int32_t linear(const Builder& b, int32_t weight, int32_t x, int32_t bias = -1);

struct AttentionOptions {
    int32_t rope_mode = DWELL_ROPE_NORM;  // DWELL_ROPE_NORM or DWELL_ROPE_NEOX
    float scale = 0.0f;                   // 0: 1 / sqrt(head_dim)
    bool qkv_bias = false;                // blk.L.attn_{q,k,v}.bias are read
    // Each head of Q and K RMS-normalised over its head_dim, times
    // blk.L.attn_{q,k}_norm.weight [head_dim], before RoPE (Qwen3).
    bool qk_norm = false;
    // false: no position encoding in this layer (SmolLM3's NoPE layers).
    bool rope = true;
    // The file's tensor of RoPE frequency factors [n_rot/2] (ABI 1.5), used
    // when the file has it: "rope_freqs.weight" (Llama 3); empty: none.
    std::string rope_factors{};
    // One blk.L.attn_qkv.weight [n_embd, q + 2 kv] holds the Q, K and V rows
    // in that order (Phi-3); its parts are row views (ABI 1.5 weight_rows).
    bool fused_qkv = false;
};

// Self-attention of `layer` on its normalised input x [n_embd, T]: Q/K/V
// projections (plus biases), RoPE on Q and K, causal GQA attention over the
// layer's KV cache, and the output projection -> [n_embd, T].
int32_t self_attention(const Builder& b, const TransformerHParams& h, int32_t layer, int32_t x,
                       int32_t positions, int64_t n_tokens, const AttentionOptions& o);

// The tensors self_attention reads for `layer` (attn_norm not included).
void add_attention_tensors(std::vector<TensorSpec>& t, const TransformerHParams& h, int32_t layer,
                           bool qkv_bias);
// The same for any options: fused or separate Q/K/V, and the Q/K norm
// weights when o.qk_norm.
void add_attention_tensors(std::vector<TensorSpec>& t, const TransformerHParams& h, int32_t layer,
                           const AttentionOptions& o);

// RMSNorm of each head_dim-long vector of x [head_dim, n_heads, T], times
// `weight` [head_dim] -> [head_dim, n_heads, T].
int32_t per_head_rms_norm(const Builder& b, int32_t x, int32_t weight, int64_t head_dim,
                          int64_t n_heads, int64_t n_tokens, float eps);

// How a dense gated feed-forward block combines its gate and up projections.
enum class GatedActivation {
    swiglu,  // SiLU(gate) * up, one fused op (Llama, Qwen2)
    geglu,   // GELU(gate) * up (Gemma)
};

// The dense gated feed-forward block of `layer` on its normalised input x
// [n_embd, T]: ffn_down(act(ffn_gate x, ffn_up x)) -> [n_embd, T].
int32_t gated_feed_forward(const Builder& b, int32_t layer, int32_t x, GatedActivation act);
// The same when blk.L.ffn_up.weight [n_embd, 2 n_ff] holds the gate rows,
// then the up rows (Phi-3), read as row views (ABI 1.5 weight_rows).
int32_t fused_gated_feed_forward(const Builder& b, const TransformerHParams& h, int32_t layer,
                                 int32_t x, GatedActivation act);
void add_fused_gated_feed_forward_tensors(std::vector<TensorSpec>& t, const TransformerHParams& h,
                                          int32_t layer);

// The tensors gated_feed_forward reads for `layer` (ffn_norm not included).
void add_gated_feed_forward_tensors(std::vector<TensorSpec>& t, const TransformerHParams& h,
                                    int32_t layer);

}  // namespace dwell::model_kit
