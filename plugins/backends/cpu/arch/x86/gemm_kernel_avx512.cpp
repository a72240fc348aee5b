// AVX-512 (F, BW, VL, VNNI) blocked kernels: 16 weight rows per vector, one
// row per 32-bit lane (layouts in gemm_kernel_x86.hpp). vpdpbusd multiplies
// 4 unsigned weight bytes by 4 signed activation bytes broadcast from
// memory, so the inner loop is one instruction per 64 multiply-adds and the
// block scales of 16 rows arrive as one vector.
//
// Weights are fed as unsigned codes: Q4_0 nibbles as 0..15, Q5_0 / Q5_1 /
// Q5_K codes 0..31 and Q6_K codes 0..63 rebuilt in registers from their
// nibbles and high bits, Q8_0 as q + 128, with any offset (8, 16, 32 or 128
// times the activation block sum) taken off exactly through the activation
// layout's precomputed sums. Every
// integer block sum therefore equals the scalar one; the float epilogue is
// the same sequence of operations for every lane and every column, so an
// output's bits do not depend on where it sits in a tile.
//
// Compiled with -mavx512f/bw/vl/vnni and -ffp-contract=off (CMakeLists.txt);
// reached only when the CPU probe reports SimdLevel::Avx512.
#if defined(__x86_64__)

// GCC 12's AVX-512 conversion intrinsics read a self-initialised
// "undefined" vector and trip -Wmaybe-uninitialized at every use (GCC bug
// 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <type_traits>

#include "arch/x86/gemm_kernel_x86.hpp"
#include "simd/gemm_kernel.hpp"

