// AVX2 + FMA + F16C vector math (see vec_math.hpp for the contract). This
// file alone is compiled with -mavx2 -mfma -mf16c -ffp-contract=off: the
// entries promised bit-identical to the scalar ones must not fuse. It
// avoids inline functions and templates from shared headers, whose
// out-of-line copies compiled with these flags could be the ones the linker
// keeps for baseline code.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "dwell/tensor.h"
#include "simd/vec_math.hpp"
#include "simd/vec_math_exp.hpp"

namespace dwell::cpu {

namespace {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline double hsum_pd(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}

// The eight floats of v widened to double and added to acc.
inline __m256d add_widened(__m256d acc, __m256 v) {
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

inline __m256 load_f16x8(const unsigned char* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline float load_f16(const unsigned char* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// Tails: the last n % 8 values go through a zero-padded buffer, so every
// value takes the same vector path (the same expf) whatever its index.
struct Tail {
    float v[8];
    Tail(const float* x, int64_t m) {
        std::memset(v, 0, sizeof v);
        std::memcpy(v, x, static_cast<size_t>(m) * sizeof(float));
    }
    __m256 load() const { return _mm256_loadu_ps(v); }
};

inline void store_partial(float* y, __m256 v, int64_t m) {
    float buf[8];
    _mm256_storeu_ps(buf, v);
    std::memcpy(y, buf, static_cast<size_t>(m) * sizeof(float));
}

// exp of each lane; see vec_math_exp.hpp for the steps and the error bound.
inline __m256 exp8(__m256 x) {
    using namespace vexp;
    // min/max return their second operand when either is NaN: NaN passes.
    x = _mm256_max_ps(_mm256_set1_ps(kExpMin), _mm256_min_ps(_mm256_set1_ps(kExpMax), x));
    const __m256 kf = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(kLn2Hi), x);
    r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(kLn2Lo), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kC7), r, _mm256_set1_ps(kC6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC2));
    const __m256 e =
        _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    const __m256i k = _mm256_cvtps_epi32(kf);
    const __m256i k1 = _mm256_srai_epi32(k, 1);
    const __m256i k2 = _mm256_sub_epi32(k, k1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(e, f1), f2);
}

inline __m256 silu8(__m256 x) {
    const __m256 neg = _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(neg)));
}

// x / (1 + exp(-2u)), u = sqrt(2/pi) x (1 + 0.044715 x^2), as gelu_scalar
// (a multiply then an add each, never fused).
inline __m256 gelu8(__m256 x) {
    const __m256 x2 = _mm256_mul_ps(x, x);
    const __m256 inner =
        _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(_mm256_set1_ps(kGeluCoef), x2));
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(kGeluSqrt2OverPi), x), inner);
    const __m256 t = _mm256_mul_ps(_mm256_set1_ps(-2.0f), u);
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(t)));
}

float dot_f32_avx2(const float* x, const float* y, int64_t n) {
    // Four accumulators hide the FMA latency.
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    }
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; ++i) sum += x[i] * y[i];
    return sum;
}

float dot_f16_avx2(const void* x16, const float* y, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(x16);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load_f16x8(p + 2 * i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(load_f16x8(p + 2 * i + 16), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(load_f16x8(p + 2 * i + 32), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_f16x8(p + 2 * i + 48), _mm256_loadu_ps(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) {
        a0 = _mm256_fmadd_ps(load_f16x8(p + 2 * i), _mm256_loadu_ps(y + i), a0);
    }
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; ++i) sum += load_f16(p + 2 * i) * y[i];
    return sum;
}

inline __m256 load_f32x8(const unsigned char* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

inline float load_f32(const unsigned char* p) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Columns in blocks of 32 (four accumulators held across all rows), then of
// 8, then one at a time; every element still sees the rows in order.
template <__m256 (*Load8)(const unsigned char*), float (*Load1)(const unsigned char*), int Elem>
void axpy_rows_avx2(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                    int64_t n) {
    const auto* base = static_cast<const unsigned char*>(rows);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8);
        __m256 y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24);
        for (int64_t j = 0; j < n_rows; ++j) {
            const unsigned char* r = base + j * stride + Elem * i;
            const __m256 w = _mm256_set1_ps(a[j]);
            y0 = _mm256_add_ps(y0, _mm256_mul_ps(w, Load8(r)));
            y1 = _mm256_add_ps(y1, _mm256_mul_ps(w, Load8(r + 8 * Elem)));
            y2 = _mm256_add_ps(y2, _mm256_mul_ps(w, Load8(r + 16 * Elem)));
            y3 = _mm256_add_ps(y3, _mm256_mul_ps(w, Load8(r + 24 * Elem)));
        }
        _mm256_storeu_ps(y + i, y0);
        _mm256_storeu_ps(y + i + 8, y1);
        _mm256_storeu_ps(y + i + 16, y2);
        _mm256_storeu_ps(y + i + 24, y3);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 y0 = _mm256_loadu_ps(y + i);
        for (int64_t j = 0; j < n_rows; ++j) {
            const __m256 x = Load8(base + j * stride + Elem * i);
            y0 = _mm256_add_ps(y0, _mm256_mul_ps(_mm256_set1_ps(a[j]), x));
        }
        _mm256_storeu_ps(y + i, y0);
    }
    for (; i < n; ++i) {
        float s = y[i];
        for (int64_t j = 0; j < n_rows; ++j) s += a[j] * Load1(base + j * stride + Elem * i);
        y[i] = s;
    }
}

