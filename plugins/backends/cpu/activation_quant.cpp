#include "activation_quant.hpp"

#include <cmath>
#include <cstring>

#include "dwell/quant.h"
#include "row_quantize.hpp"

namespace dwell::cpu {

ActFormat activation_format(dwell_dtype t) {
    // On synthetic 1.1B models against llama.cpp, ggml's formats for all types
    // gave min logit cosines Q4_K_M 0.9977 -> 0.9989 and Q8_0 0.99927 ->
    // 0.99939, but Q4_0 0.99903 -> 0.99859; only the K-quant and Q8_1 paths
    // are switched on until the Q8_0 one is understood and the integration
    // tests' f32 reference allows for activation rounding.
    constexpr bool kQ8_0FamilyAndHalves = false;
    const ActFormat f = ggml_activation_format(t);
    if (!kQ8_0FamilyAndHalves &&
        (f == ActFormat::Q8_0 || f == ActFormat::F16 || f == ActFormat::BF16)) {
        return ActFormat::F32;
    }
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

void quantize_act_q8_0(const float* x, dwell_block_q8_0* out, int64_t n) {
    // The SDK's Q8_0 encoder already is ggml's reference one (d = amax / 127,
    // q = roundf(x * (1 / d))), so the format keeps a single definition.
    dwell_quantize_row_q8_0(x, out, n);
}

void quantize_act_q8_1(const float* x, ActBlockQ8_1* out, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const float* xb = x + b * DWELL_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < DWELL_QK8_0; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < DWELL_QK8_0; ++j) {
            out[b].qs[j] = dwell_round_to_q8(xb[j] * id);
            sum += out[b].qs[j];
        }
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
