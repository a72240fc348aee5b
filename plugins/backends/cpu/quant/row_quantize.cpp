#include "quant/row_quantize.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "dwell/quant.h"

namespace dwell::cpu {

uint16_t fp32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        // Force the quiet bit so truncation cannot turn a NaN into an inf.
        return static_cast<uint16_t>((u >> 16) | 64u);
    }
    return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// The block formats are defined once, by the SDK's reference encoders.
void quantize_row_q8_0(const float* x, void* out, int64_t n) {
    dwell_quantize_row_q8_0(x, static_cast<dwell_block_q8_0*>(out), n);
}

void quantize_row_q4_0(const float* x, void* out, int64_t n) {
    dwell_quantize_row_q4_0(x, static_cast<dwell_block_q4_0*>(out), n);
}

// CPY writes through the SDK's encoders, plus bf16 (rounded here).
bool is_storable_dtype(dwell_dtype t) {
    return dwell_has_encoder(t) != 0 || t == DWELL_BF16;
}

void store_row(dwell_dtype t, const float* x, void* out, int64_t n) {
    auto* dst = static_cast<unsigned char*>(out);
    switch (t) {
        case DWELL_F32:
            memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
            return;
        case DWELL_F16:
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = dwell_fp32_to_fp16(x[i]);
                memcpy(dst + 2 * i, &h, sizeof h);
            }
            return;
        case DWELL_BF16:
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = fp32_to_bf16(x[i]);
                memcpy(dst + 2 * i, &h, sizeof h);
            }
            return;
        case DWELL_Q8_0:
            quantize_row_q8_0(x, out, n);
            return;
        case DWELL_FP8_E4M3:
            for (int64_t i = 0; i < n; ++i) dst[i] = dwell_fp32_to_fp8_e4m3(x[i]);
            return;
        case DWELL_Q4_0:
            quantize_row_q4_0(x, out, n);
            return;
        case DWELL_I4_G:
        case DWELL_I4_G64:
        case DWELL_I4_G32:
            dwell_quantize_row(t, x, out, n);
            return;
        case DWELL_I6_G:
            dwell_quantize_row_i6g(x, out, n);
            return;
        case DWELL_I8_C:
            dwell_quantize_row_i8c(x, out, n);
            return;
        default:
            throw std::invalid_argument("store_row: unsupported dtype");
    }
}

}  // namespace dwell::cpu