namespace dwell::cpu {
namespace {

using namespace x86;

constexpr int kLanes = 16;

// 4 bytes at p in every lane; compilers fold it into vpdpbusd's {1to16}
// memory operand.
inline __m512i bcast4(const void* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

inline __m512 load_fp16x16(const unsigned char* p) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

inline __m512i load512(const unsigned char* p) {
    return _mm512_load_si512(reinterpret_cast<const void*>(p));
}

// Stores the first nr (of 16 * RV) lanes of each column's accumulators.
template <int RV, int NC>
inline void store_tile(const __m512 (&acc)[RV][NC], int nr, float* out, size_t out_stride) {
    for (int rv = 0; rv < RV; ++rv) {
        const int n = std::clamp(nr - rv * kLanes, 0, kLanes);
        if (n == 0) break;
        const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
        for (int c = 0; c < NC; ++c) {
            _mm512_mask_storeu_ps(out + c * out_stride + rv * kLanes, mask, acc[rv][c]);
        }
    }
}

// Decode streams the weights from memory once; asking for the lines a few
// blocks ahead keeps more misses in flight than the hardware prefetcher
// alone does. The K-quant chunks look further ahead: 4096 bytes measured
// up to a third faster than 2048 at M = 1 on Zen 4.
constexpr size_t kChunkDistance = 4096;
// Q6_K's chunk is half again as large as Q4_K's; 8192 bytes measured ~8%
// faster than 4096 at M = 1.
constexpr size_t kQ6KChunkDistance = 8192;
// How far ahead the 32-value formats prefetch (prefetch_ahead's default).
constexpr size_t kScaleAheadBytes = 4096;

template <size_t Bytes, size_t kDistance = kScaleAheadBytes>
inline void prefetch_ahead(const unsigned char* p) {
    for (size_t off = 0; off < Bytes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(p + kDistance + off), _MM_HINT_T0);
    }
}

// A super-block's packed chunk (quants and meta) is read in Parts steps;
// step `part` asks for its share of the chunk Distance bytes ahead, so the
// meta regions arrive early too.
template <size_t Chunk, int Parts, size_t Distance = kChunkDistance>
inline void prefetch_part(const unsigned char* chunk, int part) {
    constexpr size_t kShare = (Chunk / Parts + 63) / 64 * 64;
    prefetch_ahead<kShare, Distance>(chunk + part * (Chunk / Parts));
}

// Per-column pointers into the activation rows of a tile.
template <int NC>
struct Cols {
    const unsigned char* row[NC];
    Cols(const void* acts, size_t stride) {
        for (int c = 0; c < NC; ++c) row[c] = byte_ptr(acts) + c * stride;
    }
};

// ---------------------------------------------------------------------------
// Activation quantizers: quantize_act_q8_0 / quantize_act_q8_K's arithmetic
// (activation_quant.cpp), vectorised. Max, division, multiplication and
// rounding are exact IEEE operations, so the numbers are the same bit for
// bit; a row with a NaN or infinity
// takes the reference path (whose special cases these do not reproduce).

inline bool all_finite(__m512 v) {
    // x - x is 0 for finite x and NaN otherwise.
    return _mm512_cmp_ps_mask(_mm512_sub_ps(v, v), _mm512_setzero_ps(), _CMP_EQ_OQ) == 0xffff;
}

// Q81: the Q8_1 numbers (ActQ8_1), where s is fp16(d * sum) as a float.
template <int Offset, bool Q81 = false>
void quantize_act_q8_0_avx512(const float* x, int64_t k, void* out) {
    for (int64_t i = 0; i < k; i += 16) {
        if (!all_finite(_mm512_loadu_ps(x + i))) {
            if constexpr (Q81) return quantize_act_q8_1_lanes(x, k, out);
            return quantize_act_q8_0_lanes<Offset>(x, k, out);
        }
    }
    auto* base = static_cast<unsigned char*>(out);
    const int64_t nb = ActQ8_0::blocks(k);
    auto* d = reinterpret_cast<float*>(base + k);
    auto* s = reinterpret_cast<int32_t*>(base + k + 4 * nb);
    for (int64_t b = 0; b < nb; ++b) {
        const __m512 v0 = _mm512_loadu_ps(x + 32 * b);
        const __m512 v1 = _mm512_loadu_ps(x + 32 * b + 16);
        const float amax =
            _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float db = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        d[b] = dwell_fp16_to_fp32(dwell_fp32_to_fp16(db));
        const __m512 vid = _mm512_set1_ps(id);
        __m512i q[2];
        const __m512 v[2] = {v0, v1};
        for (int h = 0; h < 2; ++h) {
            // Halves to even, as nearbyint in the default rounding mode; |q|
            // cannot exceed 127 since |x| <= amax.
            q[h] = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v[h], vid),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_store_si128(reinterpret_cast<__m128i*>(base + 32 * b + 16 * h),
                            _mm512_cvtepi32_epi8(q[h]));
        }
        const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
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

void quantize_act_q8_K_avx512(const float* x, int64_t k, void* out) {
    for (int64_t i = 0; i < k; i += 16) {
        if (!all_finite(_mm512_loadu_ps(x + i))) return quantize_act_q8_K_lanes(x, k, out);
    }
    auto* base = static_cast<unsigned char*>(out);
    const int64_t nb = ActQ8_K::blocks(k);
    auto* d = reinterpret_cast<float*>(base + k);
    for (int64_t b = 0; b < nb; ++b) {
        const float* xb = x + b * DWELL_QK_K;
        __m512 m = _mm512_setzero_ps();
        for (int i = 0; i < 16; ++i)
            m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i)));
        const float amax = _mm512_reduce_max_ps(m);
        int32_t bsum[16] = {};
        if (amax == 0.0f) {
            std::memset(base + b * DWELL_QK_K, 0, DWELL_QK_K);
            d[b] = 0.0f;
        } else {
            // The first value of largest magnitude, with its sign.
            float max = 0.0f;
            const __m512 vmax = _mm512_set1_ps(amax);
            for (int i = 0; i < 16; ++i) {
                const __mmask16 hit = _mm512_cmp_ps_mask(
                    _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i)), vmax, _CMP_EQ_OQ);
                if (hit != 0) {
                    max = xb[16 * i + __builtin_ctz(hit)];
                    break;
                }
            }
            const float iscale = -127.0f / max;
            const __m512 vs = _mm512_set1_ps(iscale);
            for (int i = 0; i < 16; ++i) {
                // Ties to even, as lrint in the default rounding mode.
                __m512i q =
                    _mm512_cvt_roundps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(xb + 16 * i)),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-128)),
                                     _mm512_set1_epi32(127));
                _mm_store_si128(reinterpret_cast<__m128i*>(base + b * DWELL_QK_K + 16 * i),
                                _mm512_cvtepi32_epi8(q));
                bsum[i] = _mm512_reduce_add_epi32(q);
            }
            d[b] = 1.0f / iscale;
        }
        put_q8_K_sums(bsum, b, nb, base + k);
    }
    const size_t used = static_cast<size_t>(k) + ActQ8_K::kMetaBytes * static_cast<size_t>(nb);
    std::memset(base + used, 0, ActQ8_K::bytes(k) - used);
}

