// NEON (AArch64 Advanced SIMD) vector math, see vec_math.hpp for the
// contract. Compiled only on aarch64, with -ffp-contract=off so the entries
// promised bit-identical to the scalar ones do not fuse. The expf runs the
// same operations as the x86 ones (vec_math_exp.hpp), so all levels round
// identically. Like the x86 files, it avoids inline functions and templates
// from shared headers.
#if defined(__aarch64__)

#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "dwell/tensor.h"
#include "simd/vec_math.hpp"
#include "simd/vec_math_exp.hpp"

namespace dwell::cpu {

namespace {

// Byte loads: f16 rows sit at any offset.
inline float32x4_t load_f16x4(const unsigned char* p) {
    return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p)));
}

inline float load_f16(const unsigned char* p) {
    uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

inline float64x2_t add_widened(float64x2_t acc, float32x4_t v) {
    acc = vaddq_f64(acc, vcvt_f64_f32(vget_low_f32(v)));
    return vaddq_f64(acc, vcvt_high_f64_f32(v));
}

// The last n % 4 values go through a zero-padded buffer, so every value
// takes the same vector path (the same expf) whatever its index.
struct Tail {
    float v[4];
    Tail(const float* x, int64_t m) {
        std::memset(v, 0, sizeof v);
        std::memcpy(v, x, static_cast<size_t>(m) * sizeof(float));
    }
    float32x4_t load() const { return vld1q_f32(v); }
};

inline void store_partial(float* y, float32x4_t v, int64_t m) {
    float buf[4];
    vst1q_f32(buf, v);
    std::memcpy(y, buf, static_cast<size_t>(m) * sizeof(float));
}

// exp of each lane; see vec_math_exp.hpp. vminq/vmaxq return NaN when
// either operand is NaN, so NaN passes the clamp.
inline float32x4_t exp4(float32x4_t x) {
    using namespace vexp;
    x = vmaxq_f32(vdupq_n_f32(kExpMin), vminq_f32(vdupq_n_f32(kExpMax), x));
    const float32x4_t kf = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(kLog2e)));
    float32x4_t r = vfmsq_f32(x, kf, vdupq_n_f32(kLn2Hi));
    r = vfmsq_f32(r, kf, vdupq_n_f32(kLn2Lo));
    float32x4_t p = vfmaq_f32(vdupq_n_f32(kC6), vdupq_n_f32(kC7), r);
    p = vfmaq_f32(vdupq_n_f32(kC5), p, r);
    p = vfmaq_f32(vdupq_n_f32(kC4), p, r);
    p = vfmaq_f32(vdupq_n_f32(kC3), p, r);
    p = vfmaq_f32(vdupq_n_f32(kC2), p, r);
    const float32x4_t e = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.0f));
    const int32x4_t k = vcvtq_s32_f32(kf);
    const int32x4_t k1 = vshrq_n_s32(k, 1);
    const int32x4_t k2 = vsubq_s32(k, k1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t f1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, bias), 23));
    const float32x4_t f2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, bias), 23));
    return vmulq_f32(vmulq_f32(e, f1), f2);
}

inline float32x4_t silu4(float32x4_t x) {
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), exp4(vnegq_f32(x))));
}

// As gelu_scalar (a multiply then an add each, never fused).
inline float32x4_t gelu4(float32x4_t x) {
    const float32x4_t x2 = vmulq_f32(x, x);
    const float32x4_t inner = vaddq_f32(vdupq_n_f32(1.0f), vmulq_f32(vdupq_n_f32(kGeluCoef), x2));
    const float32x4_t u = vmulq_f32(vmulq_f32(vdupq_n_f32(kGeluSqrt2OverPi), x), inner);
    const float32x4_t t = vmulq_f32(vdupq_n_f32(-2.0f), u);
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), exp4(t)));
}

float dot_f32_neon(const float* x, const float* y, int64_t n) {
    // Four accumulators hide the FMA latency.
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; ++i) sum += x[i] * y[i];
    return sum;
}

