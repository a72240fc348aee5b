// AVX2 blocked kernels for Q4_0, Q8_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K and
// Q6_K: 8 weight rows per vector, one row per 32-bit lane (layouts in
// gemm_kernel_x86.hpp), 4 activation rows per tile. Without VNNI the byte
// products go through pmaddubsw (u8 x s8 pairs to s16) and pmaddwd (s16
// pairs to s32), so each kernel bounds how many products an int16 may sum:
//   - Q4_0 codes are 0..15, so a 16-bit lane can sum all 16 of its products
//     in a block (|sum| <= 16 * 15 * 127 < 2^15) before one pmaddwd; the
//     offset 8 is taken off through the activation's block sums;
//   - Q8_0 stays signed: |w| as the unsigned operand and x with w's sign,
//     each pair within 2 * 128 * 127 < 2^15, widened after every product;
//   - 5-bit codes sum 8 products, 6-bit codes 4, before widening;
//   - K-quant sub-block scales ride in the widening pmaddwd itself.
// Integer block sums are exact and the float epilogue is the same for every
// lane and column, so an output's bits do not depend on the tile shape.
//
// Q6_K keeps one byte per code here (PackQ6_K, 22% above the file's size):
// the file-size layout of the AVX-512 kernel leans on vpternlogd to rebuild
// codes cheaply and has not been measured at this level.
//
// Compiled with -mavx2 -mfma -mf16c -ffp-contract=off (CMakeLists.txt).
#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>
#include <type_traits>

#include "arch/x86/gemm_kernel_x86.hpp"
#include "simd/gemm_kernel.hpp"

