// aarch64 versions of the dots in simd_dots.hpp. simd_dots_neon.cpp holds
// the baseline Advanced SIMD ones, simd_dots_neon_dotprod.cpp the K-quant
// dots again with SDOT; both instantiate the templates below with their own
// int8 dot, so the code that unpacks the K-quant codes exists once.
//
// The templates sit in an anonymous namespace: each file is compiled with
// different -march flags, and an inline function with external linkage
// could have the linker keep the dotprod build of it for baseline callers.
#pragma once

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dwell/quant.h"
#include "quant/activation_quant.hpp"

namespace dwell::cpu {

// simd_dots_neon.cpp: Advanced SIMD only.
float dot_f32_f32_neon(const void* row, const float* x, int64_t n);
float dot_f16_f32_neon(const void* row, const float* x, int64_t n);
float dot_bf16_f32_neon(const void* row, const float* x, int64_t n);
float dot_q8_0_f32_neon(const void* row, const float* x, int64_t n);
float dot_q4_0_f32_neon(const void* row, const float* x, int64_t n);
float dot_q4_K_q8_K_neon(const void* row, const ActBlockQ8_K* x, int64_t n);
float dot_q6_K_q8_K_neon(const void* row, const ActBlockQ8_K* x, int64_t n);
// simd_dots_neon_dotprod.cpp: needs the dot product extension.
float dot_q4_K_q8_K_dotprod(const void* row, const ActBlockQ8_K* x, int64_t n);
float dot_q6_K_q8_K_dotprod(const void* row, const ActBlockQ8_K* x, int64_t n);

namespace neon_dots {
namespace {

// Dot16(acc, a, b) adds the 16 products a[i] * b[i] to acc's lanes, exactly
// (how they spread over the lanes is the implementation's business).
using Dot16 = int32x4_t (*)(int32x4_t acc, int8x16_t a, int8x16_t b);

// The integer parts are exact whatever the order of the additions, and the
// float epilogues are the scalar expressions (this code is built with
// -ffp-contract=off), so results are bit-identical to the scalar dots.
template <Dot16 dot16>
float dot_q4_K_q8_K(const void* row, const ActBlockQ8_K* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q4_K);
        uint8_t scales[DWELL_K_SCALE_SIZE];
        std::memcpy(scales, block + offsetof(dwell_block_q4_K, scales), sizeof scales);
        const unsigned char* qs = block + offsetof(dwell_block_q4_K, qs);
        const ActBlockQ8_K& xb = x[b];
        int32x4_t sumi = vdupq_n_s32(0);
        int32_t summ = 0;
        // 32 bytes of qs hold two sub-blocks: 64j..64j+31 in the low
        // nibbles, 64j+32..64j+63 in the high ones.
        for (int j = 0; j < DWELL_QK_K / 64; ++j) {
            uint8_t sc_l, mn_l, sc_h, mn_h;
            dwell_k_scale_min(scales, 2 * j, &sc_l, &mn_l);
            dwell_k_scale_min(scales, 2 * j + 1, &sc_h, &mn_h);
            summ += mn_l * (xb.bsums[4 * j] + xb.bsums[4 * j + 1]) +
                    mn_h * (xb.bsums[4 * j + 2] + xb.bsums[4 * j + 3]);
            const uint8x16_t q0 = vld1q_u8(qs + 32 * j);
            const uint8x16_t q1 = vld1q_u8(qs + 32 * j + 16);
            const int8_t* xq = xb.qs + 64 * j;
            int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
            lo = dot16(lo, vreinterpretq_s8_u8(vandq_u8(q0, low4)), vld1q_s8(xq));
            lo = dot16(lo, vreinterpretq_s8_u8(vandq_u8(q1, low4)), vld1q_s8(xq + 16));
            hi = dot16(hi, vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vld1q_s8(xq + 32));
            hi = dot16(hi, vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), vld1q_s8(xq + 48));
            sumi = vmlaq_n_s32(sumi, lo, sc_l);
            sumi = vmlaq_n_s32(sumi, hi, sc_h);
        }
        uint16_t d, dmin;
        std::memcpy(&d, block + offsetof(dwell_block_q4_K, d), sizeof d);
        std::memcpy(&dmin, block + offsetof(dwell_block_q4_K, dmin), sizeof dmin);
        sum += dwell_fp16_to_fp32(d) * xb.d * static_cast<float>(vaddvq_s32(sumi)) -
               dwell_fp16_to_fp32(dmin) * xb.d * static_cast<float>(summ);
    }
    return sum;
}

template <Dot16 dot16>
float dot_q6_K_q8_K(const void* row, const ActBlockQ8_K* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    const uint8x16_t bits54 = vdupq_n_u8(0x30);
    const int8x16_t k32 = vdupq_n_s8(32);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q6_K);
        const unsigned char* ql = block + offsetof(dwell_block_q6_K, ql);
        const unsigned char* qh = block + offsetof(dwell_block_q6_K, qh);
        int8_t scales[DWELL_QK_K / 16];
        std::memcpy(scales, block + offsetof(dwell_block_q6_K, scales), sizeof scales);
        const ActBlockQ8_K& xb = x[b];
        int32x4_t sumi = vdupq_n_s32(0);
        // Per half of 128 and 16 bytes l..l+15 of its ql/qh: the codes of
        // elements l, l + 32, l + 64 and l + 96 (see dwell_block_q6_K), each
        // run of 16 one whole sub-block.
        for (int h = 0; h < 2; ++h) {
            for (int l = 0; l < 32; l += 16) {
                const uint8x16_t l0 = vld1q_u8(ql + 64 * h + l);
                const uint8x16_t l1 = vld1q_u8(ql + 64 * h + 32 + l);
                const uint8x16_t hb = vld1q_u8(qh + 32 * h + l);
                uint8x16_t c[4];
                c[0] = vorrq_u8(vandq_u8(l0, low4), vandq_u8(vshlq_n_u8(hb, 4), bits54));
                c[1] = vorrq_u8(vandq_u8(l1, low4), vandq_u8(vshlq_n_u8(hb, 2), bits54));
                c[2] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(hb, bits54));
                c[3] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(hb, 2), bits54));
                for (int r = 0; r < 4; ++r) {
                    const int e = 128 * h + 32 * r + l;
                    const int8x16_t code = vsubq_s8(vreinterpretq_s8_u8(c[r]), k32);
                    const int32x4_t part = dot16(vdupq_n_s32(0), code, vld1q_s8(xb.qs + e));
                    sumi = vmlaq_n_s32(sumi, part, scales[e / 16]);
                }
            }
        }
        uint16_t d;
        std::memcpy(&d, block + offsetof(dwell_block_q6_K, d), sizeof d);
        sum += dwell_fp16_to_fp32(d) * xb.d * static_cast<float>(vaddvq_s32(sumi));
    }
    return sum;
}

}  // namespace
}  // namespace neon_dots
}  // namespace dwell::cpu

#endif  // defined(__aarch64__)
