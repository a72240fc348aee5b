// Picks the next token from logits: greedy, or temperature sampling with
// top-k, top-p, min-p and a repetition penalty, reproducible from a seed.
//
// Order of the steps: repetition penalty on the last `repeat_last_n`
// accepted tokens (llama.cpp's rule: positive logits divided, negative
// multiplied), then top-k, softmax with temperature, top-p, min-p, and a
// draw. temperature <= 0 means greedy argmax (after the penalty).
//
// Thread-safety: none; one sampler per generation.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

#include "dwell/core/base/export.hpp"

namespace dwell {

struct SamplerParams {
    float temperature = 0.8f;
    int32_t top_k = 40;           // <= 0: off
    float top_p = 0.95f;          // >= 1: off
    float min_p = 0.05f;          // <= 0: off
    float repeat_penalty = 1.0f;  // 1: off
    int32_t repeat_last_n = 64;
    uint64_t seed = 0;
};

class DWELL_CORE_API Sampler {
public:
    explicit Sampler(const SamplerParams& params);  // throws on out-of-range params
    int32_t sample(std::span<const float> logits);
    void accept(int32_t token);  // record a token for the repetition penalty
    const SamplerParams& params() const { return params_; }

private:
    SamplerParams params_;
    std::mt19937_64 rng_;
    std::deque<int32_t> recent_;
    std::vector<std::pair<float, int32_t>> candidates_;  // reused between calls
    std::vector<int32_t> penalized_;                     // reused between calls
};

}  // namespace dwell