namespace dwell::cpu {
namespace {

using namespace x86;

constexpr int kR = 8;
// Blocks per scale group in the Q4_0 / Q8_0 layout (PackD16): four blocks'
// scales of 8 rows fill one cache line.
constexpr int kD16Group = 4;
constexpr int kC = 4;

inline __m256i bcast4(const void* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

inline __m256i load256(const unsigned char* p) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

inline __m256 load_fp16x8(const unsigned char* p) {
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}

template <size_t Bytes, size_t kDistance = 2048>
inline void prefetch_ahead(const unsigned char* p) {
    for (size_t off = 0; off < Bytes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(p + kDistance + off), _MM_HINT_T0);
    }
}

// A K-quant super-block's chunk (quants and meta) is read in Parts steps;
// step `part` asks for its share further ahead, so the meta arrives early
// too.
template <size_t Chunk, int Parts>
inline void prefetch_part(const unsigned char* chunk, int part) {
    constexpr size_t kShare = (Chunk / Parts + 63) / 64 * 64;
    prefetch_ahead<kShare, 4096>(chunk + part * (Chunk / Parts));
}

template <int NC>
inline void store_tile(const __m256 (&acc)[NC], int nr, float* out, size_t out_stride) {
    for (int c = 0; c < NC; ++c) {
        if (nr == kR) {
            _mm256_storeu_ps(out + c * out_stride, acc[c]);
        } else {
            alignas(32) float tmp[kR];
            _mm256_store_ps(tmp, acc[c]);
            std::copy_n(tmp, nr, out + c * out_stride);
        }
    }
}

// ---------------------------------------------------------------------------
// Activation quantizer: quantize_act_q8_0's arithmetic, 8 lanes at a time
// (exact IEEE operations, so the same numbers); rows with a NaN or infinity
// take the reference path.

inline bool all_finite(__m256 v) {
    const __m256 z = _mm256_sub_ps(v, v);
    return _mm256_movemask_ps(_mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_EQ_OQ)) == 0xff;
}

inline __m256 abs_ps(__m256 v) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

// Q81: the Q8_1 numbers (ActQ8_1), where s is fp16(d * sum) as a float.
template <int Offset, bool Q81 = false>
void quantize_act_q8_0_avx2(const float* x, int64_t k, void* out) {
    for (int64_t i = 0; i < k; i += 8) {
        if (!all_finite(_mm256_loadu_ps(x + i))) {
            if constexpr (Q81) return quantize_act_q8_1_lanes(x, k, out);
            return quantize_act_q8_0_lanes<Offset>(x, k, out);
        }
    }
    auto* base = static_cast<unsigned char*>(out);
    const int64_t nb = ActQ8_0::blocks(k);
    auto* d = reinterpret_cast<float*>(base + k);
    auto* s = reinterpret_cast<int32_t*>(base + k + 4 * nb);
    for (int64_t b = 0; b < nb; ++b) {
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 4; ++i) {
            v[i] = _mm256_loadu_ps(x + 32 * b + 8 * i);
            m = _mm256_max_ps(m, abs_ps(v[i]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float db = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        d[b] = dwell_fp16_to_fp32(dwell_fp32_to_fp16(db));
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int i = 0; i < 4; ++i) {
            // Halves to even, as nearbyint; |q| <= 127 since |x| <= amax.
            q[i] = _mm256_cvtps_epi32(_mm256_round_ps(
                _mm256_mul_ps(v[i], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        // int32 -> int8 in element order (packs interleave the 128-bit halves).
        const __m256i p16 = _mm256_packs_epi32(q[0], q[1]);
        const __m256i p16b = _mm256_packs_epi32(q[2], q[3]);
        __m256i p8 = _mm256_packs_epi16(p16, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_store_si256(reinterpret_cast<__m256i*>(base + 32 * b), p8);
        const __m256i qsum =
            _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(qsum), _mm256_extracti128_si256(qsum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        const int32_t sum = _mm_cvtsi128_si32(s4);
        if constexpr (Q81) {
            const float sf = dwell_fp16_to_fp32(dwell_fp32_to_fp16(static_cast<float>(sum) * db));
            std::memcpy(&s[b], &sf, sizeof sf);
        } else {
            s[b] = -Offset * sum;
        }
    }
    const size_t used = static_cast<size_t>(k) + 8 * static_cast<size_t>(nb);
    std::memset(base + used, 0, ActQ8_0::bytes(k) - used);
}

// Q8_K: quantize_act_q8_K's arithmetic 8 lanes at a time (max, one
// division, products and ties-to-even rounding are exact IEEE operations);
// rows with a NaN or infinity take the reference path.
void quantize_act_q8_K_avx2(const float* x, int64_t k, void* out) {
    for (int64_t i = 0; i < k; i += 8) {
        if (!all_finite(_mm256_loadu_ps(x + i))) return quantize_act_q8_K_lanes(x, k, out);
    }
    auto* base = static_cast<unsigned char*>(out);
    const int64_t nb = ActQ8_K::blocks(k);
    auto* d = reinterpret_cast<float*>(base + k);
    for (int64_t b = 0; b < nb; ++b) {
        const float* xb = x + b * DWELL_QK_K;
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 32; ++i) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(xb + 8 * i)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        int32_t bsum[16] = {};
        if (amax == 0.0f) {
            std::memset(base + b * DWELL_QK_K, 0, DWELL_QK_K);
            d[b] = 0.0f;
        } else {
            // The first value of largest magnitude, with its sign.
            float max = 0.0f;
            for (int j = 0; j < DWELL_QK_K; ++j) {
                if (std::fabs(xb[j]) == amax) {
                    max = xb[j];
                    break;
                }
            }
            const float iscale = -127.0f / max;
            const __m256 vs = _mm256_set1_ps(iscale);
            for (int g = 0; g < 16; ++g) {
                // Ties to even, as lrint; |iscale * x| <= 127, so no clamp.
                __m256i q[2];
                for (int h = 0; h < 2; ++h) {
                    q[h] = _mm256_cvtps_epi32(
                        _mm256_round_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(xb + 16 * g + 8 * h)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
                    q[h] = _mm256_min_epi32(_mm256_max_epi32(q[h], _mm256_set1_epi32(-128)),
                                            _mm256_set1_epi32(127));
                }
                const __m256i p16 = _mm256_packs_epi32(q[0], q[1]);  // 128-bit lanes interleaved
                const __m128i p8 =
                    _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1));
                // p8 holds q0[0..3] q1[0..3] q0[4..7] q1[4..7]: restore order.
                const __m128i ordered = _mm_shuffle_epi32(p8, _MM_SHUFFLE(3, 1, 2, 0));
                _mm_storeu_si128(reinterpret_cast<__m128i*>(base + b * DWELL_QK_K + 16 * g),
                                 ordered);
                const __m256i sum = _mm256_add_epi32(q[0], q[1]);
                __m128i s4 =
                    _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
                bsum[g] = _mm_cvtsi128_si32(s4);
            }
            d[b] = 1.0f / iscale;
        }
        put_q8_K_sums(bsum, b, nb, base + k);
    }
    const size_t used = static_cast<size_t>(k) + ActQ8_K::kMetaBytes * static_cast<size_t>(nb);
    std::memset(base + used, 0, ActQ8_K::bytes(k) - used);
}

// ---------------------------------------------------------------------------
// Tiles.

template <int NC>
void q4_0_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
               size_t stride, float* out, size_t out_stride) {
    using P = PackQ4_0<kR, kD16Group>;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[NC];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const int64_t nb = k / 32;
    for (int64_t b = 0; b < nb; ++b) {
        const unsigned char* wq = block + P::quant_offset(b);
        // Quants and scales are one stream; this block's share of it.
        prefetch_ahead<(P::kStreamBytes + 63) / 64 * 64>(block +
                                                         static_cast<size_t>(b) * P::kStreamBytes);
        __m256i s16[NC];
        for (auto& v : s16) v = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i w = load256(wq + j * 32);
            const __m256i lo = _mm256_and_si256(w, low4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low4);
            for (int c = 0; c < NC; ++c) {
                const int8_t* xq = ActQ8_0::q(acts + c * stride) + b * 32 + 4 * j;
                s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(lo, bcast4(xq)));
                s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(hi, bcast4(xq + 16)));
            }
        }
        const __m256 dw = load_fp16x8(block + P::scale_offset(k, b));
        for (int c = 0; c < NC; ++c) {
            const unsigned char* a = acts + c * stride;
            const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(s16[c], ones),
                                                  _mm256_set1_epi32(ActQ8_0::s(a, k)[b]));
            const __m256 dx = _mm256_set1_ps(ActQ8_0::d(a, k)[b]);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, dx), acc[c]);
        }
    }
    store_tile<NC>(acc, nr, out, out_stride);
}

