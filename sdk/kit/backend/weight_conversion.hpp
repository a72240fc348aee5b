// Dequantizing a weight matrix row by row for a backend that stores it in
// its own format (apu, nnrt): every dtype with a reference decoder (sdk
// quant.h) becomes f32 rows, and fp16 rows are encoded the same way for
// both. What each backend then does with the rows stays its own: the int8
// per-channel encodings differ on purpose (apu: f32 scales and round-half-
// away, as NeuronAdapter's f32 quant params; nnrt: f64 scales and round-
// half-even, as OH_NN_QuantParam takes), and so do their digests, which name
// compiled networks already cached on devices.
//
// Thread-safety: pure functions. Ownership: nothing is kept; `w` is read.
#pragma once

#include <dwell/quant.h>
#include <dwell/tensor.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace dwell::plugin_kit {

// Why weights of `dtype` cannot be converted.
inline std::string no_decoder_message(dwell_dtype dtype) {
    return std::string("no decoder for weights of type ") + dwell_dtype_name(dtype);
}

// Decodes rows 0..rows) of weight matrix `w` (rows of w.ne[0] values, w.nb[1]
// bytes apart) and calls emit(r, row) with each as f32. Returns false when
// w's dtype has no decoder (found at the first row, before any emit).
template <typename Emit>
bool for_each_dequantized_row(const dwell_tensor& w, int64_t rows, Emit emit) {
    const int64_t k = w.ne[0];
    std::vector<float> row(static_cast<size_t>(k));
    const auto* src = static_cast<const uint8_t*>(w.data);
    for (int64_t r = 0; r < rows; ++r) {
        if (dwell_dequantize_row(w.dtype, src + r * w.nb[1], row.data(), k) != 0) return false;
        emit(r, static_cast<const float*>(row.data()));
    }
    return true;
}

// 64-bit FNV-1a over `bytes` bytes at `data`, chained from `seed`: where
// the backends' weight and network digests start (each finishes its own
// way, and must keep doing so: digests name networks cached on devices).
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull) {
    const auto* p = static_cast<const uint8_t*>(data);
    uint64_t h = seed;
    for (size_t i = 0; i < bytes; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

// k values as IEEE fp16 at `dst` (no alignment needed).
inline void encode_fp16_row(const float* row, size_t k, void* dst) {
    auto* out = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < k; ++i) {
        const uint16_t h = dwell_fp32_to_fp16(row[i]);
        std::memcpy(out + 2 * i, &h, 2);
    }
}

}  // namespace dwell::plugin_kit