void axpy_f32_avx2(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                   int64_t n) {
    axpy_rows_avx2<load_f32x8, load_f32, 4>(a, rows, stride, n_rows, y, n);
}

void axpy_f16_avx2(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                   int64_t n) {
    axpy_rows_avx2<load_f16x8, load_f16, 2>(a, rows, stride, n_rows, y, n);
}

// E4M3 codes (zero-extended to 16 bits) as IEEE half bits of value / 256:
// the magnitude bits shifted left by 7 land the exponent (bias 7 against
// 15: the 2^-8) and the mantissa in place, and the subnormals line up as
// half subnormals. The two NaN codes get a NaN half.
inline __m128i fp8_half_bits(__m128i codes) {
    const __m128i t = _mm_slli_epi16(codes, 7);
    const __m128i h = _mm_add_epi16(t, _mm_and_si128(t, _mm_set1_epi16(0x4000)));  // sign 14 -> 15
    const __m128i mag = _mm_and_si128(t, _mm_set1_epi16(0x3f80));
    const __m128i nan = _mm_cmpeq_epi16(mag, _mm_set1_epi16(0x3f80));
    return _mm_or_si128(h, _mm_and_si128(nan, _mm_set1_epi16(0x7c00)));
}

// F16C widens exactly and the power-of-two scale is exact, so this is the
// code's value bit for bit.
inline __m256 load_fp8x8(const unsigned char* p) {
    const __m128i codes = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_mul_ps(_mm256_cvtph_ps(fp8_half_bits(codes)), _mm256_set1_ps(256.0f));
}

inline float load_fp8(const unsigned char* p) {
    const __m128 h = _mm_cvtph_ps(fp8_half_bits(_mm_cvtsi32_si128(*p)));
    return _mm_cvtss_f32(_mm_mul_ss(h, _mm_set1_ps(256.0f)));
}

float dot_fp8_avx2(const void* x8, const float* y, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(x8);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(load_fp8x8(p + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(load_fp8x8(p + i + 8), _mm256_loadu_ps(y + i + 8), a1);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_fp8x8(p + i), _mm256_loadu_ps(y + i), a0);
    float sum = hsum(_mm256_add_ps(a0, a1));
    for (; i < n; ++i) sum += load_fp8(p + i) * y[i];
    return sum;
}

void axpy_fp8_avx2(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                   int64_t n) {
    axpy_rows_avx2<load_fp8x8, load_fp8, 1>(a, rows, stride, n_rows, y, n);
}

constexpr int64_t kQ8Block = DWELL_QK8_0;
constexpr int64_t kQ8Bytes = sizeof(dwell_block_q8_0);

inline __m256 i8x8_to_ps(__m128i v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
}

// The 32 values of the block at p, eight per vector.
struct Q8Block {
    __m256 v[4];
    explicit Q8Block(const unsigned char* p) {
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18));
        v[0] = i8x8_to_ps(lo);
        v[1] = i8x8_to_ps(_mm_unpackhi_epi64(lo, lo));
        v[2] = i8x8_to_ps(hi);
        v[3] = i8x8_to_ps(_mm_unpackhi_epi64(hi, hi));
    }
};

// Values [first, first + len) of the single block at p, len < 32: the parts
// of a slice that do not cover a whole block, in the scalar entry's order.
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

// Leading values up to the first block boundary (at most n).
inline int64_t q8_lead(int64_t first, int64_t n) {
    const int64_t to_boundary = (kQ8Block - first % kQ8Block) % kQ8Block;
    return to_boundary < n ? to_boundary : n;
}