template <int NC>
void q8_0_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
               size_t stride, float* out, size_t out_stride) {
    using P = PackQ8_0<kR, false, kD16Group>;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[NC];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const int64_t nb = k / 32;
    for (int64_t b = 0; b < nb; ++b) {
        const unsigned char* wq = block + P::quant_offset(b);
        // Quants and scales are one stream; this block's share of it.
        prefetch_ahead<(P::kStreamBytes + 63) / 64 * 64>(block +
                                                         static_cast<size_t>(b) * P::kStreamBytes);
        __m256i isum[NC];
        for (auto& v : isum) v = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            const __m256i w = load256(wq + j * 32);
            const __m256i aw = _mm256_abs_epi8(w);
            for (int c = 0; c < NC; ++c) {
                const int8_t* xq = ActQ8_0::q(acts + c * stride) + b * 32 + 4 * j;
                const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast4(xq), w));
                isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, ones));
            }
        }
        const __m256 dw = load_fp16x8(block + P::scale_offset(k, b));
        for (int c = 0; c < NC; ++c) {
            const __m256 dx = _mm256_set1_ps(ActQ8_0::d(acts + c * stride, k)[b]);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(dw, dx), acc[c]);
        }
    }
    store_tile<NC>(acc, nr, out, out_stride);
}

// ---------------------------------------------------------------------------
// K-quants (activations ActQ8_K). A 32-bit lane holds sc * (two int16 dot
// partials) after one pmaddwd with the sub-block scale in both 16-bit
// halves, which folds the scale multiply into the widening step.

// An unsigned or signed byte per lane (already widened to int32) copied into
// both int16 halves of its lane.
inline __m256i dup16(__m256i v32) {
    return _mm256_blend_epi16(v32, _mm256_slli_epi32(v32, 16), 0xaa);
}

