// The carried per-sequence state of a hybrid model (ABI 1.6): per layer up
// to two F32 vectors of dwell_model_info.state_elems[0|1] values (LFM2's
// short-convolution state: the layer's last K - 1 inputs), beside the KV
// pages of the same sequence.
//
// Every layer gets its states, in one pool buffer charged as KV memory, when
// the store is made: the host learns which layers use state only from the
// graphs the plugin builds, a buffer per layer would round each to a pool
// page, and a short convolution's state is tiny next to the KV cache
// (n_layer * C * (K - 1) * 4 bytes: 128 KiB for LFM2-350M).
//
// Thread-safety: one thread at a time.
// Ownership: the MemoryPool must outlive the store.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/memory/memory_pool.hpp"
#include "dwell/tensor.h"

namespace dwell {

class DWELL_CORE_API RecurrentState {
public:
    // Values of one state of one layer, at most; with n_layer <= 4096 the
    // whole store stays far below 2^64 bytes.
    static constexpr int64_t kMaxElements = int64_t{1} << 28;

    RecurrentState() = default;
    // Zero-filled; throws the pool's budget refusal when it does not fit.
    RecurrentState(MemoryPool& pool, int32_t n_layer, std::array<int64_t, 2> elems);

    bool empty() const { return bytes_ == 0; }
    int32_t n_layer() const { return n_layer_; }
    int64_t elements(int32_t which) const { return elems_[static_cast<size_t>(which)]; }
    size_t bytes() const { return bytes_; }

    // The F32 vector of state `which` of a layer, or nullptr when the model
    // has no such state or the layer is out of range.
    const dwell_tensor* tensor(int32_t layer, int32_t which) const;
    std::span<float> values(int32_t layer, int32_t which);
    std::span<const float> values(int32_t layer, int32_t which) const;

    // Every value, layer by layer (state 0 then 1), for copies and restores.
    std::span<const float> all() const;
    // Copies every value from a store of the same shape.
    void assign(std::span<const float> values);
    void clear();

private:
    int32_t n_layer_ = 0;
    std::array<int64_t, 2> elems_{};
    size_t bytes_ = 0;
    PoolBuffer buffer_;
    std::vector<dwell_tensor> tensors_;  // [layer * 2 + which]
};

}  // namespace dwell