float dot_q8_0_avx2(const void* q8, int64_t first, const float* y, int64_t n) {
    const auto* base = static_cast<const unsigned char*>(q8);
    const auto block_at = [&](int64_t i) { return base + (first + i) / kQ8Block * kQ8Bytes; };
    int64_t i = q8_lead(first, n);
    float sum = i > 0 ? dot_q8_part(block_at(0), first % kQ8Block, y, i) : 0.0f;
    // Two partial sums per block shorten its dependency chain.
    __m256 acc = _mm256_setzero_ps();
    for (; i + kQ8Block <= n; i += kQ8Block) {
        const unsigned char* p = block_at(i);
        const Q8Block q(p);
        __m256 s0 = _mm256_mul_ps(q.v[0], _mm256_loadu_ps(y + i));
        __m256 s1 = _mm256_mul_ps(q.v[1], _mm256_loadu_ps(y + i + 8));
        s0 = _mm256_fmadd_ps(q.v[2], _mm256_loadu_ps(y + i + 16), s0);
        s1 = _mm256_fmadd_ps(q.v[3], _mm256_loadu_ps(y + i + 24), s1);
        acc = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), _mm256_set1_ps(load_f16(p)), acc);
    }
    sum += hsum(acc);
    if (i < n) sum += dot_q8_part(block_at(i), 0, y + i, n - i);
    return sum;
}

// Whole blocks two at a time (eight accumulators held across all rows),
// then one; partial blocks at either end column by column. Every value
// still sees the rows in order, one multiply and one add each.
void axpy_q8_0_avx2(const float* a, const void* rows, int64_t stride, int64_t n_rows, int64_t first,
                    float* y, int64_t n) {
    const auto* base = static_cast<const unsigned char*>(rows);
    const auto block_at = [&](int64_t i) { return base + (first + i) / kQ8Block * kQ8Bytes; };
    int64_t i = q8_lead(first, n);
    if (i > 0) axpy_q8_part(a, block_at(0), stride, n_rows, first % kQ8Block, y, i);
    for (; i + 2 * kQ8Block <= n; i += 2 * kQ8Block) {
        __m256 acc[8];
        for (int k = 0; k < 8; ++k) acc[k] = _mm256_loadu_ps(y + i + 8 * k);
        const unsigned char* r = block_at(i);
        for (int64_t j = 0; j < n_rows; ++j, r += stride) {
            const Q8Block q0(r), q1(r + kQ8Bytes);
            const __m256 w0 = _mm256_set1_ps(a[j] * load_f16(r));
            const __m256 w1 = _mm256_set1_ps(a[j] * load_f16(r + kQ8Bytes));
            for (int k = 0; k < 4; ++k) {
                acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(w0, q0.v[k]));
                acc[k + 4] = _mm256_add_ps(acc[k + 4], _mm256_mul_ps(w1, q1.v[k]));
            }
        }
        for (int k = 0; k < 8; ++k) _mm256_storeu_ps(y + i + 8 * k, acc[k]);
    }
    for (; i + kQ8Block <= n; i += kQ8Block) {
        __m256 acc[4];
        for (int k = 0; k < 4; ++k) acc[k] = _mm256_loadu_ps(y + i + 8 * k);
        const unsigned char* r = block_at(i);
        for (int64_t j = 0; j < n_rows; ++j, r += stride) {
            const Q8Block q(r);
            const __m256 w = _mm256_set1_ps(a[j] * load_f16(r));
            for (int k = 0; k < 4; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(w, q.v[k]));
        }
        for (int k = 0; k < 4; ++k) _mm256_storeu_ps(y + i + 8 * k, acc[k]);
    }
    if (i < n) axpy_q8_part(a, block_at(i), stride, n_rows, 0, y + i, n - i);
}

inline __m256 round_f16x8(__m256 x) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

void round_f16_avx2(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, round_f16x8(_mm256_loadu_ps(x + i)));
    if (i < n) store_partial(y + i, round_f16x8(Tail(x + i, n - i).load()), n - i);
}

void scale_avx2(const float* x, float s, float* y, int64_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; ++i) y[i] = x[i] * s;
}

double sum_squares_avx2(const float* x, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 v0 = _mm256_loadu_ps(x + i);
        const __m256 v1 = _mm256_loadu_ps(x + i + 8);
        a0 = add_widened(a0, _mm256_mul_ps(v0, v0));
        a1 = add_widened(a1, _mm256_mul_ps(v1, v1));
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        a0 = add_widened(a0, _mm256_mul_ps(v, v));
    }
    double sum = hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    return sum;
}

float max_avx2(const float* x, int64_t n) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
        m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
    }
    for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m0 = _mm256_max_ps(m0, m1);
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    float m = _mm_cvtss_f32(s);
    for (; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
}

