// The pages every KV cache of a runtime is made of: one address range
// reserved up front (no memory behind it until a page is written), carved
// into pages of the memory pool's page size, each page reference counted so
// sequences that share a prompt prefix share its pages. Pages in use are
// charged to the memory pool's budget (MemoryUse::Kv); a freed page's
// memory goes back to the OS at once.
//
// Pages are named by index, so a backend reaches page p at
// base() + p * page_bytes(): the page space is one tensor for the graph.
//
// Thread-safety: all members may be called from any thread (sessions on
// different threads share the pool). Ownership: the MemoryPool must outlive
// this object; the reservation is unmapped on destruction, so every sequence
// holding pages must be gone by then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/memory/memory_pool.hpp"

namespace dwell {

class DWELL_CORE_API KvPagePool {
public:
    // max_bytes: the most the space may ever hold (rounded down to whole
    // pages); only what is in use costs memory.
    KvPagePool(MemoryPool& pool, uint64_t max_bytes);
    ~KvPagePool();
    KvPagePool(const KvPagePool&) = delete;
    KvPagePool& operator=(const KvPagePool&) = delete;

    // A zero-filled page with one reference. Throws DWELL_ERR_OUT_OF_MEMORY
    // naming `what` when the budget or the space is exhausted (after asking
    // the reclaimer, if any, to free pages).
    int32_t allocate(std::string_view what);
    // Called without locks when a page cannot be had: frees up to n pages
    // held only by a cache and returns how many it freed. Set before the
    // pool is shared between threads.
    void set_reclaimer(std::function<int64_t(int64_t n)> reclaimer) {
        reclaimer_ = std::move(reclaimer);
    }
    void retain(int32_t page);
    // Drops one reference; the last one frees the page. Throws
    // DWELL_ERR_INTERNAL on a page that is not in use (double free).
    void release(int32_t page);
    int32_t refcount(int32_t page) const;

    unsigned char* base() const { return base_; }
    unsigned char* data(int32_t page) const {
        return base_ + static_cast<size_t>(page) * page_bytes_;
    }
    size_t page_bytes() const { return page_bytes_; }
    int32_t capacity() const { return capacity_; }
    int32_t pages_in_use() const;

private:
    void check_page(int32_t page, const char* what) const;  // caller locks
    int32_t allocate_once(std::string_view what);

    MemoryPool& pool_;
    const size_t page_bytes_;
    int32_t capacity_ = 0;
    unsigned char* base_ = nullptr;
    size_t mapped_bytes_ = 0;
    mutable std::mutex mutex_;
    std::vector<int32_t> refs_;  // per page; 0: free
    std::vector<int32_t> free_;  // freed pages, reused last-in first-out
    int32_t never_used_ = 0;     // pages [never_used_, capacity_) were never handed out
    int32_t in_use_ = 0;
    std::function<int64_t(int64_t)> reclaimer_;
};

}  // namespace dwell
