// release_weights bookkeeping shared by the backends that keep converted or
// uploaded copies of host weights (opencl, apu, nnrt): the host names a
// byte range it is about to free, and every cached copy made from inside it
// must go.
//
// Thread-safety: none of its own; called under the context's one-thread-at-
// a-time rule. Ownership: nothing is kept; `cache` is the caller's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>

namespace dwell::plugin_kit {

// The host range [data, data + bytes) of a release_weights call.
class HostRange {
public:
    HostRange(const void* data, size_t bytes)
        : begin_(static_cast<const uint8_t*>(data)), end_(begin_ + bytes) {}
    const uint8_t* begin() const { return begin_; }
    const uint8_t* end() const { return end_; }
    bool contains(const void* p) const {
        const auto* q = static_cast<const uint8_t*>(p);
        return q >= begin_ && q < end_;
    }

private:
    const uint8_t* begin_;
    const uint8_t* end_;
};

// Erases from `cache` (a map keyed by tuples whose first element is the
// source weight's host address) every entry made from inside `range`,
// handing each to `dropped(entry)` before it goes.
template <typename Map, typename Dropped>
void erase_weights_in(Map& cache, const HostRange& range, Dropped dropped) {
    for (auto it = cache.begin(); it != cache.end();) {
        if (range.contains(std::get<0>(it->first))) {
            dropped(*it);
            it = cache.erase(it);
        } else {
            ++it;
        }
    }
}

}  // namespace dwell::plugin_kit