// Bits `from`.. of every byte moved to bit `to`..; the caller masks away what
// the 16-bit shift brings in from the neighbouring byte.
inline __m256i move_bits(__m256i v, int from, int to) {
    if (to > from) return _mm256_slli_epi16(v, to - from);
    if (to < from) return _mm256_srli_epi16(v, from - to);
    return v;
}

inline __m256i or_masked(__m256i nib, __m256i high, __m256i mask) {
    return _mm256_or_si256(nib, _mm256_and_si256(high, mask));
}

// Q4_K and Q5_K: Q4_K codes 0..15, so each int16 of a 32-value sub-block's
// pmaddubsw sums stays within 16 * 15 * 128 < 2^15 over the whole
// sub-block; Q5_K's (fifth bit or-ed in) are widened every half sub-block.
// The mins term is a 16-bit dot of the mins pairs with the activation's sum
// pairs.
template <bool Five, int NC>
void k45_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
              size_t stride, float* out, size_t out_stride) {
    using P = PackK45<kR, Five>;
    // 5-bit codes reach 8 * 31 * 128 in an int16 after 4 code vectors.
    constexpr int kFlush = Five ? 4 : 8;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    __m256 acc[NC];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const int64_t nsb = k / DWELL_QK_K;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const unsigned char* chunk = block + sb * P::kChunk;
        __m256i isum[NC];
        for (auto& v : isum) v = _mm256_setzero_si256();
        for (int p = 0; p < 4; ++p) {
            prefetch_part<P::kChunk, 4>(chunk, p);
            const unsigned char* sc = chunk + P::kScales;
            const __m256i sclo = dup16(_mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + 2 * p * kR))));
            const __m256i schi = dup16(_mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc + (2 * p + 1) * kR))));
            for (int j0 = 0; j0 < 8; j0 += kFlush) {
                __m256i slo[NC], shi[NC];
                for (int c = 0; c < NC; ++c) {
                    slo[c] = _mm256_setzero_si256();
                    shi[c] = _mm256_setzero_si256();
                }
                __m256i high = _mm256_setzero_si256();
                for (int j = j0; j < j0 + kFlush; ++j) {
                    const __m256i w = load256(chunk + (p * 8 + j) * 32);
                    __m256i lo = _mm256_and_si256(w, low4);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low4);
                    if constexpr (Five) {
                        if (j % 4 == 0)
                            high = load256(chunk + P::kNibbleBytes + (p * 2 + j / 4) * 32);
                        lo = or_masked(lo, move_bits(high, 2 * (j % 4), 4), bit4);
                        hi = or_masked(hi, move_bits(high, 2 * (j % 4) + 1, 4), bit4);
                    }
                    for (int c = 0; c < NC; ++c) {
                        const int8_t* xq =
                            ActQ8_K::q(acts + c * stride) + sb * 256 + 64 * p + 4 * j;
                        slo[c] = _mm256_add_epi16(slo[c], _mm256_maddubs_epi16(lo, bcast4(xq)));
                        shi[c] =
                            _mm256_add_epi16(shi[c], _mm256_maddubs_epi16(hi, bcast4(xq + 32)));
                    }
                }
                for (int c = 0; c < NC; ++c) {
                    isum[c] = _mm256_add_epi32(isum[c],
                                               _mm256_add_epi32(_mm256_madd_epi16(slo[c], sclo),
                                                                _mm256_madd_epi16(shi[c], schi)));
                }
            }
        }
        __m256i mins[4];
        for (int i = 0; i < 4; ++i) {
            mins[i] = _mm256_cvtepu8_epi16(
                _mm_load_si128(reinterpret_cast<const __m128i*>(chunk + P::kMins + i * 2 * kR)));
        }
        const __m256 d = load_fp16x8(chunk + P::kD);
        const __m256 dmin = load_fp16x8(chunk + P::kDmin);
        for (int c = 0; c < NC; ++c) {
            const unsigned char* a = acts + c * stride;
            const int32_t* pairs = ActQ8_K::pairs(a, k) + 4 * sb;
            __m256i msum = _mm256_madd_epi16(mins[0], _mm256_set1_epi32(pairs[0]));
            for (int i = 1; i < 4; ++i) {
                msum =
                    _mm256_add_epi32(msum, _mm256_madd_epi16(mins[i], _mm256_set1_epi32(pairs[i])));
            }
            const __m256 dx = _mm256_set1_ps(ActQ8_K::d(a, k)[sb]);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(d, dx), acc[c]);
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, dx), acc[c]);
        }
    }
    store_tile<NC>(acc, nr, out, out_stride);
}

