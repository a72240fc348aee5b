// Advanced SIMD (baseline aarch64) versions of the dots in simd_dots.hpp.
// Compiled with -ffp-contract=off like the x86 ones, so the float
// epilogues of the integer dots round exactly like the scalar code; the f32
// dots use explicit FMAs and differ from scalar only by summation order.
#if defined(__aarch64__)

#include "arch/arm/simd_dots_neon.hpp"

namespace dwell::cpu {

namespace {

// Blocks sit at any byte offset inside a mapped file.
float load_fp16(const unsigned char* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return dwell_fp16_to_fp32(h);
}

// Widening multiplies: an int8 product fits int16 (|p| <= 2^14) and pairs
// of them fit int32, so no step saturates for any int8 inputs.
int32x4_t dot16_widen(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

// acc + q[0..15] * x[0..15], the int8 codes widened to float.
float32x4_t fma_i8x16(float32x4_t acc, int8x16_t q, const float* x) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q));
    const int16x8_t hi = vmovl_high_s8(q);
    acc = vfmaq_f32(acc, vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vld1q_f32(x));
    acc = vfmaq_f32(acc, vcvtq_f32_s32(vmovl_high_s16(lo)), vld1q_f32(x + 4));
    acc = vfmaq_f32(acc, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vld1q_f32(x + 8));
    return vfmaq_f32(acc, vcvtq_f32_s32(vmovl_high_s16(hi)), vld1q_f32(x + 12));
}

}  // namespace

// F32 and BF16 rows: four accumulators of four lanes, like the F16 dot.
float dot_f32_f32_neon(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                          vdupq_n_f32(0.0f)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int j = 0; j < 4; ++j) {
            // Byte loads: a mapped row need not be 4-byte aligned.
            const float32x4_t w = vreinterpretq_f32_u8(vld1q_u8(p + 4 * (i + 4 * j)));
            acc[j] = vfmaq_f32(acc[j], w, vld1q_f32(x + i + 4 * j));
        }
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; ++i) {
        float w;
        std::memcpy(&w, p + 4 * i, sizeof w);
        sum += w * x[i];
    }
    return sum;
}

float dot_bf16_f32_neon(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                          vdupq_n_f32(0.0f)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const uint16x8_t h0 = vreinterpretq_u16_u8(vld1q_u8(p + 2 * i));
        const uint16x8_t h1 = vreinterpretq_u16_u8(vld1q_u8(p + 2 * i + 16));
        // bf16 is the top half of an f32: widen by a 16-bit shift.
        acc[0] = vfmaq_f32(acc[0], vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h0), 16)),
                           vld1q_f32(x + i));
        acc[1] = vfmaq_f32(acc[1], vreinterpretq_f32_u32(vshll_high_n_u16(h0, 16)),
                           vld1q_f32(x + i + 4));
        acc[2] = vfmaq_f32(acc[2], vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h1), 16)),
                           vld1q_f32(x + i + 8));
        acc[3] = vfmaq_f32(acc[3], vreinterpretq_f32_u32(vshll_high_n_u16(h1, 16)),
                           vld1q_f32(x + i + 12));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; ++i) sum += dwell_bf16_to_fp32(dwell_load_u16le(p + 2 * i)) * x[i];
    return sum;
}

float dot_f16_f32_neon(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    // Four accumulators hide the FMA latency.
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f),
                          vdupq_n_f32(0.0f)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        // Byte loads: the row need not be 2-byte aligned.
        const float16x8_t h0 = vreinterpretq_f16_u8(vld1q_u8(p + 2 * i));
        const float16x8_t h1 = vreinterpretq_f16_u8(vld1q_u8(p + 2 * i + 16));
        acc[0] = vfmaq_f32(acc[0], vcvt_f32_f16(vget_low_f16(h0)), vld1q_f32(x + i));
        acc[1] = vfmaq_f32(acc[1], vcvt_high_f32_f16(h0), vld1q_f32(x + i + 4));
        acc[2] = vfmaq_f32(acc[2], vcvt_f32_f16(vget_low_f16(h1)), vld1q_f32(x + i + 8));
        acc[3] = vfmaq_f32(acc[3], vcvt_high_f32_f16(h1), vld1q_f32(x + i + 12));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; ++i) sum += load_fp16(p + 2 * i) * x[i];
    return sum;
}

// Per block: sum q * x in float, then one FMA by the block scale, the same
// shape as the scalar code.
float dot_q8_0_f32_neon(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q8_0);
        const float* xb = x + b * DWELL_QK8_0;
        const auto* qs = reinterpret_cast<const int8_t*>(block + offsetof(dwell_block_q8_0, qs));
        float32x4_t s = fma_i8x16(vdupq_n_f32(0.0f), vld1q_s8(qs), xb);
        s = fma_i8x16(s, vld1q_s8(qs + 16), xb + 16);
        acc = vfmaq_n_f32(acc, s, load_fp16(block));
    }
    return vaddvq_f32(acc);
}

float dot_q4_0_f32_neon(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n / DWELL_QK4_0; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q4_0);
        const float* xb = x + b * DWELL_QK4_0;
        const uint8x16_t q = vld1q_u8(block + offsetof(dwell_block_q4_0, qs));
        // Low nibbles are elements 0..15, high nibbles 16..31.
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, low4)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
        const float32x4_t s = fma_i8x16(fma_i8x16(vdupq_n_f32(0.0f), lo, xb), hi, xb + 16);
        acc = vfmaq_n_f32(acc, s, load_fp16(block));
    }
    return vaddvq_f32(acc);
}

float dot_q4_K_q8_K_neon(const void* row, const ActBlockQ8_K* x, int64_t n) {
    return neon_dots::dot_q4_K_q8_K<dot16_widen>(row, x, n);
}

float dot_q6_K_q8_K_neon(const void* row, const ActBlockQ8_K* x, int64_t n) {
    return neon_dots::dot_q6_K_q8_K<dot16_widen>(row, x, n);
}

}  // namespace dwell::cpu

#endif  // defined(__aarch64__)
