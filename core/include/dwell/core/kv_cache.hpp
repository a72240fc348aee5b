// The key/value cache of one session: per layer, a K and a V tensor of
// [kv_width, n_ctx] in the KV dtype, in pages from the memory pool.
// (Paged sharing between sequences comes with the paged KV cache.)
//
// Thread-safety: owned by one session.
#pragma once

#include <cstdint>
#include <vector>

#include "dwell/core/memory_pool.hpp"
#include "dwell/tensor.h"

namespace dwell {

class KvCache {
public:
    KvCache(MemoryPool& pool, int32_t n_layer, int64_t kv_width, int64_t n_ctx, dwell_dtype dtype);

    const dwell_tensor* tensor(int32_t layer, int32_t which) const;
    int64_t n_ctx() const { return n_ctx_; }
    uint64_t bytes() const { return bytes_; }
    dwell_dtype dtype() const { return dtype_; }

private:
    int64_t n_ctx_;
    dwell_dtype dtype_;
    uint64_t bytes_ = 0;
    std::vector<PoolBuffer> buffers_;    // 2 per layer: K then V
    std::vector<dwell_tensor> tensors_;  // same order
};

}  // namespace dwell