// ---------------------------------------------------------------------------
// Q4_0 and Q8_0 (activations: ActQ8_0).

// Blocks of quants per scale group in the packed layout (PackD16).
constexpr int kD16Group = 2;

// Q4_0 and Q8_0 differ only in how a block's weights become vpdpbusd's
// unsigned bytes (Nib: two nibbles per byte, else one offset int8), so they
// share the block loop; Nib is a template argument so each inner loop
// compiles as lean as a hand-written one.
template <bool Nib, int RV, int NC>
void q8_0_family_tile(int64_t k, const unsigned char* block, int nr, const void* acts,
                      size_t stride, float* out, size_t out_stride) {
    constexpr int R = kLanes * RV;
    using P = std::conditional_t<Nib, PackQ4_0<R, kD16Group>, PackQ8_0<R, true, kD16Group>>;
    const Cols<NC> x(acts, stride);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512 acc[RV][NC];
    for (auto& a : acc)
        for (auto& v : a) v = _mm512_setzero_ps();
    const int64_t nb = k / 32;
    for (int64_t b = 0; b < nb; ++b) {
        const unsigned char* wq = block + P::quant_offset(b);
        // Quants and scales are one stream; this block's share of it,
        // kScaleAheadBytes on.
        prefetch_ahead<(P::kStreamBytes + 63) / 64 * 64>(block +
                                                         static_cast<size_t>(b) * P::kStreamBytes);
        __m512i isum[RV][NC];
        for (int c = 0; c < NC; ++c) {
            const __m512i init = _mm512_set1_epi32(ActQ8_0::s(x.row[c], k)[b]);
            for (int rv = 0; rv < RV; ++rv) isum[rv][c] = init;
        }
        // A row's block is 32 bytes as int8 but 16 as nibbles (element e in
        // the low half, e + 16 in the high one), read 4 bytes at a time.
        for (int j = 0; j < (Nib ? 4 : 8); ++j) {
            for (int rv = 0; rv < RV; ++rv) {
                const __m512i w = load512(wq + (j * RV + rv) * 64);
                __m512i lo = w;
                __m512i hi = w;
                if constexpr (Nib) {
                    lo = _mm512_and_si512(w, low4);
                    hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low4);
                }
                for (int c = 0; c < NC; ++c) {
                    const int8_t* xq = ActQ8_0::q(x.row[c]) + b * 32 + 4 * j;
                    isum[rv][c] = _mm512_dpbusd_epi32(isum[rv][c], lo, bcast4(xq));
                    if constexpr (Nib)
                        isum[rv][c] = _mm512_dpbusd_epi32(isum[rv][c], hi, bcast4(xq + 16));
                }
            }
        }
        for (int rv = 0; rv < RV; ++rv) {
            const __m512 dw = load_fp16x16(block + P::scale_offset(k, b) + rv * kLanes * 2);
            for (int c = 0; c < NC; ++c) {
                const __m512 dx = _mm512_set1_ps(ActQ8_0::d(x.row[c], k)[b]);
                acc[rv][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[rv][c]), _mm512_mul_ps(dw, dx),
                                             acc[rv][c]);
            }
        }
    }
    store_tile<RV, NC>(acc, nr, out, out_stride);
}

template <int RV, int NC>
void q4_0_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
               float* out, size_t out_stride) {
    q8_0_family_tile<true, RV, NC>(k, block, nr, acts, stride, out, out_stride);
}
template <int RV, int NC>
void q8_0_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
               float* out, size_t out_stride) {
    q8_0_family_tile<false, RV, NC>(k, block, nr, acts, stride, out, out_stride);
}

