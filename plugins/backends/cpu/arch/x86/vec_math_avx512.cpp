// AVX-512 (F, BW, VL) vector math for the bandwidth- and exp-bound entries;
// the rest keep their AVX2 versions. Compiled alone with the AVX-512 flags
// and -ffp-contract=off (see CMakeLists.txt). Tails use masked loads and
// stores, which never touch memory outside the arrays. The expf runs the
// same operations as the AVX2 one, so both round identically.
#if defined(__x86_64__)

// GCC 12's AVX-512 intrinsics read a self-initialised "undefined" vector and
// trip -W(maybe-)uninitialized where they are inlined (GCC bug 105593, fixed
// in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "dwell/tensor.h"
#include "simd/vec_math.hpp"
#include "simd/vec_math_exp.hpp"

namespace dwell::cpu {

namespace {

inline __mmask16 tail_mask(int64_t m) {
    return static_cast<__mmask16>((1u << m) - 1u);
}

inline __m512 load_f16x16(const unsigned char* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline __m512 maskz_load_f16x16(__mmask16 m, const unsigned char* p) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

inline __m512d add_widened(__m512d acc, __m512 v) {
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(hi));
}

inline __m512 exp16(__m512 x) {
    using namespace vexp;
    x = _mm512_max_ps(_mm512_set1_ps(kExpMin), _mm512_min_ps(_mm512_set1_ps(kExpMax), x));
    const __m512 kf = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(kLn2Hi), x);
    r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(kLn2Lo), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kC7), r, _mm512_set1_ps(kC6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC2));
    const __m512 e =
        _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    const __m512i k = _mm512_cvtps_epi32(kf);
    const __m512i k1 = _mm512_srai_epi32(k, 1);
    const __m512i k2 = _mm512_sub_epi32(k, k1);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512 f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
    const __m512 f2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
    return _mm512_mul_ps(_mm512_mul_ps(e, f1), f2);
}

inline __m512 silu16(__m512 x) {
    const __m512 neg = _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(neg)));
}

// As gelu_scalar (a multiply then an add each, never fused).
inline __m512 gelu16(__m512 x) {
    const __m512 x2 = _mm512_mul_ps(x, x);
    const __m512 inner =
        _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(_mm512_set1_ps(kGeluCoef), x2));
    const __m512 u = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(kGeluSqrt2OverPi), x), inner);
    const __m512 t = _mm512_mul_ps(_mm512_set1_ps(-2.0f), u);
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(t)));
}

float dot_f32_avx512(const float* x, const float* y, int64_t n) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
    }
    for (; i + 16 <= n; i += 16) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

