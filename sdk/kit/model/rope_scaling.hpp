// How a family's RoPE is scaled beyond its trained context, read once from
// the "<arch>.rope.scaling.*" keys for every family: none, linear (positions
// divided by the factor), longrope (the family reads its factor tensors) or
// YaRN. YaRN keeps the fastest-turning pairs as trained (extrapolated),
// divides the slowest by the factor (interpolated) and ramps between them;
// its per-pair factors feed ROPE's in2 (ABI 1.5) and its magnitude scaling
// the ROPE attention factor, so backends need nothing new.
#pragma once

#include <cstdint>
#include <vector>

#include "model/metadata_reader.hpp"

namespace dwell::model_kit {

struct RopeScaling {
    float freq_scale = 1.0f;   // ROPE fparams[1]
    float attn_factor = 1.0f;  // ROPE fparams[2], rope.scaling.attn_factor included
    // ROPE in2 divisors of each pair's angle [n_rot/2] (YaRN); empty: none.
    std::vector<float> freq_factors;
    bool yarn = false;
};

// The YaRN knobs, as the file gives them or their defaults.
struct YarnParams {
    float factor = 1.0f;     // rope.scaling.factor: context extension, >= 1
    int64_t n_ctx_orig = 0;  // rope.scaling.original_context_length
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
    float ext_factor = 1.0f;   // how far the ramp mixes extrapolation in, 0..1
    float attn_factor = 1.0f;  // rope.scaling.yarn_attn_factor, used when ext_factor is 0
    float log_multiplier = 0.0f;
};

// The per-pair divisors f_i = 1 / (s (1 - r_i) + r_i), s = 1 / factor and
// r_i = ramp_i * ext_factor: ramp_i is 1 for pairs below the correction
// range [lo, hi] (the pairs that turn at least beta_fast times over the
// original context), 0 above it (fewer than beta_slow turns) and linear in
// between; lo = max(0, floor(d(beta_fast))), hi = min(n_rot - 1,
// ceil(d(beta_slow))), d(b) = n_rot ln(n_ctx_orig / (2 pi b)) / (2 ln base).
std::vector<float> yarn_frequency_factors(const YarnParams& p, int32_t n_rot, float freq_base);

// The magnitude scaling of cos and sin: 1 + 0.1 ln(factor) (1 for a factor
// of 1), divided by 1 + m ln(factor) when the file gives a log multiplier m
// (stored as 0.1 times the "mscale_all_dim" of the model's config);
// yarn_attn_factor alone when ext_factor is 0.
float yarn_attn_factor(const YarnParams& p);

// Throws std::runtime_error with a one-line reason naming the key at fault:
// an unknown type, or a value out of range.
RopeScaling read_rope_scaling(const MetadataReader& m, int32_t n_rot, float freq_base);

}  // namespace dwell::model_kit