// ---------------------------------------------------------------------------
// Q4_K and Q5_K: per sub-block of 32 an exact int32 dot (vpdpbusd), times the
// 6-bit scale (vpmulld); the mins term sum(mn_j * bsum_j) is a 16-bit dot of
// the packed mins pairs with the activation's sum pairs (vpdpwssd). The float
// epilogue per super-block is d * dx * sumi - dmin * dx * summ, as in the
// scalar code but as two fused steps. Q5_K's fifth bits are or-ed into the
// nibbles in registers, so the weights stream at the file's size.

// Bits `from`.. of every byte moved to bit `to`..; the caller masks away what
// the 16-bit shift brings in from the neighbouring byte.
inline __m512i move_bits(__m512i v, int from, int to) {
    if (to > from) return _mm512_slli_epi16(v, static_cast<unsigned>(to - from));
    if (to < from) return _mm512_srli_epi16(v, static_cast<unsigned>(from - to));
    return v;
}

// nib | (high & mask): the code from its low bits and its placed high bits.
inline __m512i or_masked(__m512i nib, __m512i high, __m512i mask) {
    return _mm512_ternarylogic_epi32(nib, high, mask, 0xf8);
}

template <bool Five, int RV, int NC>
void k45_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
              float* out, size_t out_stride) {
    constexpr int R = kLanes * RV;
    using P = PackK45<R, Five>;
    const Cols<NC> x(acts, stride);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    __m512 acc[RV][NC];
    for (auto& a : acc)
        for (auto& v : a) v = _mm512_setzero_ps();
    const int64_t nsb = k / DWELL_QK_K;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const unsigned char* chunk = block + sb * P::kChunk;
        __m512i isum[RV][NC];
        for (auto& a : isum)
            for (auto& v : a) v = _mm512_setzero_si512();
        for (int p = 0; p < 4; ++p) {
            prefetch_part<P::kChunk, 4>(chunk, p);
            __m512i alo[RV][NC], ahi[RV][NC];
            for (int rv = 0; rv < RV; ++rv) {
                for (int c = 0; c < NC; ++c) {
                    alo[rv][c] = _mm512_setzero_si512();
                    ahi[rv][c] = _mm512_setzero_si512();
                }
            }
            __m512i high[RV];
            for (int j = 0; j < 8; ++j) {
                for (int rv = 0; rv < RV; ++rv) {
                    const __m512i w = load512(chunk + ((p * 8 + j) * RV + rv) * 64);
                    __m512i lo = _mm512_and_si512(w, low4);
                    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low4);
                    if constexpr (Five) {
                        if (j % 4 == 0) {
                            high[rv] =
                                load512(chunk + P::kNibbleBytes + ((p * 2 + j / 4) * RV + rv) * 64);
                        }
                        lo = or_masked(lo, move_bits(high[rv], 2 * (j % 4), 4), bit4);
                        hi = or_masked(hi, move_bits(high[rv], 2 * (j % 4) + 1, 4), bit4);
                    }
                    for (int c = 0; c < NC; ++c) {
                        const int8_t* xq = ActQ8_K::q(x.row[c]) + sb * 256 + 64 * p + 4 * j;
                        alo[rv][c] = _mm512_dpbusd_epi32(alo[rv][c], lo, bcast4(xq));
                        ahi[rv][c] = _mm512_dpbusd_epi32(ahi[rv][c], hi, bcast4(xq + 32));
                    }
                }
            }
            for (int rv = 0; rv < RV; ++rv) {
                const unsigned char* sc = chunk + P::kScales + rv * kLanes;
                const __m512i slo = _mm512_cvtepu8_epi32(
                    _mm_load_si128(reinterpret_cast<const __m128i*>(sc + (2 * p) * R)));
                const __m512i shi = _mm512_cvtepu8_epi32(
                    _mm_load_si128(reinterpret_cast<const __m128i*>(sc + (2 * p + 1) * R)));
                for (int c = 0; c < NC; ++c) {
                    isum[rv][c] = _mm512_add_epi32(
                        isum[rv][c], _mm512_add_epi32(_mm512_mullo_epi32(alo[rv][c], slo),
                                                      _mm512_mullo_epi32(ahi[rv][c], shi)));
                }
            }
        }
        for (int rv = 0; rv < RV; ++rv) {
            __m512i mins[4];
            for (int i = 0; i < 4; ++i) {
                mins[i] = _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(
                    chunk + P::kMins + i * 2 * R + rv * 2 * kLanes)));
            }
            const __m512 d = load_fp16x16(chunk + P::kD + rv * 2 * kLanes);
            const __m512 dmin = load_fp16x16(chunk + P::kDmin + rv * 2 * kLanes);
            for (int c = 0; c < NC; ++c) {
                const int32_t* pairs = ActQ8_K::pairs(x.row[c], k) + 4 * sb;
                __m512i msum = _mm512_setzero_si512();
                for (int i = 0; i < 4; ++i) {
                    msum = _mm512_dpwssd_epi32(msum, mins[i], _mm512_set1_epi32(pairs[i]));
                }
                const __m512 dx = _mm512_set1_ps(ActQ8_K::d(x.row[c], k)[sb]);
                acc[rv][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[rv][c]), _mm512_mul_ps(d, dx),
                                             acc[rv][c]);
                acc[rv][c] =
                    _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), acc[rv][c]);
            }
        }
    }
    store_tile<RV, NC>(acc, nr, out, out_stride);
}

