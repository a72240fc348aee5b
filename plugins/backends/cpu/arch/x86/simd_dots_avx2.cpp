// AVX2 + FMA + F16C versions of the dots in simd_dots.hpp. This file alone is
// compiled with -mavx2 -mfma -mf16c (see CMakeLists.txt) and
// -ffp-contract=off, so the float epilogues of the integer dots round exactly
// like the scalar ones; it is only called after the CPU probe says so.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "dwell/quant.h"
#include "simd/simd_dots.hpp"

namespace dwell::cpu {

namespace {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

// Blocks sit at any byte offset inside a mapped file.
inline float load_fp16(const unsigned char* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// 8 signed bytes (the low half of v) widened to floats.
inline __m256 i8x8_to_ps(__m128i v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}

}  // namespace

// F32 and BF16 rows: four accumulators of eight lanes hide the FMA latency.
float dot_f32_f32_avx2(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int j = 0; j < 4; ++j) {
            const __m256 w = _mm256_loadu_ps(reinterpret_cast<const float*>(p + 4 * (i + 8 * j)));
            acc[j] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + i + 8 * j), acc[j]);
        }
    }
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; ++i) {
        float w;
        std::memcpy(&w, p + 4 * i, sizeof w);
        sum += w * x[i];
    }
    return sum;
}

float dot_bf16_f32_avx2(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i));
        // bf16 is the top half of an f32: widen each half by a 16-bit shift.
        const __m256 w0 = _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(h)), 16));
        const __m256 w1 = _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(h, 1)), 16));
        acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), acc1);
    }
    float sum = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) sum += dwell_bf16_to_fp32(dwell_load_u16le(p + 2 * i)) * x[i];
    return sum;
}

float dot_f16_f32_avx2(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    // Two accumulators hide the FMA latency.
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 w0 =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
        const __m256 w1 =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i + 16)));
        acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), acc0);
        acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), acc1);
    }
    float sum = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) sum += load_fp16(p + 2 * i) * x[i];
    return sum;
}

// Per block: sum q * x in float, then one FMA by the block scale, the same
// shape as the scalar code.
float dot_q8_0_f32_avx2(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q8_0);
        const float* xb = x + b * DWELL_QK8_0;
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
        const __m128i lo = _mm256_castsi256_si128(q);
        const __m128i hi = _mm256_extracti128_si256(q, 1);
        __m256 s = _mm256_mul_ps(i8x8_to_ps(lo), _mm256_loadu_ps(xb));
        s = _mm256_fmadd_ps(i8x8_to_ps(_mm_unpackhi_epi64(lo, lo)), _mm256_loadu_ps(xb + 8), s);
        s = _mm256_fmadd_ps(i8x8_to_ps(hi), _mm256_loadu_ps(xb + 16), s);
        s = _mm256_fmadd_ps(i8x8_to_ps(_mm_unpackhi_epi64(hi, hi)), _mm256_loadu_ps(xb + 24), s);
        acc = _mm256_fmadd_ps(s, _mm256_set1_ps(load_fp16(block)), acc);
    }
    return hsum(acc);
}

float dot_q4_0_f32_avx2(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m128i eight = _mm_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / DWELL_QK4_0; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q4_0);
        const float* xb = x + b * DWELL_QK4_0;
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
        // Low nibbles are elements 0..15, high nibbles 16..31.
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, low4), eight);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), low4), eight);
        __m256 s = _mm256_mul_ps(i8x8_to_ps(lo), _mm256_loadu_ps(xb));
        s = _mm256_fmadd_ps(i8x8_to_ps(_mm_unpackhi_epi64(lo, lo)), _mm256_loadu_ps(xb + 8), s);
        s = _mm256_fmadd_ps(i8x8_to_ps(hi), _mm256_loadu_ps(xb + 16), s);
        s = _mm256_fmadd_ps(i8x8_to_ps(_mm_unpackhi_epi64(hi, hi)), _mm256_loadu_ps(xb + 24), s);
        acc = _mm256_fmadd_ps(s, _mm256_set1_ps(load_fp16(block)), acc);
    }
    return hsum(acc);
}