float dot_f16_neon(const void* x16, const float* y, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(x16);
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, load_f16x4(p + 2 * i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, load_f16x4(p + 2 * i + 8), vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, load_f16x4(p + 2 * i + 16), vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, load_f16x4(p + 2 * i + 24), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, load_f16x4(p + 2 * i), vld1q_f32(y + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; ++i) sum += load_f16(p + 2 * i) * y[i];
    return sum;
}

inline float32x4_t load_f32x4(const unsigned char* p) {
    return vld1q_f32(reinterpret_cast<const float*>(p));
}

inline float load_f32(const unsigned char* p) {
    float v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Columns in blocks of 16 (four accumulators held across all rows), then of
// 4, then one at a time; every element still sees the rows in order.
template <float32x4_t (*Load4)(const unsigned char*), float (*Load1)(const unsigned char*),
          int Elem>
void axpy_rows_neon(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                    int64_t n) {
    const auto* base = static_cast<const unsigned char*>(rows);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t y0 = vld1q_f32(y + i), y1 = vld1q_f32(y + i + 4);
        float32x4_t y2 = vld1q_f32(y + i + 8), y3 = vld1q_f32(y + i + 12);
        for (int64_t j = 0; j < n_rows; ++j) {
            const unsigned char* r = base + j * stride + Elem * i;
            y0 = vaddq_f32(y0, vmulq_n_f32(Load4(r), a[j]));
            y1 = vaddq_f32(y1, vmulq_n_f32(Load4(r + 4 * Elem), a[j]));
            y2 = vaddq_f32(y2, vmulq_n_f32(Load4(r + 8 * Elem), a[j]));
            y3 = vaddq_f32(y3, vmulq_n_f32(Load4(r + 12 * Elem), a[j]));
        }
        vst1q_f32(y + i, y0);
        vst1q_f32(y + i + 4, y1);
        vst1q_f32(y + i + 8, y2);
        vst1q_f32(y + i + 12, y3);
    }
    for (; i + 4 <= n; i += 4) {
        float32x4_t y0 = vld1q_f32(y + i);
        for (int64_t j = 0; j < n_rows; ++j) {
            y0 = vaddq_f32(y0, vmulq_n_f32(Load4(base + j * stride + Elem * i), a[j]));
        }
        vst1q_f32(y + i, y0);
    }
    for (; i < n; ++i) {
        float s = y[i];
        for (int64_t j = 0; j < n_rows; ++j) s += a[j] * Load1(base + j * stride + Elem * i);
        y[i] = s;
    }
}

void axpy_f32_neon(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                   int64_t n) {
    axpy_rows_neon<load_f32x4, load_f32, 4>(a, rows, stride, n_rows, y, n);
}

void axpy_f16_neon(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                   int64_t n) {
    axpy_rows_neon<load_f16x4, load_f16, 2>(a, rows, stride, n_rows, y, n);
}

// E4M3 codes (zero-extended to 16 bits) as IEEE half bits of value / 256;
// see vec_math_avx2.cpp.
inline uint16x8_t fp8_half_bits(uint16x8_t codes) {
    const uint16x8_t t = vshlq_n_u16(codes, 7);
    const uint16x8_t h = vaddq_u16(t, vandq_u16(t, vdupq_n_u16(0x4000)));  // sign 14 -> 15
    const uint16x8_t nan = vceqq_u16(vandq_u16(t, vdupq_n_u16(0x3f80)), vdupq_n_u16(0x3f80));
    return vorrq_u16(h, vandq_u16(nan, vdupq_n_u16(0x7c00)));
}

inline float32x4_t half_bits_x256(uint16x4_t h) {
    return vmulq_n_f32(vcvt_f32_f16(vreinterpret_f16_u16(h)), 256.0f);
}

// Four codes: the 4-wide loads of the row axpy.
inline float32x4_t load_fp8x4(const unsigned char* p) {
    uint32_t w;
    std::memcpy(&w, p, sizeof w);
    const uint16x8_t h = fp8_half_bits(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(w))));
    return half_bits_x256(vget_low_u16(h));
}

inline float load_fp8(const unsigned char* p) {
    const uint16x8_t h = fp8_half_bits(vdupq_n_u16(*p));
    return vgetq_lane_f32(half_bits_x256(vget_low_u16(h)), 0);
}