float dot_f16_avx512(const void* x16, const float* y, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(x16);
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(load_f16x16(p + 2 * i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(load_f16x16(p + 2 * i + 32), _mm512_loadu_ps(y + i + 16), a1);
    }
    for (; i + 16 <= n; i += 16) {
        a0 = _mm512_fmadd_ps(load_f16x16(p + 2 * i), _mm512_loadu_ps(y + i), a0);
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        a1 = _mm512_fmadd_ps(maskz_load_f16x16(m, p + 2 * i), _mm512_maskz_loadu_ps(m, y + i), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

inline __m512 maskz_load_f32x16(__mmask16 m, const unsigned char* p) {
    return _mm512_maskz_loadu_ps(m, p);
}

// Columns in blocks of 64 (four accumulators held across all rows), then of
// 16, the last one masked; every element still sees the rows in order.
template <__m512 (*MaskzLoad16)(__mmask16, const unsigned char*), int Elem>
void axpy_rows_avx512(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                      int64_t n) {
    const auto* base = static_cast<const unsigned char*>(rows);
    const __mmask16 all = 0xFFFF;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
        __m512 y2 = _mm512_loadu_ps(y + i + 32), y3 = _mm512_loadu_ps(y + i + 48);
        for (int64_t j = 0; j < n_rows; ++j) {
            const unsigned char* r = base + j * stride + Elem * i;
            const __m512 w = _mm512_set1_ps(a[j]);
            y0 = _mm512_add_ps(y0, _mm512_mul_ps(w, MaskzLoad16(all, r)));
            y1 = _mm512_add_ps(y1, _mm512_mul_ps(w, MaskzLoad16(all, r + 16 * Elem)));
            y2 = _mm512_add_ps(y2, _mm512_mul_ps(w, MaskzLoad16(all, r + 32 * Elem)));
            y3 = _mm512_add_ps(y3, _mm512_mul_ps(w, MaskzLoad16(all, r + 48 * Elem)));
        }
        _mm512_storeu_ps(y + i, y0);
        _mm512_storeu_ps(y + i + 16, y1);
        _mm512_storeu_ps(y + i + 32, y2);
        _mm512_storeu_ps(y + i + 48, y3);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? all : tail_mask(n - i);
        __m512 y0 = _mm512_maskz_loadu_ps(m, y + i);
        for (int64_t j = 0; j < n_rows; ++j) {
            const __m512 x = MaskzLoad16(m, base + j * stride + Elem * i);
            y0 = _mm512_add_ps(y0, _mm512_mul_ps(_mm512_set1_ps(a[j]), x));
        }
        _mm512_mask_storeu_ps(y + i, m, y0);
    }
}

void axpy_f32_avx512(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                     int64_t n) {
    axpy_rows_avx512<maskz_load_f32x16, 4>(a, rows, stride, n_rows, y, n);
}

void axpy_f16_avx512(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                     int64_t n) {
    axpy_rows_avx512<maskz_load_f16x16, 2>(a, rows, stride, n_rows, y, n);
}

// Sixteen vectors to the vector of their lane sums: quarters, then halves
// of quarters, then lanes are added pairwise across vectors (15 shuffles
// pairs and adds in all instead of a full reduction per vector); the result
// comes out in the order key 4m + k at lane 4k + m, put right by one
// permute.
inline __m512 reduce16(const __m512 (&v)[16]) {
    __m512 w[8], x[4], y[2];
    for (int i = 0; i < 8; ++i) {
        w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xee));
    }
    for (int i = 0; i < 4; ++i) {
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], 0xdd));
    }
    for (int i = 0; i < 2; ++i) {
        y[i] = _mm512_add_ps(_mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]),
                             _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]));
    }
    const __m512 z =
        _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x44), _mm512_shuffle_ps(y[0], y[1], 0xee));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, z);
}

// Keys of up to 128 values against up to 8 query heads: each key row is
// widened once and dotted with every head; per head the 16 keys of a block
// are reduced together. Other shapes take the row-by-row path.
template <int NV>
void dots_f16_block(const unsigned char* rows, int64_t stride, int64_t n_rows, const float* q,
                    int64_t q_stride, int64_t n_q, float* out, int64_t out_stride) {
    alignas(64) __m512 part[8][16];
    for (int64_t j0 = 0; j0 < n_rows; j0 += 16) {
        const int64_t nb = std::min<int64_t>(16, n_rows - j0);
        for (int64_t j = 0; j < 16; ++j) {
            if (j >= nb) {
                for (int64_t h = 0; h < n_q; ++h) part[h][j] = _mm512_setzero_ps();
                continue;
            }
            const unsigned char* r = rows + (j0 + j) * stride;
            __m512 kv[NV];
            for (int v = 0; v < NV; ++v) kv[v] = load_f16x16(r + 32 * v);
            for (int64_t h = 0; h < n_q; ++h) {
                const float* qh = q + h * q_stride;
                __m512 acc = _mm512_mul_ps(kv[0], _mm512_loadu_ps(qh));
                for (int v = 1; v < NV; ++v)
                    acc = _mm512_fmadd_ps(kv[v], _mm512_loadu_ps(qh + 16 * v), acc);
                part[h][j] = acc;
            }
        }
        const __mmask16 m = nb == 16 ? 0xFFFF : tail_mask(nb);
        for (int64_t h = 0; h < n_q; ++h) {
            _mm512_mask_storeu_ps(out + h * out_stride + j0, m, reduce16(part[h]));
        }
    }
}

void dots_f16_avx512(const void* rows, int64_t stride, int64_t n_rows, const float* q,
                     int64_t q_stride, int64_t n_q, int64_t n, float* out, int64_t out_stride) {
    const auto* r = static_cast<const unsigned char*>(rows);
    if (n_q >= 1 && n_q <= 8 && n % 16 == 0 && n <= 128) {
        switch (n / 16) {
            case 1:
                return dots_f16_block<1>(r, stride, n_rows, q, q_stride, n_q, out, out_stride);
            case 2:
                return dots_f16_block<2>(r, stride, n_rows, q, q_stride, n_q, out, out_stride);
            case 4:
                return dots_f16_block<4>(r, stride, n_rows, q, q_stride, n_q, out, out_stride);
            case 8:
                return dots_f16_block<8>(r, stride, n_rows, q, q_stride, n_q, out, out_stride);
            default:
                break;
        }
    }
    dots_by_rows<dot_f16_avx512>(rows, stride, n_rows, q, q_stride, n_q, n, out, out_stride);
}

