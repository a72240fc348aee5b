// Reading rows of weight dtypes (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K and the dwell row formats I4_G, I6_G, I8_C) as f32.
//
// Scalar reference code: correctness and clarity first. dot_row hands F16,
// Q8_0 and Q4_0 to the run-time selected kernels of simd_dots.hpp, which
// match the scalar ones within float rounding.
//
// Thread-safety: pure functions. Ownership: callers own every buffer.
#pragma once

#include <cstdint>

#include "dwell/tensor.h"

namespace dwell::cpu {

// True for the dtypes a weight row may have.
bool is_weight_dtype(dwell_dtype t);

// Writes the n values of `row` (n a whole number of blocks; any n for the
// row formats) to out as f32.
void dequantize_row(dwell_dtype t, const void* row, float* out, int64_t n);

// sum_k row[k] * x[k] over n elements, accumulated in f32.
float dot_row(dwell_dtype t, const void* row, const float* x, int64_t n);

// The fp16 scale of a quantized block, read without assuming alignment.
inline float block_scale(const void* block) {
    uint16_t d;
    memcpy(&d, block, sizeof d);
    return dwell_fp16_to_fp32(d);
}

}  // namespace dwell::cpu