double exp_sum_avx2(const float* x, float shift, float* y, int64_t n) {
    const __m256 vs = _mm256_set1_ps(shift);
    __m256d acc = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
        _mm256_storeu_ps(y + i, e);
        acc = add_widened(acc, e);
    }
    double sum = hsum_pd(acc);
    if (i < n) {
        float e[8];
        _mm256_storeu_ps(e, exp8(_mm256_sub_ps(Tail(x + i, n - i).load(), vs)));
        for (int64_t j = 0; j < n - i; ++j) {
            y[i + j] = e[j];
            sum += e[j];
        }
    }
    return sum;
}

void silu_avx2(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    if (i < n) store_partial(y + i, silu8(Tail(x + i, n - i).load()), n - i);
}

void gelu_avx2(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
    if (i < n) store_partial(y + i, gelu8(Tail(x + i, n - i).load()), n - i);
}

void swiglu_avx2(const float* gate, const float* up, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i,
                         _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
    }
    if (i < n) {
        const __m256 g = silu8(Tail(gate + i, n - i).load());
        store_partial(y + i, _mm256_mul_ps(g, Tail(up + i, n - i).load()), n - i);
    }
}

void add_avx2(const float* a, const float* b, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    }
    for (; i < n; ++i) y[i] = a[i] + b[i];
}

void mul_avx2(const float* a, const float* b, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    }
    for (; i < n; ++i) y[i] = a[i] * b[i];
}

void rope_norm_avx2(const float* x, const float* cos, const float* sin, float* y, int64_t n_pairs) {
    int64_t i = 0;
    for (; i + 4 <= n_pairs; i += 4) {
        // Each cos/sin serves both lanes of its pair; addsub subtracts in
        // the even lanes and adds in the odd ones, which is the rotation.
        const __m128 c = _mm_loadu_ps(cos + i);
        const __m128 s = _mm_loadu_ps(sin + i);
        const __m256 cc = _mm256_set_m128(_mm_unpackhi_ps(c, c), _mm_unpacklo_ps(c, c));
        const __m256 ss = _mm256_set_m128(_mm_unpackhi_ps(s, s), _mm_unpacklo_ps(s, s));
        const __m256 v = _mm256_loadu_ps(x + 2 * i);
        const __m256 swapped = _mm256_permute_ps(v, 0xB1);
        _mm256_storeu_ps(y + 2 * i,
                         _mm256_addsub_ps(_mm256_mul_ps(v, cc), _mm256_mul_ps(swapped, ss)));
    }
    for (; i < n_pairs; ++i) {
        const float x0 = x[2 * i];
        const float x1 = x[2 * i + 1];
        y[2 * i] = x0 * cos[i] - x1 * sin[i];
        y[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
}

void rope_neox_avx2(const float* x, const float* cos, const float* sin, float* y, int64_t n_pairs) {
    int64_t i = 0;
    for (; i + 8 <= n_pairs; i += 8) {
        const __m256 c = _mm256_loadu_ps(cos + i);
        const __m256 s = _mm256_loadu_ps(sin + i);
        const __m256 x0 = _mm256_loadu_ps(x + i);
        const __m256 x1 = _mm256_loadu_ps(x + i + n_pairs);
        _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
        _mm256_storeu_ps(y + i + n_pairs,
                         _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
    }
    for (; i < n_pairs; ++i) {
        const float x0 = x[i];
        const float x1 = x[i + n_pairs];
        y[i] = x0 * cos[i] - x1 * sin[i];
        y[i + n_pairs] = x0 * sin[i] + x1 * cos[i];
    }
}

}  // namespace

void fill_vec_kernels_avx2(VecKernels& k) {
    k.dot_f32 = dot_f32_avx2;
    k.dot_f16_f32 = dot_f16_avx2;
    k.axpy_f32 = axpy_f32_avx2;
    k.axpy_f16 = axpy_f16_avx2;
    k.dots_f16_f32 = dots_by_rows<dot_f16_avx2>;
    k.axpy_f16_multi = axpy_multi_by_rows<axpy_f16_avx2>;
    k.dot_q8_0_f32 = dot_q8_0_avx2;
    k.dot_fp8_f32 = dot_fp8_avx2;
    k.axpy_q8_0 = axpy_q8_0_avx2;
    k.axpy_fp8 = axpy_fp8_avx2;
    k.round_f16 = round_f16_avx2;
    k.scale = scale_avx2;
    k.sum_squares = sum_squares_avx2;
    k.max = max_avx2;
    k.exp_sum = exp_sum_avx2;
    k.silu = silu_avx2;
    k.gelu = gelu_avx2;
    k.swiglu = swiglu_avx2;
    k.add = add_avx2;
    k.mul = mul_avx2;
    k.rope_norm = rope_norm_avx2;
    k.rope_neox = rope_neox_avx2;
}

}  // namespace dwell::cpu

#endif  // __x86_64__