// Value rows of up to 64 values into up to 4 heads' sums held in registers:
// each row widened once; per element still one multiply then one add per
// row in order, as axpy_f16.
template <int NV>
void axpy_f16_heads(const float* a, int64_t a_stride, const unsigned char* rows, int64_t stride,
                    int64_t n_rows, float* y, int64_t y_stride, int64_t n_y) {
    __m512 acc[4][NV];
    for (int64_t h = 0; h < n_y; ++h)
        for (int v = 0; v < NV; ++v) acc[h][v] = _mm512_loadu_ps(y + h * y_stride + 16 * v);
    for (int64_t j = 0; j < n_rows; ++j) {
        const unsigned char* r = rows + j * stride;
        __m512 x[NV];
        for (int v = 0; v < NV; ++v) x[v] = load_f16x16(r + 32 * v);
        for (int64_t h = 0; h < n_y; ++h) {
            const __m512 w = _mm512_set1_ps(a[h * a_stride + j]);
            for (int v = 0; v < NV; ++v)
                acc[h][v] = _mm512_add_ps(acc[h][v], _mm512_mul_ps(w, x[v]));
        }
    }
    for (int64_t h = 0; h < n_y; ++h)
        for (int v = 0; v < NV; ++v) _mm512_storeu_ps(y + h * y_stride + 16 * v, acc[h][v]);
}

void axpy_f16_multi_avx512(const float* a, int64_t a_stride, const void* rows, int64_t stride,
                           int64_t n_rows, float* y, int64_t y_stride, int64_t n_y, int64_t n) {
    const auto* r = static_cast<const unsigned char*>(rows);
    if (n % 16 == 0 && n <= 64 && n_y >= 1) {
        for (int64_t h0 = 0; h0 < n_y; h0 += 4) {
            const int64_t nh = std::min<int64_t>(4, n_y - h0);
            const float* ah = a + h0 * a_stride;
            float* yh = y + h0 * y_stride;
            switch (n / 16) {
                case 1:
                    axpy_f16_heads<1>(ah, a_stride, r, stride, n_rows, yh, y_stride, nh);
                    break;
                case 2:
                    axpy_f16_heads<2>(ah, a_stride, r, stride, n_rows, yh, y_stride, nh);
                    break;
                case 3:
                    axpy_f16_heads<3>(ah, a_stride, r, stride, n_rows, yh, y_stride, nh);
                    break;
                default:
                    axpy_f16_heads<4>(ah, a_stride, r, stride, n_rows, yh, y_stride, nh);
                    break;
            }
        }
        return;
    }
    axpy_multi_by_rows<axpy_f16_avx512>(a, a_stride, rows, stride, n_rows, y, y_stride, n_y, n);
}

// E4M3 codes (zero-extended to 16 bits) as IEEE half bits of value / 256;
// see vec_math_avx2.cpp.
inline __m256i fp8_half_bits(__m256i codes) {
    const __m256i t = _mm256_slli_epi16(codes, 7);
    const __m256i h = _mm256_add_epi16(t, _mm256_and_si256(t, _mm256_set1_epi16(0x4000)));
    const __m256i mag = _mm256_and_si256(t, _mm256_set1_epi16(0x3f80));
    const __m256i nan = _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x3f80));
    return _mm256_or_si256(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x7c00)));
}

inline __m512 maskz_load_fp8x16(__mmask16 m, const unsigned char* p) {
    const __m256i codes = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(m, p));
    return _mm512_mul_ps(_mm512_cvtph_ps(fp8_half_bits(codes)), _mm512_set1_ps(256.0f));
}

