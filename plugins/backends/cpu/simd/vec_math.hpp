// Vector math for the non-matmul ops (norms, RoPE, attention, softmax,
// activations, elementwise), chosen once per process like dot_kernels():
// scalar references in vec_math.cpp, SIMD versions in vec_math_avx2.cpp,
// vec_math_avx512.cpp (x86-64) and vec_math_neon.cpp (aarch64), each compiled
// with its own target flags and -ffp-contract=off.
//
// Results contract, per entry, relative to the scalar table:
//   - axpy_*, scale, add, mul, round_f16, rope_*: bit-identical (the same
//     single-rounded operations, only done several lanes at a time);
//   - dot_*: float products summed in another order (error bounded by
//     n * eps * sum |x*y|, as for any float dot);
//   - sum_squares, exp_sum's sum: float terms summed in double in another
//     order, so they agree to double rounding;
//   - max: exact (order does not matter), NaN aside;
//   - exp_sum's values, silu, swiglu, gelu: SIMD levels use their own expf, whose
//     error is at most 2 ulp (see vec_math_exp.hpp), where the scalar table
//     uses the C library's.
// All entries accept any n >= 0; f32 arrays need only 4-byte alignment and
// f16, fp8 and Q8_0 data none, since cache rows are read in place.
//
// Thread-safety: vec_kernels() initialises once and is immutable afterwards;
// every entry is a pure function of its arguments. Ownership: callers own
// every buffer.
#pragma once

#include <cstdint>

#include "simd/simd_dots.hpp"

