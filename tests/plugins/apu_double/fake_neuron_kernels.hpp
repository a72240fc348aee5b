// Reference kernels of the NeuronAdapter test double: straightforward
// loops with double accumulation, written from NNAPI's operation
// definitions, independent of the apu plugin's own code.
//
// Thread-safety: pure functions. Ownership: callers own every buffer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fake_neuron {

// IEEE half -> float (every finite half, infinities, NaN).
float half_to_float(uint16_t h);

// FULLY_CONNECTED: out[m][n] = sum_k x[m][k] * w[n][k] + bias[n].
void fully_connected(const float* x, const float* w, const float* bias, float* out, size_t m,
                     size_t n, size_t k);

// CAST TENSOR_FLOAT16 -> TENSOR_FLOAT32.
void cast_f16_to_f32(const uint16_t* in, float* out, size_t count);

// DEQUANTIZE of a [rows, cols] TENSOR_QUANT8_SYMM_PER_CHANNEL tensor:
// channel_dim 0 scales rows, 1 scales columns.
void dequantize_per_channel(const int8_t* in, const float* scales, uint32_t channel_dim, float* out,
                            size_t rows, size_t cols);

}  // namespace fake_neuron