// Q6_K from PackQ6_Kp, which keeps the file's size: decode streams 22% fewer
// bytes than one byte per code would, for a shift and a ternary-logic or per
// code vector (amortised over the tile's columns in prefill). Each
// sub-block's int32 dot starts at -32 * bsum (the code offset) and is scaled
// by the signed 8-bit scale. Per group q of a quarter p, code vectors of
// j = 2q, 2q + 1 share one vector of top bits; j < 4 are sub-blocks 4p and
// 4p + 2 (low and high nibbles), j >= 4 sub-blocks 4p + 1 and 4p + 3.
template <int RV, int NC>
void q6_K_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
               float* out, size_t out_stride) {
    constexpr int R = kLanes * RV;
    using P = PackQ6_Kp<R>;
    const Cols<NC> x(acts, stride);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i top2 = _mm512_set1_epi8(0x30);
    __m512 acc[RV][NC];
    for (auto& a : acc)
        for (auto& v : a) v = _mm512_setzero_ps();
    const int64_t nsb = k / DWELL_QK_K;
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const unsigned char* chunk = block + sb * P::kChunk;
        __m512i isum[RV][NC];
        for (auto& a : isum)
            for (auto& v : a) v = _mm512_setzero_si512();
        for (int p = 0; p < 4; ++p) {
            prefetch_part<P::kChunk, 4, kQ6KChunkDistance>(chunk, p);
            for (int half = 0; half < 2; ++half) {
                const int s_lo = 4 * p + half, s_hi = 4 * p + 2 + half;
                __m512i alo[RV][NC], ahi[RV][NC];
                for (int c = 0; c < NC; ++c) {
                    const int32_t* neg32 = ActQ8_K::neg32(x.row[c], k) + 16 * sb;
                    const __m512i ilo = _mm512_set1_epi32(neg32[s_lo]);
                    const __m512i ihi = _mm512_set1_epi32(neg32[s_hi]);
                    for (int rv = 0; rv < RV; ++rv) {
                        alo[rv][c] = ilo;
                        ahi[rv][c] = ihi;
                    }
                }
                for (int q = 2 * half; q < 2 * half + 2; ++q) {
                    for (int rv = 0; rv < RV; ++rv) {
                        const __m512i high =
                            load512(chunk + P::kNibbleBytes + ((p * 4 + q) * RV + rv) * 64);
                        for (int jj = 0; jj < 2; ++jj) {
                            const int j = 2 * q + jj;
                            const __m512i w = load512(chunk + ((p * 8 + j) * RV + rv) * 64);
                            const __m512i lo = or_masked(_mm512_and_si512(w, low4),
                                                         move_bits(high, 4 * jj, 4), top2);
                            const __m512i hi =
                                or_masked(_mm512_and_si512(_mm512_srli_epi16(w, 4), low4),
                                          move_bits(high, 4 * jj + 2, 4), top2);
                            for (int c = 0; c < NC; ++c) {
                                const int8_t* xq = ActQ8_K::q(x.row[c]) + sb * 256 + 64 * p + 4 * j;
                                alo[rv][c] = _mm512_dpbusd_epi32(alo[rv][c], lo, bcast4(xq));
                                ahi[rv][c] = _mm512_dpbusd_epi32(ahi[rv][c], hi, bcast4(xq + 32));
                            }
                        }
                    }
                }
                for (int rv = 0; rv < RV; ++rv) {
                    const unsigned char* sc = chunk + P::kScales + rv * kLanes;
                    const __m512i slo = _mm512_cvtepi8_epi32(
                        _mm_load_si128(reinterpret_cast<const __m128i*>(sc + s_lo * R)));
                    const __m512i shi = _mm512_cvtepi8_epi32(
                        _mm_load_si128(reinterpret_cast<const __m128i*>(sc + s_hi * R)));
                    for (int c = 0; c < NC; ++c) {
                        isum[rv][c] = _mm512_add_epi32(
                            isum[rv][c], _mm512_add_epi32(_mm512_mullo_epi32(alo[rv][c], slo),
                                                          _mm512_mullo_epi32(ahi[rv][c], shi)));
                    }
                }
            }
        }
        for (int rv = 0; rv < RV; ++rv) {
            const __m512 d = load_fp16x16(chunk + P::kD + rv * 2 * kLanes);
            for (int c = 0; c < NC; ++c) {
                const __m512 dx = _mm512_set1_ps(ActQ8_K::d(x.row[c], k)[sb]);
                acc[rv][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[rv][c]), _mm512_mul_ps(d, dx),
                                             acc[rv][c]);
            }
        }
    }
    store_tile<RV, NC>(acc, nr, out, out_stride);
}