float dot_fp8_neon(const void* x8, const float* y, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(x8);
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const uint8x16_t codes = vld1q_u8(p + i);
        const uint16x8_t lo = fp8_half_bits(vmovl_u8(vget_low_u8(codes)));
        const uint16x8_t hi = fp8_half_bits(vmovl_high_u8(codes));
        a0 = vfmaq_f32(a0, half_bits_x256(vget_low_u16(lo)), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, half_bits_x256(vget_high_u16(lo)), vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, half_bits_x256(vget_low_u16(hi)), vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, half_bits_x256(vget_high_u16(hi)), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, load_fp8x4(p + i), vld1q_f32(y + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; ++i) sum += load_fp8(p + i) * y[i];
    return sum;
}

void axpy_fp8_neon(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                   int64_t n) {
    axpy_rows_neon<load_fp8x4, load_fp8, 1>(a, rows, stride, n_rows, y, n);
}

constexpr int64_t kQ8Block = DWELL_QK8_0;
constexpr int64_t kQ8Bytes = sizeof(dwell_block_q8_0);

// The 32 values of the block at p, four per vector.
struct Q8Block {
    float32x4_t v[8];
    explicit Q8Block(const unsigned char* p) {
        const int8x16_t halves[2] = {vld1q_s8(reinterpret_cast<const int8_t*>(p + 2)),
                                     vld1q_s8(reinterpret_cast<const int8_t*>(p + 18))};
        for (int k = 0; k < 2; ++k) {
            const int16x8_t lo = vmovl_s8(vget_low_s8(halves[k]));
            const int16x8_t hi = vmovl_high_s8(halves[k]);
            v[4 * k] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
            v[4 * k + 1] = vcvtq_f32_s32(vmovl_high_s16(lo));
            v[4 * k + 2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
            v[4 * k + 3] = vcvtq_f32_s32(vmovl_high_s16(hi));
        }
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

float dot_q8_0_neon(const void* q8, int64_t first, const float* y, int64_t n) {
    const auto* base = static_cast<const unsigned char*>(q8);
    const auto block_at = [&](int64_t i) { return base + (first + i) / kQ8Block * kQ8Bytes; };
    int64_t i = q8_lead(first, n);
    float sum = i > 0 ? dot_q8_part(block_at(0), first % kQ8Block, y, i) : 0.0f;
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (; i + kQ8Block <= n; i += kQ8Block) {
        const unsigned char* p = block_at(i);
        const Q8Block q(p);
        float32x4_t s[4];
        for (int k = 0; k < 4; ++k) s[k] = vmulq_f32(q.v[k], vld1q_f32(y + i + 4 * k));
        for (int k = 0; k < 4; ++k)
            s[k] = vfmaq_f32(s[k], q.v[k + 4], vld1q_f32(y + i + 16 + 4 * k));
        acc =
            vfmaq_n_f32(acc, vaddq_f32(vaddq_f32(s[0], s[1]), vaddq_f32(s[2], s[3])), load_f16(p));
    }
    sum += vaddvq_f32(acc);
    if (i < n) sum += dot_q8_part(block_at(i), 0, y + i, n - i);
    return sum;
}

// Whole blocks one at a time (eight accumulators held across all rows);
// partial blocks at either end column by column.
void axpy_q8_0_neon(const float* a, const void* rows, int64_t stride, int64_t n_rows, int64_t first,
                    float* y, int64_t n) {
    const auto* base = static_cast<const unsigned char*>(rows);
    const auto block_at = [&](int64_t i) { return base + (first + i) / kQ8Block * kQ8Bytes; };
    int64_t i = q8_lead(first, n);
    if (i > 0) axpy_q8_part(a, block_at(0), stride, n_rows, first % kQ8Block, y, i);
    for (; i + kQ8Block <= n; i += kQ8Block) {
        float32x4_t acc[8];
        for (int k = 0; k < 8; ++k) acc[k] = vld1q_f32(y + i + 4 * k);
        const unsigned char* r = block_at(i);
        for (int64_t j = 0; j < n_rows; ++j, r += stride) {
            const Q8Block q(r);
            const float w = a[j] * load_f16(r);
            for (int k = 0; k < 8; ++k) acc[k] = vaddq_f32(acc[k], vmulq_n_f32(q.v[k], w));
        }
        for (int k = 0; k < 8; ++k) vst1q_f32(y + i + 4 * k, acc[k]);
    }
    if (i < n) axpy_q8_part(a, block_at(i), stride, n_rows, 0, y + i, n - i);
}

inline float32x4_t round_f16x4(float32x4_t x) {
    return vcvt_f32_f16(vcvt_f16_f32(x));
}

void round_f16_neon(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, round_f16x4(vld1q_f32(x + i)));
    if (i < n) store_partial(y + i, round_f16x4(Tail(x + i, n - i).load()), n - i);
}

void scale_neon(const float* x, float s, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), s));
    for (; i < n; ++i) y[i] = x[i] * s;
}

double sum_squares_neon(const float* x, int64_t n) {
    float64x2_t a0 = vdupq_n_f64(0.0), a1 = a0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t v0 = vld1q_f32(x + i);
        const float32x4_t v1 = vld1q_f32(x + i + 4);
        a0 = add_widened(a0, vmulq_f32(v0, v0));
        a1 = add_widened(a1, vmulq_f32(v1, v1));
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        a0 = add_widened(a0, vmulq_f32(v, v));
    }
    double sum = vaddvq_f64(vaddq_f64(a0, a1));
    for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    return sum;
}

float max_neon(const float* x, int64_t n) {
    float32x4_t m0 = vdupq_n_f32(-INFINITY), m1 = m0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        m0 = vmaxq_f32(m0, vld1q_f32(x + i));
        m1 = vmaxq_f32(m1, vld1q_f32(x + i + 4));
    }
    for (; i + 4 <= n; i += 4) m0 = vmaxq_f32(m0, vld1q_f32(x + i));
    float m = vmaxvq_f32(vmaxq_f32(m0, m1));
    for (; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
}