// Codes are 0..15 and activations int8, so maddubs pairs (<= 2 * 15 * 128)
// never saturate and the int32 block sum is exactly the scalar one; the
// float epilogue is the scalar expression, so results are bit-identical.
float dot_q4_K_q8_K_avx2(const void* row, const ActBlockQ8_K* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q4_K);
        uint8_t scales[DWELL_K_SCALE_SIZE];
        std::memcpy(scales, block + offsetof(dwell_block_q4_K, scales), sizeof scales);
        const unsigned char* qs = block + offsetof(dwell_block_q4_K, qs);
        const ActBlockQ8_K& xb = x[b];
        __m256i sumi = _mm256_setzero_si256();
        int32_t summ = 0;
        for (int j = 0; j < DWELL_QK_K / 64; ++j) {
            uint8_t sc_l, mn_l, sc_h, mn_h;
            dwell_k_scale_min(scales, 2 * j, &sc_l, &mn_l);
            dwell_k_scale_min(scales, 2 * j + 1, &sc_h, &mn_h);
            summ += mn_l * (xb.bsums[4 * j] + xb.bsums[4 * j + 1]) +
                    mn_h * (xb.bsums[4 * j + 2] + xb.bsums[4 * j + 3]);
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j));
            const __m256i ql = _mm256_and_si256(q, low4);
            const __m256i qh = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * j));
            const __m256i xh =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * j + 32));
            const __m256i pl =
                _mm256_madd_epi16(_mm256_set1_epi16(sc_l), _mm256_maddubs_epi16(ql, xl));
            const __m256i ph =
                _mm256_madd_epi16(_mm256_set1_epi16(sc_h), _mm256_maddubs_epi16(qh, xh));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        uint16_t d, dmin;
        std::memcpy(&d, block + offsetof(dwell_block_q4_K, d), sizeof d);
        std::memcpy(&dmin, block + offsetof(dwell_block_q4_K, dmin), sizeof dmin);
        sum += dwell_fp16_to_fp32(d) * xb.d * static_cast<float>(hsum_i32(sumi)) -
               dwell_fp16_to_fp32(dmin) * xb.d * static_cast<float>(summ);
    }
    return sum;
}

// Codes are 0..63 before the -32 offset, applied as maddubs(32, x) so every
// 16-bit partial stays within range; sums are exact as for Q4_K.
float dot_q6_K_q8_K_avx2(const void* row, const ActBlockQ8_K* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i low2 = _mm256_set1_epi8(3);
    const __m256i k32 = _mm256_set1_epi8(32);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q6_K);
        const unsigned char* ql = block + offsetof(dwell_block_q6_K, ql);
        const unsigned char* qh = block + offsetof(dwell_block_q6_K, qh);
        int8_t scales[DWELL_QK_K / 16];
        std::memcpy(scales, block + offsetof(dwell_block_q6_K, scales), sizeof scales);
        const ActBlockQ8_K& xb = x[b];
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h));
            const __m256i l1 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh + 32 * h));
            // The four runs of 32 codes of this half, in element order.
            __m256i c[4];
            c[0] = _mm256_or_si256(_mm256_and_si256(l0, low4),
                                   _mm256_slli_epi16(_mm256_and_si256(hb, low2), 4));
            c[1] = _mm256_or_si256(
                _mm256_and_si256(l1, low4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), low2), 4));
            c[2] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), low2), 4));
            c[3] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), low2), 4));
            for (int r = 0; r < 4; ++r) {
                const int e = 128 * h + 32 * r;
                const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + e));
                const __m256i prod =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(c[r], xv), _mm256_maddubs_epi16(k32, xv));
                // 16-bit lanes 0..7 cover sub-block e/16, lanes 8..15 the next.
                const __m256i sc = _mm256_setr_m128i(_mm_set1_epi16(scales[e / 16]),
                                                     _mm_set1_epi16(scales[e / 16 + 1]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(sc, prod));
            }
        }
        uint16_t d;
        std::memcpy(&d, block + offsetof(dwell_block_q6_K, d), sizeof d);
        sum += dwell_fp16_to_fp32(d) * xb.d * static_cast<float>(hsum_i32(sumi));
    }
    return sum;
}

// Q4_0 rows: nibbles 0..15 times signed activations through maddubs (pairs
// of at most 2 * 15 * 128, no saturation), less 8 * sum(x); both sums are
// exact, and the epilogue is the scalar one, so the result is its twin.
float dot_q4_0_q8_0_avx2(const void* row, const dwell_block_q8_0* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK4_0; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q4_0);
        const __m128i q = _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(block + offsetof(dwell_block_q4_0, qs)));
        const __m256i codes =
            _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), low4), _mm_and_si128(q, low4));
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
        const __m256i qx = _mm256_madd_epi16(_mm256_maddubs_epi16(codes, xv), ones16);
        const __m256i sx = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, xv), ones16);
        const int32_t sumi = hsum_i32(qx) - 8 * hsum_i32(sx);
        uint16_t d;
        std::memcpy(&d, block + offsetof(dwell_block_q4_0, d), sizeof d);
        sum += static_cast<float>(sumi) * dwell_fp16_to_fp32(d) * dwell_fp16_to_fp32(x[b].d);
    }
    return sum;
}

// Q8_0 rows: both sides widened to 16 bits (no sign trick, so -128 codes in
// a hostile file are exact too); the scalar epilogue.
float dot_q8_0_q8_0_avx2(const void* row, const dwell_block_q8_0* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q8_0);
        const unsigned char* qs = block + offsetof(dwell_block_q8_0, qs);
        const __m256i w0 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
        const __m256i w1 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16)));
        const __m256i x0 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs)));
        const __m256i x1 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs + 16)));
        const int32_t sumi =
            hsum_i32(_mm256_add_epi32(_mm256_madd_epi16(w0, x0), _mm256_madd_epi16(w1, x1)));
        uint16_t d;
        std::memcpy(&d, block + offsetof(dwell_block_q8_0, d), sizeof d);
        sum += static_cast<float>(sumi) * (dwell_fp16_to_fp32(d) * dwell_fp16_to_fp32(x[b].d));
    }
    return sum;
}

}  // namespace dwell::cpu

#endif  // defined(__x86_64__)