// ---------------------------------------------------------------------------
// Q5_0, Q4_1 and Q5_1 (blocks of 32; activations ActQ8_0 with offset 16 for
// Q5_0, ActQ8_1 for the two with a min). Codes are unsigned (5-bit ones
// rebuilt from nibble and fifth bit); Q5_0's offset 16 comes off through
// the activation sums, the mins enter the float epilogue as m * s.
template <bool Five, bool Min, int RV, int NC>
void b32_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
              float* out, size_t out_stride) {
    constexpr int R = kLanes * RV;
    using P =
        std::conditional_t<Min, std::conditional_t<Five, PackQ5_1<R>, PackQ4_1<R>>, PackQ5_0<R>>;
    const Cols<NC> x(acts, stride);
    const unsigned char* dws = block + P::d_offset(k);
    const unsigned char* mws = block + P::m_offset(k);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    __m512 acc[RV][NC];
    for (auto& a : acc)
        for (auto& v : a) v = _mm512_setzero_ps();
    const int64_t nb = k / 32;
    for (int64_t b = 0; b < nb; ++b) {
        const unsigned char* wq = block + b * P::kQuantBytes;
        prefetch_ahead<P::kQuantBytes>(wq);
        // The scales (and offsets) are other streams: ask for them as far
        // ahead (in blocks) as the quants.
        _mm_prefetch(
            reinterpret_cast<const char*>(dws) + (b + kScaleAheadBytes / P::kQuantBytes) * R * 2,
            _MM_HINT_T0);
        if (Min) {
            _mm_prefetch(reinterpret_cast<const char*>(mws) +
                             (b + kScaleAheadBytes / P::kQuantBytes) * R * 2,
                         _MM_HINT_T0);
        }
        __m512i isum[RV][NC];
        for (int c = 0; c < NC; ++c) {
            const __m512i init =
                Min ? _mm512_setzero_si512() : _mm512_set1_epi32(ActQ8_0::s(x.row[c], k)[b]);
            for (int rv = 0; rv < RV; ++rv) isum[rv][c] = init;
        }
        __m512i high[RV];
        if constexpr (Five) {
            for (int rv = 0; rv < RV; ++rv) high[rv] = load512(wq + 16 * R + rv * 64);
        }
        for (int j = 0; j < 4; ++j) {
            for (int rv = 0; rv < RV; ++rv) {
                const __m512i w = load512(wq + (j * RV + rv) * 64);
                __m512i lo = _mm512_and_si512(w, low4);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low4);
                if constexpr (Five) {
                    lo = or_masked(lo, move_bits(high[rv], 2 * j, 4), bit4);
                    hi = or_masked(hi, move_bits(high[rv], 2 * j + 1, 4), bit4);
                }
                for (int c = 0; c < NC; ++c) {
                    const int8_t* xq = ActQ8_0::q(x.row[c]) + b * 32 + 4 * j;
                    isum[rv][c] = _mm512_dpbusd_epi32(isum[rv][c], lo, bcast4(xq));
                    isum[rv][c] = _mm512_dpbusd_epi32(isum[rv][c], hi, bcast4(xq + 16));
                }
            }
        }
        for (int rv = 0; rv < RV; ++rv) {
            const __m512 dw = load_fp16x16(dws + (b * R + rv * kLanes) * 2);
            __m512 mw = _mm512_setzero_ps();
            if constexpr (Min) mw = load_fp16x16(mws + (b * R + rv * kLanes) * 2);
            for (int c = 0; c < NC; ++c) {
                const __m512 dx = _mm512_set1_ps(ActQ8_0::d(x.row[c], k)[b]);
                acc[rv][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[rv][c]), _mm512_mul_ps(dw, dx),
                                             acc[rv][c]);
                if constexpr (Min) {
                    const __m512 sx = _mm512_set1_ps(ActQ8_1::s(x.row[c], k)[b]);
                    acc[rv][c] = _mm512_fmadd_ps(mw, sx, acc[rv][c]);
                }
            }
        }
    }
    store_tile<RV, NC>(acc, nr, out, out_stride);
}

