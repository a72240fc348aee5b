#include "row_quantize.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace dwell::cpu {

namespace {

// round() like ggml; |v| <= 127 up to rounding for finite input, and the
// clamp keeps NaN/inf away from an undefined float -> int conversion.
int8_t round_to_q8(float v) {
    const float r = std::round(v);
    if (!(r > -127.0f)) return r == r ? -127 : 0;
    if (r >= 127.0f) return 127;
    return static_cast<int8_t>(r);
}

}  // namespace

uint16_t fp32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        // Force the quiet bit so truncation cannot turn a NaN into an inf.
        return static_cast<uint16_t>((u >> 16) | 64u);
    }
    return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

void quantize_row_q8_0(const float* x, void* out, int64_t n) {
    auto* dst = static_cast<unsigned char*>(out);
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const float* xb = x + b * DWELL_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < DWELL_QK8_0; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        dwell_block_q8_0 block;
        block.d = dwell_fp32_to_fp16(d);
        for (int j = 0; j < DWELL_QK8_0; ++j) {
            block.qs[j] = round_to_q8(xb[j] * id);
        }
        memcpy(dst + b * sizeof block, &block, sizeof block);
    }
}

void quantize_row_q4_0(const float* x, void* out, int64_t n) {
    auto* dst = static_cast<unsigned char*>(out);
    constexpr int kHalf = DWELL_QK4_0 / 2;
    for (int64_t b = 0; b < n / DWELL_QK4_0; ++b) {
        const float* xb = x + b * DWELL_QK4_0;
        float amax = 0.0f;
        float max = 0.0f;
        for (int j = 0; j < DWELL_QK4_0; ++j) {
            if (amax < std::fabs(xb[j])) {
                amax = std::fabs(xb[j]);
                max = xb[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        // ggml truncates x/d + 8.5 to int8 and caps at 15; for in-range
        // values that equals clamping to [0, 15] first, which also keeps
        // non-finite inputs away from an undefined conversion.
        auto nibble = [](float v) -> unsigned {
            const float s = v + 8.5f;
            if (!(s > 0.0f)) return 0;
            if (s >= 15.0f) return 15;
            return static_cast<unsigned>(s);
        };
        dwell_block_q4_0 block;
        block.d = dwell_fp32_to_fp16(d);
        for (int j = 0; j < kHalf; ++j) {
            const unsigned lo = nibble(xb[j] * id);
            const unsigned hi = nibble(xb[j + kHalf] * id);
            block.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
        memcpy(dst + b * sizeof block, &block, sizeof block);
    }
}

bool is_storable_dtype(dwell_dtype t) {
    switch (t) {
        case DWELL_F32:
        case DWELL_F16:
        case DWELL_BF16:
        case DWELL_Q8_0:
        case DWELL_Q4_0:
            return true;
        default:
            return false;
    }
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
        case DWELL_Q4_0:
            quantize_row_q4_0(x, out, n);
            return;
        default:
            throw std::invalid_argument("store_row: unsupported dtype");
    }
}

}  // namespace dwell::cpu
