// Writing f32 rows into storage dtypes: F32, F16, BF16, Q8_0, Q4_0, the
// dwell row formats (I4_G, I6_G, I8_C) and the KV-cache formats. The Q8_0
// and Q4_0 quantizers follow ggml's reference quantizers so that files and
// caches we write round exactly as llama.cpp's do; the row formats use the
// SDK's reference encoders, which define them.
//
// Thread-safety: pure functions. Ownership: callers own every buffer.
#pragma once

#include <cstdint>

#include "dwell/tensor.h"

namespace dwell::cpu {

// Round to nearest even; NaN stays a (quiet) NaN.
uint16_t fp32_to_bf16(float f);

// Q8_0: d = amax / 127, q = round(x / d) (computed as x * (1 / d)).
void quantize_row_q8_0(const float* x, void* out, int64_t n);

// Q4_0: d = m / -8 where m is the value of largest magnitude (with its sign),
// q = min(15, trunc(x / d + 8.5)).
void quantize_row_q4_0(const float* x, void* out, int64_t n);

// True for the dtypes CPY can write: store_row's, except FP8_E4M3, which
// only the KV cache holds (the SDK has no FP8 row encoder for CPY to match).
bool is_storable_dtype(dwell_dtype t);

// Stores n f32 values as one row of dtype t (n a whole number of blocks; any
// n for the row formats). FP8_E4M3 rounds with dwell_fp32_to_fp8_e4m3.
void store_row(dwell_dtype t, const float* x, void* out, int64_t n);

}  // namespace dwell::cpu
