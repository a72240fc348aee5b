// The Gemma 2 / Gemma 3 decoder, shared by the gemma2 and gemma3 plugins:
// embeddings scaled by sqrt(n_embd); per layer RMSNorm -> attention ->
// RMSNorm (post-attention) -> residual, RMSNorm -> GeGLU FFN -> RMSNorm
// (post-FFN) -> residual; the final RMSNorm and the output projection
// (the token embeddings when tied), optionally soft-capped.
//
// Sliding-window ("local") layers attend over the last n_swa positions
// (ATTENTION's window, ABI 1.5) and rotate with their own RoPE base; the
// others ("global") see every position. Gemma 2 caps attention logits;
// Gemma 3 normalises Q and K per head instead (QK-norm). GGUF files hold
// every norm weight with Gemma's "+1" folded in, so they multiply as they
// are.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_kit.hpp"

namespace dwell::gemma {

struct SlidingHParams {
    model_kit::TransformerHParams base;
    int64_t n_swa = 0;         // window of the local layers (0: none are local)
    std::vector<bool> is_swa;  // per layer
    float rope_base_swa = 10000.0f;
    float rope_scale_swa = 1.0f;
    float attn_scale = 0.0f;     // applied to q . k
    float attn_softcap = 0.0f;   // 0: none (Gemma 3)
    float final_softcap = 0.0f;  // 0: none
    bool qk_norm = false;        // Gemma 3
    bool always_tied = false;    // Gemma 2 ignores output.weight
};

// The local layers of llama.cpp's pattern rule: with n_pattern p, layer l
// is local when p == 0 or l % p < p - 1 (every p-th layer is global).
std::vector<bool> swa_pattern(int32_t n_layer, int64_t n_pattern);

// Reads and range-checks the keys both families share (pattern, window,
// local RoPE base, head-size overrides); `default_window`,
// `default_pattern` and `default_base_swa` are the family's defaults.
// Throws std::runtime_error naming the key at fault.
void read_sliding_keys(const model_kit::MetadataReader& m, SlidingHParams& h,
                       int64_t default_window, int64_t min_window, int64_t default_pattern,
                       float default_base_swa);

// Gemma's query scale: 1 / sqrt(head_dim), except for the 27B shapes
// (n_layer == layers_27b), which use 1 / sqrt(n_embd / n_head).
float gemma_attention_scale(const model_kit::TransformerHParams& h, int32_t layers_27b);

class SlidingDecoder : public model_kit::ModelFamily {
public:
    explicit SlidingDecoder(SlidingHParams h);

    dwell_model_info info() const override { return h_.base.model_info(); }
    std::vector<model_kit::TensorSpec> tensors() const override;
    void build_graph(const model_kit::Builder& b, const dwell_batch& batch) const override;

private:
    int32_t attention(const model_kit::Builder& b, int32_t layer, int32_t x, int32_t positions,
                      int64_t n_tokens) const;

    SlidingHParams h_;
};

}  // namespace dwell::gemma