// Q6_K: codes 0..63, so two pmaddubsw results (each pair within
// 2 * 63 * 128) still fit an int16 before the scale pmaddwd. The code offset
// -32 * sum(sc_s * bsum_s) is one 16-bit dot of scale pairs with the
// activation's negated sum pairs per super-block, shifted by 5.
template <int NC>
void q6_K_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
               size_t stride, float* out, size_t out_stride) {
    using P = PackQ6_K<kR>;
    __m256 acc[NC];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const int64_t nsb = k / DWELL_QK_K;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const unsigned char* chunk = block + sb * P::kChunk;
        __m256i isum[NC];
        for (auto& v : isum) v = _mm256_setzero_si256();
        for (int s = 0; s < 16; ++s) {
            prefetch_part<P::kChunk, 16>(chunk, s);
            const __m256i sc = dup16(_mm256_cvtepi8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(chunk + P::kScales + s * kR))));
            __m256i w[4];
            for (int j = 0; j < 4; ++j) w[j] = load256(chunk + (s * 4 + j) * 32);
            for (int c = 0; c < NC; ++c) {
                const int8_t* xq = ActQ8_K::q(acts + c * stride) + sb * 256 + 16 * s;
                const __m256i t0 = _mm256_add_epi16(_mm256_maddubs_epi16(w[0], bcast4(xq)),
                                                    _mm256_maddubs_epi16(w[1], bcast4(xq + 4)));
                const __m256i t1 = _mm256_add_epi16(_mm256_maddubs_epi16(w[2], bcast4(xq + 8)),
                                                    _mm256_maddubs_epi16(w[3], bcast4(xq + 12)));
                isum[c] = _mm256_add_epi32(isum[c], _mm256_add_epi32(_mm256_madd_epi16(t0, sc),
                                                                     _mm256_madd_epi16(t1, sc)));
            }
        }
        // Scale pairs (sub-blocks 2i, 2i + 1) per lane as two int16.
        __m256i scp[8];
        for (int i = 0; i < 8; ++i) {
            const __m128i a =
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(chunk + P::kScales + 2 * i * kR));
            const __m128i b = _mm_loadl_epi64(
                reinterpret_cast<const __m128i*>(chunk + P::kScales + (2 * i + 1) * kR));
            scp[i] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b));
        }
        const __m256 d = load_fp16x8(chunk + P::kD);
        for (int c = 0; c < NC; ++c) {
            const unsigned char* a = acts + c * stride;
            const int32_t* np = ActQ8_K::negpairs(a, k) + 8 * sb;
            __m256i off = _mm256_madd_epi16(scp[0], _mm256_set1_epi32(np[0]));
            for (int i = 1; i < 8; ++i) {
                off = _mm256_add_epi32(off, _mm256_madd_epi16(scp[i], _mm256_set1_epi32(np[i])));
            }
            const __m256i total = _mm256_add_epi32(isum[c], _mm256_slli_epi32(off, 5));
            const __m256 dx = _mm256_set1_ps(ActQ8_K::d(a, k)[sb]);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, dx), acc[c]);
        }
    }
    store_tile<NC>(acc, nr, out, out_stride);
}

template <int NC>
void q4_K_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
               size_t stride, float* out, size_t out_stride) {
    k45_tile<false, NC>(k, block, nr, acts, stride, out, out_stride);
}

template <int NC>
void q5_K_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
               size_t stride, float* out, size_t out_stride) {
    k45_tile<true, NC>(k, block, nr, acts, stride, out, out_stride);
}