float dot_fp8_avx512(const void* x8, const float* y, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(x8);
    const __mmask16 all = 0xFFFF;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm512_fmadd_ps(maskz_load_fp8x16(all, p + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(maskz_load_fp8x16(all, p + i + 16), _mm512_loadu_ps(y + i + 16), a1);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? all : tail_mask(n - i);
        a0 = _mm512_fmadd_ps(maskz_load_fp8x16(m, p + i), _mm512_maskz_loadu_ps(m, y + i), a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

void axpy_fp8_avx512(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                     int64_t n) {
    axpy_rows_avx512<maskz_load_fp8x16, 1>(a, rows, stride, n_rows, y, n);
}

constexpr int64_t kQ8Block = DWELL_QK8_0;
constexpr int64_t kQ8Bytes = sizeof(dwell_block_q8_0);

inline float load_f16(const unsigned char* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// The 32 values of the block at p, sixteen per vector.
struct Q8Block {
    __m512 v[2];
    explicit Q8Block(const unsigned char* p) {
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18));
        v[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
        v[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
    }
};

// Partial blocks, in the scalar entry's order (see vec_math_avx2.cpp).
float dot_q8_part(const unsigned char* p, int64_t first, const float* y, int64_t len) {
    const auto* q = reinterpret_cast<const int8_t*>(p + 2) + first;
    float s = 0.0f;
    for (int64_t k = 0; k < len; ++k) s += static_cast<float>(q[k]) * y[k];
    return load_f16(p) * s;
}

void axpy_q8_part(const float* a, const unsigned char* rows, int64_t stride, int64_t n_rows,
                  int64_t first, float* y, int64_t len) {
    for (int64_t j = 0; j < n_rows; ++j) {
        const unsigned char* p = rows + j * stride;
        const auto* q = reinterpret_cast<const int8_t*>(p + 2) + first;
        const float w = a[j] * load_f16(p);
        for (int64_t k = 0; k < len; ++k) y[k] += w * static_cast<float>(q[k]);
    }
}

inline int64_t q8_lead(int64_t first, int64_t n) {
    const int64_t to_boundary = (kQ8Block - first % kQ8Block) % kQ8Block;
    return to_boundary < n ? to_boundary : n;
}

float dot_q8_0_avx512(const void* q8, int64_t first, const float* y, int64_t n) {
    const auto* base = static_cast<const unsigned char*>(q8);
    const auto block_at = [&](int64_t i) { return base + (first + i) / kQ8Block * kQ8Bytes; };
    int64_t i = q8_lead(first, n);
    float sum = i > 0 ? dot_q8_part(block_at(0), first % kQ8Block, y, i) : 0.0f;
    __m512 acc = _mm512_setzero_ps();
    for (; i + kQ8Block <= n; i += kQ8Block) {
        const unsigned char* p = block_at(i);
        const Q8Block q(p);
        const __m512 s = _mm512_fmadd_ps(q.v[1], _mm512_loadu_ps(y + i + 16),
                                         _mm512_mul_ps(q.v[0], _mm512_loadu_ps(y + i)));
        acc = _mm512_fmadd_ps(s, _mm512_set1_ps(load_f16(p)), acc);
    }
    sum += _mm512_reduce_add_ps(acc);
    if (i < n) sum += dot_q8_part(block_at(i), 0, y + i, n - i);
    return sum;
}

// Whole blocks two at a time (four accumulators held across all rows),
// then one; partial blocks at either end column by column.
void axpy_q8_0_avx512(const float* a, const void* rows, int64_t stride, int64_t n_rows,
                      int64_t first, float* y, int64_t n) {
    const auto* base = static_cast<const unsigned char*>(rows);
    const auto block_at = [&](int64_t i) { return base + (first + i) / kQ8Block * kQ8Bytes; };
    int64_t i = q8_lead(first, n);
    if (i > 0) axpy_q8_part(a, block_at(0), stride, n_rows, first % kQ8Block, y, i);
    for (; i + 2 * kQ8Block <= n; i += 2 * kQ8Block) {
        __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
        __m512 y2 = _mm512_loadu_ps(y + i + 32), y3 = _mm512_loadu_ps(y + i + 48);
        const unsigned char* r = block_at(i);
        for (int64_t j = 0; j < n_rows; ++j, r += stride) {
            const Q8Block q0(r), q1(r + kQ8Bytes);
            const __m512 w0 = _mm512_set1_ps(a[j] * load_f16(r));
            const __m512 w1 = _mm512_set1_ps(a[j] * load_f16(r + kQ8Bytes));
            y0 = _mm512_add_ps(y0, _mm512_mul_ps(w0, q0.v[0]));
            y1 = _mm512_add_ps(y1, _mm512_mul_ps(w0, q0.v[1]));
            y2 = _mm512_add_ps(y2, _mm512_mul_ps(w1, q1.v[0]));
            y3 = _mm512_add_ps(y3, _mm512_mul_ps(w1, q1.v[1]));
        }
        _mm512_storeu_ps(y + i, y0);
        _mm512_storeu_ps(y + i + 16, y1);
        _mm512_storeu_ps(y + i + 32, y2);
        _mm512_storeu_ps(y + i + 48, y3);
    }
    for (; i + kQ8Block <= n; i += kQ8Block) {
        __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16);
        const unsigned char* r = block_at(i);
        for (int64_t j = 0; j < n_rows; ++j, r += stride) {
            const Q8Block q(r);
            const __m512 w = _mm512_set1_ps(a[j] * load_f16(r));
            y0 = _mm512_add_ps(y0, _mm512_mul_ps(w, q.v[0]));
            y1 = _mm512_add_ps(y1, _mm512_mul_ps(w, q.v[1]));
        }
        _mm512_storeu_ps(y + i, y0);
        _mm512_storeu_ps(y + i + 16, y1);
    }
    if (i < n) axpy_q8_part(a, block_at(i), stride, n_rows, 0, y + i, n - i);
}

void scale_avx512(const float* x, float s, float* y, int64_t n) {
    const __m512 vs = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs));
    }
}

double sum_squares_avx512(const float* x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 v0 = _mm512_loadu_ps(x + i);
        const __m512 v1 = _mm512_loadu_ps(x + i + 16);
        a0 = add_widened(a0, _mm512_mul_ps(v0, v0));
        a1 = add_widened(a1, _mm512_mul_ps(v1, v1));
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        a0 = add_widened(a0, _mm512_mul_ps(v, v));
    }
    if (i < n) {
        const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        a1 = add_widened(a1, _mm512_mul_ps(v, v));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}

float max_avx512(const float* x, int64_t n) {
    __m512 m0 = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    if (i < n) m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(m0, tail_mask(n - i), x + i));
    return _mm512_reduce_max_ps(m0);
}