// ---------------------------------------------------------------------------
// GemmKernel glue: tile() picks the instantiation for nc.

using TileFn = void (*)(int64_t, const unsigned char*, int, const void*, size_t, float*, size_t);

// One function per dtype mapping nc to its instantiation.
#define DWELL_DEFINE_PICK(name, fn, RV) \
    TileFn name(int nc) {               \
        switch (nc) {                   \
            case 1:                     \
                return &fn<RV, 1>;      \
            case 2:                     \
                return &fn<RV, 2>;      \
            case 3:                     \
                return &fn<RV, 3>;      \
            default:                    \
                return &fn<RV, 4>;      \
        }                               \
    }

template <typename Pack, int R, int C, dwell_dtype T, size_t (*ActBytes)(int64_t),
          void (*Quantize)(const float*, int64_t, void*), TileFn (*Pick)(int)>
GemmKernel make_kernel(const char* name) {
    return GemmKernel{name,
                      T,
                      R,
                      C,
                      dwell_dtype_block_elems(T),
                      [](int64_t k) { return Pack::bytes(k); },
                      [](const void* w, size_t row_bytes, int nr, int64_t k, void* out) {
                          Pack::pack(w, row_bytes, nr, k, out);
                      },
                      ActBytes,
                      Quantize,
                      [](int64_t k, const void* block, int nr, const void* acts, size_t act_stride,
                         int nc, float* out, size_t out_stride) {
                          Pick(nc)(k, byte_ptr(block), nr, acts, act_stride, out, out_stride);
                      }};
}

constexpr int kRV = 1;
constexpr int kR = kLanes * kRV;

DWELL_DEFINE_PICK(pick_q4_0, q4_0_tile, kRV)
DWELL_DEFINE_PICK(pick_q8_0, q8_0_tile, kRV)
template <int RV, int NC>
void q4_K_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
               float* out, size_t out_stride) {
    k45_tile<false, RV, NC>(k, block, nr, acts, stride, out, out_stride);
}
template <int RV, int NC>
void q5_K_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
               float* out, size_t out_stride) {
    k45_tile<true, RV, NC>(k, block, nr, acts, stride, out, out_stride);
}
template <int RV, int NC>
void q5_0_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
               float* out, size_t out_stride) {
    b32_tile<true, false, RV, NC>(k, block, nr, acts, stride, out, out_stride);
}
template <int RV, int NC>
void q4_1_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
               float* out, size_t out_stride) {
    b32_tile<false, true, RV, NC>(k, block, nr, acts, stride, out, out_stride);
}
template <int RV, int NC>
void q5_1_tile(int64_t k, const unsigned char* block, int nr, const void* acts, size_t stride,
               float* out, size_t out_stride) {
    b32_tile<true, true, RV, NC>(k, block, nr, acts, stride, out, out_stride);
}