namespace dwell::cpu {

// GELU's tanh approximation: sqrt(2/pi) and the cubic term's coefficient.
constexpr float kGeluSqrt2OverPi = 0.79788456080286535587989211986876f;
constexpr float kGeluCoef = 0.044715f;

// A plain aggregate without member initialisers, so the SIMD translation
// units that fill it emit no inline constructor compiled with their flags.
struct VecKernels {
    SimdLevel level;
    // sum x[i] * y[i].
    float (*dot_f32)(const float* x, const float* y, int64_t n);
    // sum f16(x16[i]) * y[i], x16 holding IEEE half bits.
    float (*dot_f16_f32)(const void* x16, const float* y, int64_t n);
    // y[i] += a[j] * row_j[i] for j = 0 .. n_rows-1 in order, a multiply
    // then an add each (never fused), row_j starting stride bytes after
    // row_{j-1}: one axpy per row, but with y held in registers across rows
    // (attention's weighted sum of value rows).
    void (*axpy_f32)(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                     int64_t n);
    void (*axpy_f16)(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                     int64_t n);
    // One page of keys against the query heads that share them (GQA):
    //   out[h * out_stride + j] = sum f16(row_j[i]) * q[h * q_stride + i]
    // for h < n_q and j < n_rows, each row read and widened once and the
    // sums reduced several rows at a time (dot_* contract per output).
    void (*dots_f16_f32)(const void* rows, int64_t stride, int64_t n_rows, const float* q,
                         int64_t q_stride, int64_t n_q, int64_t n, float* out, int64_t out_stride);
    // axpy_f16 for n_y weight vectors (a + h * a_stride) into n_y outputs
    // (y + h * y_stride) over the same rows, each row widened once;
    // bit-identical to n_y axpy_f16 calls.
    void (*axpy_f16_multi)(const float* a, int64_t a_stride, const void* rows, int64_t stride,
                           int64_t n_rows, float* y, int64_t y_stride, int64_t n_y, int64_t n);
    // The KV-cache formats read in place, a block or a code at a time.
    // Q8_0 entries take values first .. first + n - 1 of the block sequence
    // at q8 / at each row: a slice (an attention head) may start and end
    // inside a block. FP8 codes are E4M3 (dwell_fp8_e4m3_to_fp32, exact).
    //
    // sum over the blocks the slice touches of d * (sum q[i] * y[i]), the
    // inner sum in float.
    float (*dot_q8_0_f32)(const void* q8, int64_t first, const float* y, int64_t n);
    // sum fp8(x8[i]) * y[i].
    float (*dot_fp8_f32)(const void* x8, const float* y, int64_t n);
    // As axpy_f32, adding (a[j] * d) * q for each value q of row j, d its
    // block's scale: the weight meets the scale once per block, and the
    // value stays one multiply and one add.
    void (*axpy_q8_0)(const float* a, const void* rows, int64_t stride, int64_t n_rows,
                      int64_t first, float* y, int64_t n);
    void (*axpy_fp8)(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                     int64_t n);
    // y[i] = x[i] rounded to the nearest half (ties to even) and back; y may
    // be x.
    void (*round_f16)(const float* x, float* y, int64_t n);
    // y[i] = x[i] * s; y may be x.
    void (*scale)(const float* x, float s, float* y, int64_t n);
    // sum double(x[i] * x[i]), the squares rounded to float first as ggml's
    // RMS norm does.
    double (*sum_squares)(const float* x, int64_t n);
    // max x[i]; -inf when n == 0.
    float (*max)(const float* x, int64_t n);
    // y[i] = exp(x[i] - shift), returning sum double(y[i]); y may be x.
    double (*exp_sum)(const float* x, float shift, float* y, int64_t n);
    // y[i] = x[i] / (1 + exp(-x[i])); y may be x.
    void (*silu)(const float* x, float* y, int64_t n);
    // y[i] = silu(gate[i]) * up[i]; y may be gate or up.
    void (*swiglu)(const float* gate, const float* up, float* y, int64_t n);
    // GELU's tanh approximation, 0.5 x (1 + tanh(u)) with
    // u = sqrt(2/pi) (x + 0.044715 x^3), computed as x / (1 + exp(-2u)) (the
    // same function, without tanh's cancellation for negative x, and
    // through each level's own expf as silu); y may be x.
    void (*gelu)(const float* x, float* y, int64_t n);
    // y[i] = a[i] + b[i], y[i] = a[i] * b[i]; y may be a or b.
    void (*add)(const float* a, const float* b, float* y, int64_t n);
    void (*mul)(const float* a, const float* b, float* y, int64_t n);
    // Rotates pairs by angles with the given cosines and sines:
    //   (y0, y1) = (x0 * c - x1 * s, x0 * s + x1 * c),
    // pair i being (x[2i], x[2i+1]) for rope_norm and (x[i], x[i + n_pairs])
    // for rope_neox. y may be x.
    void (*rope_norm)(const float* x, const float* cos, const float* sin, float* y,
                      int64_t n_pairs);
    void (*rope_neox)(const float* x, const float* cos, const float* sin, float* y,
                      int64_t n_pairs);
};

// dots_f16_f32 and axpy_f16_multi built from a level's single-row entries,
// for levels without a version of their own.
template <float (*Dot)(const void*, const float*, int64_t)>
void dots_by_rows(const void* rows, int64_t stride, int64_t n_rows, const float* q,
                  int64_t q_stride, int64_t n_q, int64_t n, float* out, int64_t out_stride) {
    for (int64_t h = 0; h < n_q; ++h) {
        for (int64_t j = 0; j < n_rows; ++j) {
            out[h * out_stride + j] =
                Dot(static_cast<const unsigned char*>(rows) + j * stride, q + h * q_stride, n);
        }
    }
}

template <void (*Axpy)(const float*, const void*, int64_t, int64_t, float*, int64_t)>
void axpy_multi_by_rows(const float* a, int64_t a_stride, const void* rows, int64_t stride,
                        int64_t n_rows, float* y, int64_t y_stride, int64_t n_y, int64_t n) {
    for (int64_t h = 0; h < n_y; ++h)
        Axpy(a + h * a_stride, rows, stride, n_rows, y + h * y_stride, n);
}

// The table for a level, which must be supported by this CPU (levels without
// their own version of an entry use the next lower level's).
VecKernels vec_kernels_for(SimdLevel level);

// The process-wide table, at the level dot_kernels() picks (the same
// select_simd_level(getenv("DWELL_CPU_SIMD"), detect_cpu_features())).
const VecKernels& vec_kernels();

// y = softmax(x) over n values with the table's max, exp_sum and scale; x
// and y may be the same array. With the scalar table this rounds exactly as
// softmax_row in activation_math.hpp.
void softmax_row(const VecKernels& vk, const float* x, float* y, int64_t n);

// Fill in the entries a SIMD level provides (the table already holds the
// lower levels').
#if defined(__x86_64__)
void fill_vec_kernels_avx2(VecKernels& k);
void fill_vec_kernels_avx512(VecKernels& k);
#endif
#if defined(__aarch64__)
void fill_vec_kernels_neon(VecKernels& k);
#endif

}  // namespace dwell::cpu