double exp_sum_avx512(const float* x, float shift, float* y, int64_t n) {
    const __m512 vs = _mm512_set1_ps(shift);
    __m512d acc = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vs));
        _mm512_storeu_ps(y + i, e);
        acc = add_widened(acc, e);
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        // Lanes past the end would hold exp(-shift), not 0: zero them.
        const __m512 e =
            _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vs)));
        _mm512_mask_storeu_ps(y + i, m, e);
        acc = add_widened(acc, e);
    }
    return _mm512_reduce_add_pd(acc);
}

void silu_avx512(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, silu16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, silu16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

void gelu_avx512(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, gelu16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(y + i, m, gelu16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

void swiglu_avx512(const float* gate, const float* up, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i,
                         _mm512_mul_ps(silu16(_mm512_loadu_ps(gate + i)), _mm512_loadu_ps(up + i)));
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_mul_ps(silu16(_mm512_maskz_loadu_ps(m, gate + i)),
                                       _mm512_maskz_loadu_ps(m, up + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

void add_avx512(const float* a, const float* b, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(
            y + i, m,
            _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
    }
}

void mul_avx512(const float* a, const float* b, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
    }
    if (i < n) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(
            y + i, m,
            _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
    }
}

}  // namespace

void fill_vec_kernels_avx512(VecKernels& k) {
    k.dot_f32 = dot_f32_avx512;
    k.dot_f16_f32 = dot_f16_avx512;
    k.axpy_f32 = axpy_f32_avx512;
    k.axpy_f16 = axpy_f16_avx512;
    k.dots_f16_f32 = dots_f16_avx512;
    k.axpy_f16_multi = axpy_f16_multi_avx512;
    k.dot_q8_0_f32 = dot_q8_0_avx512;
    k.dot_fp8_f32 = dot_fp8_avx512;
    k.axpy_q8_0 = axpy_q8_0_avx512;
    k.axpy_fp8 = axpy_fp8_avx512;
    k.scale = scale_avx512;
    k.sum_squares = sum_squares_avx512;
    k.max = max_avx512;
    k.exp_sum = exp_sum_avx512;
    k.silu = silu_avx512;
    k.gelu = gelu_avx512;
    k.swiglu = swiglu_avx512;
    k.add = add_avx512;
    k.mul = mul_avx512;
}

}  // namespace dwell::cpu

#endif  // __x86_64__