DWELL_DEFINE_PICK(pick_q4_K, q4_K_tile, kRV)
DWELL_DEFINE_PICK(pick_q5_K, q5_K_tile, kRV)
DWELL_DEFINE_PICK(pick_q6_K, q6_K_tile, kRV)
DWELL_DEFINE_PICK(pick_q5_0, q5_0_tile, kRV)
DWELL_DEFINE_PICK(pick_q4_1, q4_1_tile, kRV)
DWELL_DEFINE_PICK(pick_q5_1, q5_1_tile, kRV)

#undef DWELL_DEFINE_PICK

size_t act_bytes_q8_0(int64_t k) {
    return ActQ8_0::bytes(k);
}
size_t act_bytes_q8_K(int64_t k) {
    return ActQ8_K::bytes(k);
}

}  // namespace

const GemmKernel* gemm_kernel_avx512(dwell_dtype t) {
    static const GemmKernel q4_0 =
        make_kernel<PackQ4_0<kR, kD16Group>, kR, 4, DWELL_Q4_0, act_bytes_q8_0,
                    quantize_act_q8_0_avx512<8>, pick_q4_0>("q4_0/avx512vnni");
    static const GemmKernel q8_0 =
        make_kernel<PackQ8_0<kR, true, kD16Group>, kR, 4, DWELL_Q8_0, act_bytes_q8_0,
                    quantize_act_q8_0_avx512<128>, pick_q8_0>("q8_0/avx512vnni");
    static const GemmKernel q4_K =
        make_kernel<PackQ4_K<kR>, kR, 4, DWELL_Q4_K, act_bytes_q8_K, quantize_act_q8_K_avx512,
                    pick_q4_K>("q4_K/avx512vnni");
    static const GemmKernel q6_K =
        make_kernel<PackQ6_Kp<kR>, kR, 4, DWELL_Q6_K, act_bytes_q8_K, quantize_act_q8_K_avx512,
                    pick_q6_K>("q6_K/avx512vnni");
    static const GemmKernel q5_K =
        make_kernel<PackQ5_K<kR>, kR, 4, DWELL_Q5_K, act_bytes_q8_K, quantize_act_q8_K_avx512,
                    pick_q5_K>("q5_K/avx512vnni");
    static const GemmKernel q5_0 =
        make_kernel<PackQ5_0<kR>, kR, 4, DWELL_Q5_0, act_bytes_q8_0, quantize_act_q8_0_avx512<16>,
                    pick_q5_0>("q5_0/avx512vnni");
    static const GemmKernel q4_1 =
        make_kernel<PackQ4_1<kR>, kR, 4, DWELL_Q4_1, act_bytes_q8_0,
                    quantize_act_q8_0_avx512<0, true>, pick_q4_1>("q4_1/avx512vnni");
    static const GemmKernel q5_1 =
        make_kernel<PackQ5_1<kR>, kR, 4, DWELL_Q5_1, act_bytes_q8_0,
                    quantize_act_q8_0_avx512<0, true>, pick_q5_1>("q5_1/avx512vnni");
    switch (t) {
        case DWELL_Q4_0:
            return &q4_0;
        case DWELL_Q8_0:
            return &q8_0;
        case DWELL_Q4_K:
            return &q4_K;
        case DWELL_Q6_K:
            return &q6_K;
        case DWELL_Q5_K:
            return &q5_K;
        case DWELL_Q5_0:
            return &q5_0;
        case DWELL_Q4_1:
            return &q4_1;
        case DWELL_Q5_1:
            return &q5_1;
        default:
            return nullptr;
    }
}

}  // namespace dwell::cpu

#endif  // defined(__x86_64__)
