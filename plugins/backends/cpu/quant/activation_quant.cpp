#include "quant/activation_quant.hpp"

#include <cmath>
#include <cstring>

#include "dwell/quant.h"
#include "quant/row_quantize.hpp"

namespace dwell::cpu {

ActFormat activation_format(dwell_dtype t) {
    // On synthetic 1.1B models against llama.cpp, ggml's formats for the
    // K-quants and Q8_0 bring dwell's logits closer to llama.cpp's (min
    // cosine Q4_K_M 0.9977 -> 0.9990, Q8_0 0.99927 -> 0.99950); Q4_0 moves
    // from 0.99899 to 0.99857, which rounding ties do not explain (tried
    // ties-to-even: no change). The int8 path is what the fast kernels
    // need, so every ggml block format takes it; F16 and BF16 weights keep
    // f32 activations (their dots are not integer).
    const ActFormat f = ggml_activation_format(t);
    if (f == ActFormat::F16 || f == ActFormat::BF16) return ActFormat::F32;
    return f;
}

ActFormat ggml_activation_format(dwell_dtype t) {
    switch (t) {
        case DWELL_Q4_0:
        case DWELL_Q5_0:
        case DWELL_Q8_0:
            return ActFormat::Q8_0;
        case DWELL_Q4_1:
        case DWELL_Q5_1:
            return ActFormat::Q8_1;
        case DWELL_Q4_K:
        case DWELL_Q5_K:
        case DWELL_Q6_K:
            return ActFormat::Q8_K;
        case DWELL_F16:
            return ActFormat::F16;
        case DWELL_BF16:
            return ActFormat::BF16;
        default:
            // F32 and dwell's own row formats have f32 dots with no ggml
            // counterpart to match.
            return ActFormat::F32;
    }
}

size_t activation_row_bytes(ActFormat f, int64_t n) {
    const auto un = static_cast<size_t>(n);
    size_t bytes = 0;
    switch (f) {
        case ActFormat::F32:
        case ActFormat::F16:
        case ActFormat::BF16:
            bytes = un * sizeof(float);
            break;
        case ActFormat::Q8_0:
            bytes = un / DWELL_QK8_0 * sizeof(dwell_block_q8_0);
            break;
        case ActFormat::Q8_1:
            bytes = un / DWELL_QK8_0 * sizeof(ActBlockQ8_1);
            break;
        case ActFormat::Q8_K:
            bytes = un / DWELL_QK_K * sizeof(ActBlockQ8_K);
            break;
    }
    constexpr size_t a = alignof(ActBlockQ8_K);
    return (bytes + a - 1) / a * a;
}

// llama.cpp's vectorised Q8_0/Q8_1 quantizers (the ones that run on any
// x86-64 with AVX2 and on NEON) scale by 127 / amax and round half to even,
// unlike its scalar reference (1 / d, halves away from zero). Following them
// moved dwell's Q4_0 logits from a min cosine of 0.99857 to 0.99935 against
// llama.cpp on a synthetic 1.1B model: ties are frequent where activations
// are whole multiples of a step, as in Q4_0 embeddings.
namespace {

// One block of 32: the int8 values into qs; returns the f32 step.
float quantize_block_of_32(const float* x, int8_t* qs) {
    float amax = 0.0f;
    for (int j = 0; j < DWELL_QK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < DWELL_QK8_0; ++j) {
        const float r = std::nearbyint(x[j] * id);
        // NaN (also inf * 0) to 0 and the rest clamped, as dwell_round_to_q8
        // does: a float outside int8 must never reach the cast.
        qs[j] = !(r > -127.0f) ? (r == r ? -127 : 0) : r >= 127.0f ? 127 : static_cast<int8_t>(r);
    }
    return amax / 127.0f;
}

}  // namespace

void quantize_act_q8_0(const float* x, dwell_block_q8_0* out, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        out[b].d = dwell_fp32_to_fp16(quantize_block_of_32(x + b * DWELL_QK8_0, out[b].qs));
    }
}

void quantize_act_q8_1(const float* x, ActBlockQ8_1* out, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const float d = quantize_block_of_32(x + b * DWELL_QK8_0, out[b].qs);
        int sum = 0;
        for (int j = 0; j < DWELL_QK8_0; ++j) sum += out[b].qs[j];
        out[b].d = dwell_fp32_to_fp16(d);
        // ggml scales the sum by the f32 step, not its fp16 rounding.
        out[b].s = dwell_fp32_to_fp16(static_cast<float>(sum) * d);
    }
}

void quantize_act_q8_K(const float* x, ActBlockQ8_K* out, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b) {
        const float* xb = x + b * DWELL_QK_K;
        ActBlockQ8_K& y = out[b];
        // The first value of largest magnitude, with its sign: ggml scales by
        // -127 / max so that value lands on -127 and q never needs -128.
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < DWELL_QK_K; ++j) {
            const float ax = std::fabs(xb[j]);
            if (ax > amax) {
                amax = ax;
                max = xb[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y, 0, sizeof y);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < DWELL_QK_K; ++j) {
            // ggml rounds half to even here (its nearest_int), unlike Q8_0's
            // roundf; lrint does the same in the default rounding mode.
            const long v = std::lrint(iscale * xb[j]);
            y.qs[j] = static_cast<int8_t>(v > 127 ? 127 : (v < -128 ? -128 : v));
        }
        for (int g = 0; g < DWELL_QK_K / 16; ++g) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += y.qs[16 * g + j];
            y.bsums[g] = static_cast<int16_t>(sum);
        }
        y.d = 1.0f / iscale;
    }
}

void quantize_activation(ActFormat f, const float* x, void* out, int64_t n) {
    switch (f) {
        case ActFormat::F32:
            std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
            return;
        case ActFormat::F16: {
            auto* y = static_cast<float*>(out);
            for (int64_t i = 0; i < n; ++i) y[i] = dwell_fp16_to_fp32(dwell_fp32_to_fp16(x[i]));
            return;
        }
        case ActFormat::BF16: {
            auto* y = static_cast<float*>(out);
            for (int64_t i = 0; i < n; ++i) y[i] = dwell_bf16_to_fp32(fp32_to_bf16(x[i]));
            return;
        }
        case ActFormat::Q8_0:
            return quantize_act_q8_0(x, static_cast<dwell_block_q8_0*>(out), n);
        case ActFormat::Q8_1:
            return quantize_act_q8_1(x, static_cast<ActBlockQ8_1*>(out), n);
        case ActFormat::Q8_K:
            return quantize_act_q8_K(x, static_cast<ActBlockQ8_K*>(out), n);
    }
}

}  // namespace dwell::cpu
