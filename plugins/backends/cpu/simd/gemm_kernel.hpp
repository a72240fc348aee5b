// Blocked integer matmul kernels: out[c][n] = W[n] . x[c] for a quantized
// weight W [k, N] and f32 activation rows x, the path MATMUL takes when a
// kernel exists for the weight dtype on this CPU (see gemm_kernel_for).
//
// A kernel owns two layouts:
//   - the weight layout: at first use the backend repacks W once into
//     blocks of `rows_per_block` rows (interleaved as the kernel likes;
//     the last block padded with zero rows), block b at b * block_bytes(k);
//   - the activation layout: each f32 row of k values is quantized to
//     act_row_bytes(k) bytes by quantize_act. The numbers must be those of
//     quantize_act_q8_0 / quantize_act_q8_K (activation_quant.hpp: Q8_0
//     d = amax / 127, q = round-half-even(x * (127 / amax)), as llama.cpp's
//     SIMD quantizers), so dwell's results stay those of a llama.cpp-style
//     integer dot; the byte layout is the kernel's own.
// tile() then computes up to rows_per_block x max_cols outputs at once.
//
// Results contract (tests/plugins/backends/cpu/gemm_kernel_test.cpp):
//   - every output equals the scalar integer dot (integer_dot.hpp) of the
//     same weight row and quantized activation row within float summation
//     rounding;
//   - an output's bits do not depend on nr, nc or where its row and column
//     sit in the tile, so the result is independent of thread count and of
//     whether a prompt runs batched or token by token.
//
// Thread-safety: kernels are pure functions over caller-owned buffers; the
// tables are immutable after first use. Alignment: packed weights and
// activation rows are 64-byte aligned (act_row_bytes is a multiple of 64).
#pragma once

#include <cstddef>
#include <cstdint>

#include "dwell/tensor.h"
#include "simd/simd_dots.hpp"

namespace dwell::cpu {

struct GemmKernel {
    const char* name;    // e.g. "q4_0/avx512vnni", for logs and test names
    dwell_dtype weight;  // the weight dtype it serves
    int rows_per_block;  // R: weight rows per packed block
    int max_cols;        // C: activation rows per tile() call, at most
    int64_t k_multiple;  // k must be a multiple of this (the block size)

    // Bytes of one packed block of R rows of k values.
    size_t (*block_bytes)(int64_t k);
    // Packs rows [row0, row0 + nr) of W (rows of w_row_bytes bytes, in the
    // weight dtype's own layout, possibly unaligned) into one block at out;
    // rows nr..R-1 of the block are zero.
    void (*pack_block)(const void* w, size_t w_row_bytes, int nr, int64_t k, void* out);

    // Bytes one quantized activation row takes (a multiple of 64).
    size_t (*act_row_bytes)(int64_t k);
    void (*quantize_act)(const float* x, int64_t k, void* out);

    // out[c * out_stride + r] = dot(row r of the block, activation row c)
    // for r < nr <= R and c < nc <= C. Activation row c starts at
    // acts + c * act_stride.
    void (*tile)(int64_t k, const void* block, int nr, const void* acts, size_t act_stride, int nc,
                 float* out, size_t out_stride);
};

// The kernel for weight dtype t at SIMD level `level`, or nullptr when that
// dtype has no blocked kernel there (the row-dot path then runs).
const GemmKernel* gemm_kernel_for(dwell_dtype t, SimdLevel level);

// gemm_kernel_for(t, dot_kernels().level), honouring DWELL_CPU_SIMD.
const GemmKernel* gemm_kernel(dwell_dtype t);

// The portable kernels (gemm_kernel_scalar.cpp): the reference layouts,
// used where no SIMD kernel exists and as the test oracle's twin.
const GemmKernel* gemm_kernel_scalar(dwell_dtype t);

#if defined(__x86_64__)
const GemmKernel* gemm_kernel_avx2(dwell_dtype t);    // gemm_kernel_avx2.cpp
const GemmKernel* gemm_kernel_avx512(dwell_dtype t);  // gemm_kernel_avx512.cpp (VNNI)
#endif
#if defined(__aarch64__)
const GemmKernel* gemm_kernel_neon_dotprod(dwell_dtype t);  // gemm_kernel_neon.cpp
const GemmKernel* gemm_kernel_neon_i8mm(dwell_dtype t);     // gemm_kernel_neon_i8mm.cpp
#endif

}  // namespace dwell::cpu
