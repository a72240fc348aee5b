// Weights as the NNRt model stores them, converted once from a dwell weight
// tensor of any dtype with a reference decoder (sdk quant.h): float32 kept
// as is, fp16, or int8 symmetric per output channel (one scale per weight
// row, zero point 0, 8 bits) — what an NPU's FULL_CONNECTION takes.
//
// Thread-safety: a ConvertedWeight is immutable once made and may be shared.
// Ownership: it owns its bytes; the source tensor is only read.
#pragma once

#include <dwell/tensor.h>

#include <cstdint>
#include <vector>

#include "nnrt_api.hpp"

namespace dwell::nnrt {

struct ConvertedWeight {
    OH_NN_DataType type = OH_NN_FLOAT32;  // FLOAT32, FLOAT16 or INT8
    int32_t k = 0;                        // row length (input features)
    int32_t n = 0;                        // rows (output features)
    std::vector<uint8_t> data;            // n rows of k values of `type`, row-major
    std::vector<double> scales;           // INT8: one per row, value = q * scale
    uint64_t fingerprint = 0;             // of everything above, for on-disk cache keys
};

// Converts w ([k, n], contiguous, a dtype with a decoder) to `type`.
ConvertedWeight convert_weight(const dwell_tensor& w, OH_NN_DataType type);

// FNV-1a over bytes, chained from `seed`: the cache keys' fingerprint.
uint64_t fingerprint(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace dwell::nnrt