// Q5_0, Q4_1 and Q5_1 (activations ActQ8_0 with offset 16 for Q5_0, ActQ8_1
// for the two with a min): unsigned codes as Q4_0, the fifth bit or-ed in;
// low and high nibble products are widened apart (8 * 31 * 128 < 2^15 each).
template <bool Five, bool Min, int NC>
void b32_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
              size_t stride, float* out, size_t out_stride) {
    using P =
        std::conditional_t<Min, std::conditional_t<Five, PackQ5_1<kR>, PackQ4_1<kR>>, PackQ5_0<kR>>;
    const unsigned char* dws = block + P::d_offset(k);
    const unsigned char* mws = block + P::m_offset(k);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[NC];
    for (auto& a : acc) a = _mm256_setzero_ps();
    const int64_t nb = k / 32;
    for (int64_t b = 0; b < nb; ++b) {
        const unsigned char* wq = block + b * P::kQuantBytes;
        prefetch_ahead<P::kQuantBytes>(wq);
        __m256i slo[NC], shi[NC];
        for (int c = 0; c < NC; ++c) {
            slo[c] = _mm256_setzero_si256();
            shi[c] = _mm256_setzero_si256();
        }
        const __m256i high = Five ? load256(wq + 16 * kR) : _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i w = load256(wq + j * 32);
            __m256i lo = _mm256_and_si256(w, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low4);
            if constexpr (Five) {
                lo = or_masked(lo, move_bits(high, 2 * j, 4), bit4);
                hi = or_masked(hi, move_bits(high, 2 * j + 1, 4), bit4);
            }
            for (int c = 0; c < NC; ++c) {
                const int8_t* xq = ActQ8_0::q(acts + c * stride) + b * 32 + 4 * j;
                slo[c] = _mm256_add_epi16(slo[c], _mm256_maddubs_epi16(lo, bcast4(xq)));
                shi[c] = _mm256_add_epi16(shi[c], _mm256_maddubs_epi16(hi, bcast4(xq + 16)));
            }
        }
        const __m256 dw = load_fp16x8(dws + b * kR * 2);
        const __m256 mw = Min ? load_fp16x8(mws + b * kR * 2) : _mm256_setzero_ps();
        for (int c = 0; c < NC; ++c) {
            const unsigned char* a = acts + c * stride;
            __m256i isum =
                _mm256_add_epi32(_mm256_madd_epi16(slo[c], ones), _mm256_madd_epi16(shi[c], ones));
            if constexpr (!Min)
                isum = _mm256_add_epi32(isum, _mm256_set1_epi32(ActQ8_0::s(a, k)[b]));
            const __m256 dx = _mm256_set1_ps(ActQ8_0::d(a, k)[b]);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, dx), acc[c]);
            if constexpr (Min) {
                acc[c] = _mm256_fmadd_ps(mw, _mm256_set1_ps(ActQ8_1::s(a, k)[b]), acc[c]);
            }
        }
    }
    store_tile<NC>(acc, nr, out, out_stride);
}

template <int NC>
void q5_0_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
               size_t stride, float* out, size_t out_stride) {
    b32_tile<true, false, NC>(k, block, nr, acts, stride, out, out_stride);
}
template <int NC>
void q4_1_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
               size_t stride, float* out, size_t out_stride) {
    b32_tile<false, true, NC>(k, block, nr, acts, stride, out, out_stride);
}
template <int NC>
void q5_1_tile(int64_t k, const unsigned char* block, int nr, const unsigned char* acts,
               size_t stride, float* out, size_t out_stride) {
    b32_tile<true, true, NC>(k, block, nr, acts, stride, out, out_stride);
}

using TileFn = void (*)(int64_t, const unsigned char*, int, const unsigned char*, size_t, float*,
                        size_t);

template <TileFn T1, TileFn T2, TileFn T3, TileFn T4>
void tile_entry(int64_t k, const void* block, int nr, const void* acts, size_t act_stride, int nc,
                float* out, size_t out_stride) {
    const TileFn fns[] = {T1, T2, T3, T4};
    fns[nc - 1](k, byte_ptr(block), nr, byte_ptr(acts), act_stride, out, out_stride);
}

template <typename Pack>
size_t pack_bytes(int64_t k) {
    return Pack::bytes(k);
}

template <typename Pack>
void pack_block(const void* w, size_t row_bytes, int nr, int64_t k, void* out) {
    Pack::pack(w, row_bytes, nr, k, out);
}

