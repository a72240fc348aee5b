// How far a matmul may move from the f32-activation reference because the
// kernel first rounds each activation row to the weight dtype's activation
// format (activation_quant.hpp), as llama.cpp does. The bound is derived
// from the format's rounding step, so tests stay as tight as the format
// allows rather than using a blanket tolerance.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dwell/tensor.h"

namespace dwell::cpu::test {

// Bound on |sum w_i x_i - kernel result| beyond f32 accumulation error, for
// one weight row (raw bytes `row`, decoded values `w`) and activations x[k].
inline double activation_error_bound(dwell_dtype t, const uint8_t* row,
                                     const std::vector<double>& w, const float* x, int64_t k) {
    // Per element: the largest |x - x_rounded|, as a multiple of the block
    // step amax / 127 or of |x|.
    int64_t block = 0;
    double step_factor = 0.0;  // times amax / 127
    double rel = 0.0;          // times |x|
    switch (t) {
        case DWELL_Q4_0:
        case DWELL_Q5_0:
        case DWELL_Q8_0:
        case DWELL_Q4_1:
        case DWELL_Q5_1:
            // Half a step of rounding, plus the fp16 rounding of the step
            // (2^-11 relative) times |q| <= 127: 0.5 + 0.062 < 0.6.
            block = 32;
            step_factor = 0.6;
            break;
        case DWELL_Q4_K:
        case DWELL_Q5_K:
        case DWELL_Q6_K:
            // f32 step: half a step, plus slack for the f32 scale itself.
            block = 256;
            step_factor = 0.51;
            break;
        case DWELL_F16:
            rel = std::ldexp(1.0, -11);
            break;
        case DWELL_BF16:
            rel = std::ldexp(1.0, -8);
            break;
        default:
            return 0.0;
    }
    double bound = 0.0;
    for (int64_t i = 0; i < k; ++i) {
        double e = rel * std::fabs(x[i]) + 1e-30;
        if (block != 0) {
            const int64_t b0 = i / block * block;
            double amax = 0.0;
            for (int64_t j = b0; j < b0 + block; ++j)
                amax = std::max(amax, double(std::fabs(x[j])));
            e = step_factor * amax / 127.0;
        }
        bound += std::fabs(w[static_cast<size_t>(i)]) * e;
    }
    if (t == DWELL_Q4_1 || t == DWELL_Q5_1) {
        // The block offset m meets the activation through s = fp16(d * sum q):
        // that rounding adds up to |m| * sum|x| * 2^-11 (2^-10 for slack).
        const size_t block_bytes = t == DWELL_Q4_1 ? 20 : 24;
        for (int64_t b = 0; b < k / 32; ++b) {
            const uint8_t* p = row + static_cast<size_t>(b) * block_bytes;
            const double m = dwell_fp16_to_fp32(static_cast<uint16_t>(p[2] | (p[3] << 8)));
            double sx = 0.0;
            for (int64_t j = 32 * b; j < 32 * b + 32; ++j) sx += std::fabs(x[j]);
            bound += std::fabs(m) * sx * std::ldexp(1.0, -10);
        }
    }
    return bound;
}

}  // namespace dwell::cpu::test