double exp_sum_neon(const float* x, float shift, float* y, int64_t n) {
    const float32x4_t vs = vdupq_n_f32(shift);
    float64x2_t acc = vdupq_n_f64(0.0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t e = exp4(vsubq_f32(vld1q_f32(x + i), vs));
        vst1q_f32(y + i, e);
        acc = add_widened(acc, e);
    }
    double sum = vaddvq_f64(acc);
    if (i < n) {
        float e[4];
        vst1q_f32(e, exp4(vsubq_f32(Tail(x + i, n - i).load(), vs)));
        for (int64_t j = 0; j < n - i; ++j) {
            y[i + j] = e[j];
            sum += e[j];
        }
    }
    return sum;
}

void silu_neon(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, silu4(vld1q_f32(x + i)));
    if (i < n) store_partial(y + i, silu4(Tail(x + i, n - i).load()), n - i);
}

void gelu_neon(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, gelu4(vld1q_f32(x + i)));
    if (i < n) store_partial(y + i, gelu4(Tail(x + i, n - i).load()), n - i);
}

void swiglu_neon(const float* gate, const float* up, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vst1q_f32(y + i, vmulq_f32(silu4(vld1q_f32(gate + i)), vld1q_f32(up + i)));
    }
    if (i < n) {
        const float32x4_t g = silu4(Tail(gate + i, n - i).load());
        store_partial(y + i, vmulq_f32(g, Tail(up + i, n - i).load()), n - i);
    }
}

void add_neon(const float* a, const float* b, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
    for (; i < n; ++i) y[i] = a[i] + b[i];
}

void mul_neon(const float* a, const float* b, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
    for (; i < n; ++i) y[i] = a[i] * b[i];
}

void rope_norm_neon(const float* x, const float* cos, const float* sin, float* y, int64_t n_pairs) {
    int64_t i = 0;
    for (; i + 4 <= n_pairs; i += 4) {
        // vld2 splits the pairs into their first and second elements.
        const float32x4x2_t v = vld2q_f32(x + 2 * i);
        const float32x4_t c = vld1q_f32(cos + i);
        const float32x4_t s = vld1q_f32(sin + i);
        float32x4x2_t out;
        out.val[0] = vsubq_f32(vmulq_f32(v.val[0], c), vmulq_f32(v.val[1], s));
        out.val[1] = vaddq_f32(vmulq_f32(v.val[0], s), vmulq_f32(v.val[1], c));
        vst2q_f32(y + 2 * i, out);
    }
    for (; i < n_pairs; ++i) {
        const float x0 = x[2 * i];
        const float x1 = x[2 * i + 1];
        y[2 * i] = x0 * cos[i] - x1 * sin[i];
        y[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
}

void rope_neox_neon(const float* x, const float* cos, const float* sin, float* y, int64_t n_pairs) {
    int64_t i = 0;
    for (; i + 4 <= n_pairs; i += 4) {
        const float32x4_t c = vld1q_f32(cos + i);
        const float32x4_t s = vld1q_f32(sin + i);
        const float32x4_t x0 = vld1q_f32(x + i);
        const float32x4_t x1 = vld1q_f32(x + i + n_pairs);
        vst1q_f32(y + i, vsubq_f32(vmulq_f32(x0, c), vmulq_f32(x1, s)));
        vst1q_f32(y + i + n_pairs, vaddq_f32(vmulq_f32(x0, s), vmulq_f32(x1, c)));
    }
    for (; i < n_pairs; ++i) {
        const float x0 = x[i];
        const float x1 = x[i + n_pairs];
        y[i] = x0 * cos[i] - x1 * sin[i];
        y[i + n_pairs] = x0 * sin[i] + x1 * cos[i];
    }
}

}  // namespace

void fill_vec_kernels_neon(VecKernels& k) {
    k.dot_f32 = dot_f32_neon;
    k.dot_f16_f32 = dot_f16_neon;
    k.axpy_f32 = axpy_f32_neon;
    k.axpy_f16 = axpy_f16_neon;
    k.dots_f16_f32 = dots_by_rows<dot_f16_neon>;
    k.axpy_f16_multi = axpy_multi_by_rows<axpy_f16_neon>;
    k.dot_q8_0_f32 = dot_q8_0_neon;
    k.dot_fp8_f32 = dot_fp8_neon;
    k.axpy_q8_0 = axpy_q8_0_neon;
    k.axpy_fp8 = axpy_fp8_neon;
    k.round_f16 = round_f16_neon;
    k.scale = scale_neon;
    k.sum_squares = sum_squares_neon;
    k.max = max_neon;
    k.exp_sum = exp_sum_neon;
    k.silu = silu_neon;
    k.gelu = gelu_neon;
    k.swiglu = swiglu_neon;
    k.add = add_neon;
    k.mul = mul_neon;
    k.rope_norm = rope_norm_neon;
    k.rope_neox = rope_neox_neon;
}

}  // namespace dwell::cpu

#endif  // __aarch64__