size_t act_bytes_q8_0(int64_t k) {
    return ActQ8_0::bytes(k);
}

size_t act_bytes_q8_K(int64_t k) {
    return ActQ8_K::bytes(k);
}

template <typename Pack, dwell_dtype T, size_t (*ActBytes)(int64_t),
          void (*Quantize)(const float*, int64_t, void*), TileFn T1, TileFn T2, TileFn T3,
          TileFn T4>
GemmKernel make_kernel(const char* name) {
    return GemmKernel{name,
                      T,
                      kR,
                      kC,
                      dwell_dtype_block_elems(T),
                      &pack_bytes<Pack>,
                      &pack_block<Pack>,
                      ActBytes,
                      Quantize,
                      &tile_entry<T1, T2, T3, T4>};
}

}  // namespace

const GemmKernel* gemm_kernel_avx2(dwell_dtype t) {
    static const GemmKernel q4_0 =
        make_kernel<PackQ4_0<kR, kD16Group>, DWELL_Q4_0, act_bytes_q8_0, quantize_act_q8_0_avx2<8>,
                    q4_0_tile<1>, q4_0_tile<2>, q4_0_tile<3>, q4_0_tile<4>>("q4_0/avx2");
    static const GemmKernel q8_0 =
        make_kernel<PackQ8_0<kR, false, kD16Group>, DWELL_Q8_0, act_bytes_q8_0,
                    quantize_act_q8_0_avx2<0>, q8_0_tile<1>, q8_0_tile<2>, q8_0_tile<3>,
                    q8_0_tile<4>>("q8_0/avx2");
    static const GemmKernel q4_K =
        make_kernel<PackQ4_K<kR>, DWELL_Q4_K, act_bytes_q8_K, quantize_act_q8_K_avx2, q4_K_tile<1>,
                    q4_K_tile<2>, q4_K_tile<3>, q4_K_tile<4>>("q4_K/avx2");
    static const GemmKernel q6_K =
        make_kernel<PackQ6_K<kR>, DWELL_Q6_K, act_bytes_q8_K, quantize_act_q8_K_avx2, q6_K_tile<1>,
                    q6_K_tile<2>, q6_K_tile<3>, q6_K_tile<4>>("q6_K/avx2");
    static const GemmKernel q5_K =
        make_kernel<PackQ5_K<kR>, DWELL_Q5_K, act_bytes_q8_K, quantize_act_q8_K_avx2, q5_K_tile<1>,
                    q5_K_tile<2>, q5_K_tile<3>, q5_K_tile<4>>("q5_K/avx2");
    static const GemmKernel q5_0 =
        make_kernel<PackQ5_0<kR>, DWELL_Q5_0, act_bytes_q8_0, quantize_act_q8_0_avx2<16>,
                    q5_0_tile<1>, q5_0_tile<2>, q5_0_tile<3>, q5_0_tile<4>>("q5_0/avx2");
    static const GemmKernel q4_1 =
        make_kernel<PackQ4_1<kR>, DWELL_Q4_1, act_bytes_q8_0, quantize_act_q8_0_avx2<0, true>,
                    q4_1_tile<1>, q4_1_tile<2>, q4_1_tile<3>, q4_1_tile<4>>("q4_1/avx2");
    static const GemmKernel q5_1 =
        make_kernel<PackQ5_1<kR>, DWELL_Q5_1, act_bytes_q8_0, quantize_act_q8_0_avx2<0, true>,
                    q5_1_tile<1>, q5_1_tile<2>, q5_1_tile<3>, q5_1_tile<4>>("q5_1/avx2");
    switch (t) {
        case DWELL_Q5_K:
            return &q5_K;
        case DWELL_Q5_0:
            return &q5_0;
        case DWELL_Q4_1:
            return &q4_1;
        case DWELL_Q5_1:
            return &q5_1;
        case DWELL_Q4_0:
            return &q4_0;
        case DWELL_Q8_0:
            return &q8_0;
        case DWELL_Q4_K:
            return &q4_K;
        case DWELL_Q6_K:
            return &q6_K;
        default:
            return nullptr;
    }
}

}  // namespace dwell::cpu

#endif  // defined(__x86_64__)
