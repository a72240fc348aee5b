#include "dwell/core/kv/recurrent_state.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "dwell/core/base/error.hpp"

namespace dwell {

RecurrentState::RecurrentState(MemoryPool& pool, int32_t n_layer, std::array<int64_t, 2> elems)
    : n_layer_(n_layer), elems_(elems) {
    for (int64_t e : elems) {
        if (e < 0 || e > kMaxElements) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT, "recurrent state of " + std::to_string(e) +
                                                        " values per layer (allowed 0.." +
                                                        std::to_string(kMaxElements) + ")");
        }
    }
    if (n_layer <= 0 || (elems[0] == 0 && elems[1] == 0)) {
        n_layer_ = std::max(n_layer, 0);
        return;
    }
    const auto per_layer = static_cast<size_t>(elems[0] + elems[1]);
    bytes_ = per_layer * static_cast<size_t>(n_layer) * sizeof(float);
    buffer_ = pool.allocate(bytes_, "the recurrent state of " + std::to_string(n_layer) + " layers",
                            MemoryUse::Kv);
    std::memset(buffer_.data(), 0, bytes_);
    tensors_.resize(static_cast<size_t>(n_layer) * 2);
    auto* base = static_cast<float*>(buffer_.data());
    for (int32_t l = 0; l < n_layer; ++l) {
        float* layer = base + static_cast<size_t>(l) * per_layer;
        for (int32_t which = 0; which < 2; ++which) {
            const int64_t n = elems[static_cast<size_t>(which)];
            dwell_tensor& t = tensors_[static_cast<size_t>(l) * 2 + static_cast<size_t>(which)];
            t.dtype = DWELL_F32;
            t.n_dims = 1;
            t.ne[0] = std::max<int64_t>(n, 1);
            for (int d = 1; d < DWELL_MAX_DIMS; ++d) t.ne[d] = 1;
            t.nb[0] = sizeof(float);
            for (int d = 1; d < DWELL_MAX_DIMS; ++d) t.nb[d] = static_cast<uint64_t>(t.ne[0]) * 4;
            t.data = n ? layer + (which ? elems[0] : 0) : nullptr;
        }
    }
}

const dwell_tensor* RecurrentState::tensor(int32_t layer, int32_t which) const {
    if (layer < 0 || layer >= n_layer_ || which < 0 || which > 1 || empty() ||
        elems_[static_cast<size_t>(which)] == 0)
        return nullptr;
    return &tensors_[static_cast<size_t>(layer) * 2 + static_cast<size_t>(which)];
}

std::span<float> RecurrentState::values(int32_t layer, int32_t which) {
    const dwell_tensor* t = tensor(layer, which);
    if (!t) return {};
    return {static_cast<float*>(t->data), static_cast<size_t>(elems_[static_cast<size_t>(which)])};
}

std::span<const float> RecurrentState::values(int32_t layer, int32_t which) const {
    return const_cast<RecurrentState*>(this)->values(layer, which);
}

std::span<const float> RecurrentState::all() const {
    return {static_cast<const float*>(buffer_.data()), bytes_ / sizeof(float)};
}

void RecurrentState::assign(std::span<const float> values) {
    if (values.size() * sizeof(float) != bytes_) {
        throw Error(DWELL_ERR_INTERNAL, "recurrent state: " + std::to_string(values.size()) +
                                            " values assigned to a store of " +
                                            std::to_string(bytes_ / sizeof(float)));
    }
    if (bytes_) std::memcpy(buffer_.data(), values.data(), bytes_);
}

void RecurrentState::clear() {
    if (bytes_) std::memset(buffer_.data(), 0, bytes_);
}

}  // namespace dwell
