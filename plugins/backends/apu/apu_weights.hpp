// Matmul weights as the APU network holds them, converted once when a
// weight is first used: any dtype with a reference decoder (quant.h) is
// dequantized row by row and stored as
//  - FLOAT32 (mode auto, F32 source: the host's bytes are used in place),
//  - FLOAT16 (mode auto for every other dtype, and mode fp16),
//  - symmetric per-channel int8 (mode int8): one f32 scale per output row,
//    scale = max|row| / 127, code = round(x / scale).
// Each carries a digest of its converted bytes, so a compiled network's
// cache token names the weights it baked in, not their address.
//
// Thread-safety: immutable once made. Ownership: a ConvertedWeight owns its
// converted bytes; a borrowed FLOAT32 weight points into host memory that
// stays valid until the host calls release_weights for it.
#pragma once

#include <dwell/tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dwell::apu {

enum class WeightMode { Auto, Fp16, Int8 };

const char* weight_mode_name(WeightMode mode);

struct ConvertedWeight {
    int32_t operand_type = 0;  // NEURON_TENSOR_FLOAT32 / FLOAT16 / QUANT8_SYMM_PER_CHANNEL
    uint32_t n = 0;            // output channels (rows)
    uint32_t k = 0;            // inputs per row
    const void* values = nullptr;
    size_t value_bytes = 0;
    std::vector<float> scales;  // per row, int8 only
    uint64_t digest = 0;
    bool borrowed = false;  // values point into host memory

    std::vector<uint8_t> owned;  // backs `values` unless borrowed
};

// Converts weight tensor `w` ([K, N], contiguous, a dtype with a decoder).
std::shared_ptr<const ConvertedWeight> convert_weight(const dwell_tensor& w, WeightMode mode);

}  // namespace dwell::apu
