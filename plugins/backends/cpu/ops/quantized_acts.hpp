// The int8 form of the last matmul input, kept for the rest of one
// graph_compute call: Q, K and V read the same normalised x, as do the FFN's
// gate and up, so quantizing x once serves them all (the "norm + quantize"
// work happens once per layer input instead of once per matmul). The entry
// is dropped as soon as any node writes over x's bytes, and the buffer is
// reused from one matmul to the next instead of being allocated each time.
//
// Thread-safety: one graph_compute call uses it, from its calling thread.
// Ownership: owns its buffer; the returned pointers stay valid until the
// next lookup() or the object's end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dwell/tensor.h"
#include "ops/packed_weights.hpp"
#include "simd/gemm_kernel.hpp"

namespace dwell::cpu {

class QuantizedActs {
public:
    // Rows of x quantized by kernel.quantize_act (act_row_bytes bytes each):
    // hit is true when they are already there; else the caller fills the
    // returned buffer and then calls filled().
    unsigned char* lookup(const dwell_tensor& x, const GemmKernel& kernel, size_t act_row_bytes,
                          bool* hit);
    void filled() { valid_ = true; }

    // Forgets the cached rows if [out's bytes] overlap x's.
    void note_written(const dwell_tensor& out);

private:
    AlignedBytes buffer_;
    size_t capacity_ = 0;
    bool valid_ = false;
    // What the buffer holds: x's address, shape, strides and the kernel's
    // activation quantizer.
    const void* x_data_ = nullptr;
    int64_t ne_[DWELL_MAX_DIMS] = {};
    uint64_t nb_[DWELL_MAX_DIMS] = {};
    void (*quantize_)(const float*, int64_t, void*) = nullptr;
    size_t row_bytes_ = 0;
    const unsigned char* x_begin_ = nullptr;
    const unsigned char* x_end_ = nullptr;
};

}  // namespace dwell::cpu
