// LFM2's hybrid decoder as a ModelFamily. Every layer is RMSNorm -> operator
// -> residual, RMSNorm -> SwiGLU FFN -> residual; the operator is either
// self-attention (GQA, per-head QK-norm, NEOX RoPE) or a gated short
// convolution:
//   b, c, x = the three n_embd-row parts of shortconv.in_proj times the input
//   y = shortconv.out_proj (c * SHORT_CONV(b * x, shortconv.conv, state))
// where the convolution runs over the layer's carried state (the last
// L_cache - 1 values of b * x of the sequence, per channel) and advances it.
// The final norm is token_embd_norm.weight; the output projection is
// output.weight, or the token embeddings when the file has none.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_kit.hpp"

namespace dwell::lfm2 {

struct Lfm2HParams {
    model_kit::TransformerHParams base;  // n_head_kv: that of the attention layers
    int64_t l_cache = 0;                 // taps of the convolution (shortconv.l_cache)
    std::vector<bool> conv_layer;        // per layer: a short-convolution layer
};

// Reads and range-checks the hyper-parameters and the layer kinds; throws
// std::runtime_error with one line naming the key or tensor at fault.
Lfm2HParams read_lfm2_hparams(const model_kit::MetadataReader& m);

class Lfm2HybridDecoder : public model_kit::ModelFamily {
public:
    explicit Lfm2HybridDecoder(Lfm2HParams h) : h_(std::move(h)) {}

    dwell_model_info info() const override;
    std::vector<model_kit::TensorSpec> tensors() const override;
    void build_graph(const model_kit::Builder& b, const dwell_batch& batch) const override;

private:
    int32_t short_conv_block(const model_kit::Builder& b, int32_t layer, int32_t x) const;

    Lfm2HParams h_;
};

}  // namespace dwell::lfm2
