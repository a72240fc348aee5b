// Qwen3.5's hybrid decoder as a ModelFamily. Every layer is RMSNorm ->
// operator -> residual, post_attention_norm -> SwiGLU FFN -> residual; the
// operator is either gated full attention or a gated delta net:
//
// full attention (every full_attention_interval-th layer): attn_q gives a
// query and an output gate per head ([query | gate] per head), QK-norm,
// RoPE on the first n_rot dims (the text form of the interleaved
// multi-section RoPE: every section at the token's position, so NEOX),
// GQA attention, times sigmoid(gate), attn_output.
//
// gated delta net: attn_qkv's rows (q, k for each key head, then v for
// each value head) go through a causal depthwise convolution (ssm_conv1d,
// over the carried last d_conv - 1 inputs: state 0) and SiLU; q and k are
// L2-normalised; beta = sigmoid(ssm_beta x), g = softplus(ssm_alpha x +
// ssm_dt) * ssm_a; the delta rule runs over the carried per-head state
// (state 1, [head_k, head_v, n_v_heads]); the output is RMS-normalised per
// head (ssm_norm), times silu(attn_gate x), then ssm_out.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_kit.hpp"

namespace dwell::qwen35 {

struct Qwen35HParams {
    model_kit::TransformerHParams base;
    int64_t d_conv = 0;              // ssm.conv_kernel
    int64_t head_k = 0;              // ssm.state_size: key (and value) head size
    int64_t n_k_heads = 0;           // ssm.group_count
    int64_t n_v_heads = 0;           // ssm.time_step_rank
    std::vector<bool> linear_layer;  // per layer: a gated delta-net layer

    int64_t key_dim() const { return head_k * n_k_heads; }
    int64_t value_dim() const { return head_k * n_v_heads; }
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

// Reads and range-checks the hyper-parameters and the layer kinds; throws
// std::runtime_error with one line naming the key or tensor at fault.
Qwen35HParams read_qwen35_hparams(const model_kit::MetadataReader& m);

class Qwen35HybridDecoder : public model_kit::ModelFamily {
public:
    explicit Qwen35HybridDecoder(Qwen35HParams h) : h_(std::move(h)) {}

    dwell_model_info info() const override;
    std::vector<model_kit::TensorSpec> tensors() const override;
    void build_graph(const model_kit::Builder& b, const dwell_batch& batch) const override;

private:
    int32_t delta_net_block(const model_kit::Builder& b, int32_t layer, int32_t x, int64_t T) const;
    int32_t attention_block(const model_kit::Builder& b, int32_t layer, int32_t x,
                            int32_t positions, int64_t T) const;

    Qwen35HParams h_;
};

}  // namespace dwell::qwen35
