#include "dwell/core/kv_cache.hpp"

#include <string>

#include "dwell/core/error.hpp"
#include "dwell/core/graph.hpp"

namespace dwell {

KvCache::KvCache(MemoryPool& pool, int32_t n_layer, int64_t kv_width, int64_t n_ctx,
                 dwell_dtype dtype)
    : n_ctx_(n_ctx), dtype_(dtype) {
    if (dtype != DWELL_F16 && dtype != DWELL_F32) {
        throw Error(DWELL_ERR_UNSUPPORTED, std::string("KV cache type ") + dwell_dtype_name(dtype) +
                                               " is not supported yet: use f16 or f32");
    }
    const int64_t ne[2] = {kv_width, n_ctx};
    for (int32_t l = 0; l < n_layer; ++l) {
        for (int which = 0; which < 2; ++which) {
            dwell_tensor t = make_tensor(dtype, 2, ne);
            const uint64_t size = t.nb[1] * static_cast<uint64_t>(n_ctx);
            buffers_.push_back(pool.allocate(size, "the KV cache of layer " + std::to_string(l) +
                                                       " (" + std::to_string(n_ctx) + " tokens)"));
            t.data = buffers_.back().data();
            tensors_.push_back(t);
            bytes_ += size;
        }
    }
}

const dwell_tensor* KvCache::tensor(int32_t layer, int32_t which) const {
    const size_t i = static_cast<size_t>(layer) * 2 + (which ? 1 : 0);
    if (layer < 0 || which < 0 || which > 1 || i >= tensors_.size()) return nullptr;
    return &tensors_[i];
}

}  // namespace dwell
