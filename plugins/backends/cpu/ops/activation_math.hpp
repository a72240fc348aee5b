// Scalar activation and softmax math shared by several kernels, written to
// round like ggml's reference CPU code.
//
// Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

namespace dwell::cpu {

inline float silu(float x) {
    return x / (1.0f + std::exp(-x));
}

// y = softmax(x) over n values; x and y may be the same array. The exps are
// f32, their sum is accumulated in double (as ggml does) so long rows do not
// lose small terms.
inline void softmax_row(const float* x, float* y, int64_t n) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(x[i] - max);
        y[i] = e;
        sum += e;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

}  // namespace dwell::cpu
