// Whole-tensor quantization for `dwell convert`: f32 values to the bytes of
// any dtype with an SDK reference encoder (f32, f16, q8_0, q4_0, and the
// dwell row formats i4g128, i6g128, i8c), the reverse for any dtype with an
// SDK decoder, and the signal-to-noise ratio that says what was lost.
//
// Thread-safety: the functions are pure and may be called concurrently; each
// call may use up to std::thread::hardware_concurrency() threads of its own.
// Ownership: results are returned by value.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dwell/tensor.h"

namespace dwell {

// `rows` rows of `cols` values (values.size() == cols * rows, row-major) as
// rows * dwell_row_bytes(target, cols) bytes. Throws dwell::Error naming the
// dtype when it has no encoder or a row of `cols` values is not a whole
// number of its blocks.
std::vector<uint8_t> quantize_tensor(dwell_dtype target, std::span<const float> values,
                                     int64_t cols, int64_t rows);

// The reverse: bytes.size() must be rows * dwell_row_bytes(dtype, cols).
// Block formats need their blocks 2-byte aligned, which a vector's data is.
std::vector<float> dequantize_tensor(dwell_dtype dtype, std::span<const uint8_t> bytes,
                                     int64_t cols, int64_t rows);

// 10 * log10(sum x^2 / sum (x - x')^2) in dB: +inf when the reconstruction
// is exact, -inf when the original is all zeros and the reconstruction not.
// Throws dwell::Error when the sizes differ.
double quantization_snr_db(std::span<const float> original, std::span<const float> reconstructed);

}  // namespace dwell
