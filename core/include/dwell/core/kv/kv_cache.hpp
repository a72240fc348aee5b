// The key/value cache of one sequence, in pages of the runtime's
// KvPagePool. A page holds rows_per_page() consecutive positions of one
// layer's K or V; logical page i of the sequence is, per layer, a (K page,
// V page) pair in that layer's page table, which is exactly the I32
// [2, n_logical] table the ATTENTION op reads (graph.h, paged form).
//
// Pages may be shared with other sequences (fork(), adopt_page()); they are
// copied the first time this sequence writes into them (prepare_write).
//
// Thread-safety: one thread at a time per KvCache; different caches may
// share pages from different threads (the page pool is thread-safe).
// Ownership: holds one reference on every page in its tables and drops them
// on destruction; the KvPagePool must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/kv/kv_page_pool.hpp"
#include "dwell/tensor.h"

namespace dwell {

class DWELL_CORE_API KvCache {
public:
    // Throws DWELL_ERR_UNSUPPORTED for a dtype attention cannot store and
    // DWELL_ERR_INVALID_ARGUMENT when one row does not fit a page.
    KvCache(KvPagePool& pages, int32_t n_layer, int64_t kv_width, int64_t n_ctx, dwell_dtype dtype);
    ~KvCache();
    KvCache(KvCache&& other) noexcept;
    KvCache& operator=(KvCache&&) = delete;
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    // A cache with the same rows that shares every page with this one.
    KvCache fork() const;

    // The page id a layer without KV has in page_ids() and the tables.
    static constexpr int32_t kNoPage = -1;
    // Only the layers marked get pages (a hybrid model's convolution layers
    // never attend); before the first page only. Their tensors are then
    // nullptr and their rows are not there.
    void use_layers(std::vector<bool> used);
    bool uses_layer(int32_t layer) const {
        return used_.empty() || used_[static_cast<size_t>(layer)];
    }

    // Makes positions [begin, end) writable: pages past the end of the
    // tables are allocated, shared ones are copied (copy on write). Throws
    // DWELL_ERR_OUT_OF_MEMORY from the pool; pages taken before a failure
    // stay in the tables (still owned, reused by the next attempt).
    void prepare_write(int64_t begin, int64_t end);
    // Keeps the pages that hold positions [0, n_rows) and drops the rest.
    void truncate(int64_t n_rows);

    // Appends logical page n_pages() made of `ids` (n_layer * 2 page ids:
    // layer l's K then V), taking a reference on each.
    void adopt_page(std::span<const int32_t> ids);
    // The n_layer * 2 page ids of logical page `logical`, in adopt_page order.
    std::vector<int32_t> page_ids(int64_t logical) const;

    // For the graph: (layer, 0) the page space, (layer, 1) that layer's
    // page table; nullptr out of range. Valid until the next non-const call.
    const dwell_tensor* tensor(int32_t layer, int32_t which) const;

    // Row `pos` of layer `layer`'s K (which = 0) or V (1); the page must be
    // in the tables (and, to write, not shared).
    unsigned char* row(int32_t layer, int32_t which, int64_t pos) const;

    int64_t n_ctx() const { return n_ctx_; }
    int32_t n_layer() const { return n_layer_; }
    int64_t kv_width() const { return kv_width_; }
    dwell_dtype dtype() const { return dtype_; }
    size_t row_bytes() const { return row_bytes_; }
    int64_t rows_per_page() const { return rows_per_page_; }
    int64_t n_pages() const { return n_logical_; }  // logical pages
    // Page references held (2 per logical page and layer with KV) and their bytes.
    int64_t pages_held() const { return n_logical_ * n_used_ * 2; }
    uint64_t bytes() const;
    // Bytes of K and V one position takes across all layers (page padding
    // excluded).
    uint64_t bytes_per_token() const { return uint64_t(row_bytes_) * 2 * uint64_t(n_used_); }
    KvPagePool& page_pool() const { return *pages_; }

private:
    void refresh_tensors();
    // Appends logical page n_pages() (ids as in adopt_page; references taken).
    void append_page(std::span<const int32_t> ids);
    void release_all() noexcept;

    KvPagePool* pages_;
    int32_t n_layer_;
    int64_t kv_width_;
    int64_t n_ctx_;
    dwell_dtype dtype_;
    size_t row_bytes_;
    int64_t rows_per_page_;
    int64_t n_logical_ = 0;
    std::vector<bool> used_;                    // empty: every layer
    int32_t n_used_;                            // layers with KV
    std::vector<std::vector<int32_t>> tables_;  // per layer: [logical][K, V]
    dwell_tensor space_{};                      // the page space, for every layer
    std::vector<dwell_tensor> table_tensors_;   // per layer
};

}  // namespace dwell
