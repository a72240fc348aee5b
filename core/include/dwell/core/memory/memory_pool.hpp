// The runtime's one memory pool: large allocations (KV cache, activations,
// streamed weights) come from here, in whole pages, so "how much memory does
// this take" has one answer and one budget.
//
// Memory is mapped in chunks of pages; each chunk keeps a bitmap of free
// pages and an allocation takes a run of contiguous pages in one chunk.
// A request that would take the pages in use past the budget fails with
// DWELL_ERR_OUT_OF_MEMORY naming what asked, how much, and what is in use.
//
// Thread-safety: all members may be called from any thread.
// Ownership: PoolBuffer returns its pages on destruction; the pool must
// outlive every PoolBuffer taken from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dwell/core/base/export.hpp"

namespace dwell {

// What the budgeted bytes are for, so a refusal can say where memory went.
enum class MemoryUse { Weights, Kv, Activations, Other };
inline constexpr int kMemoryUses = 4;
const char* memory_use_name(MemoryUse use);

struct PoolStats {
    uint64_t page_size = 0;
    uint64_t budget_bytes = 0;  // 0: unlimited
    uint64_t mapped_bytes = 0;  // address space taken from the OS
    uint64_t used_bytes = 0;    // pages handed out plus charged bytes
    uint64_t peak_used_bytes = 0;
    uint64_t used_by[kMemoryUses] = {};  // used_bytes by MemoryUse
    uint64_t allocations = 0;            // live allocations
    uint64_t failed_allocations = 0;
};

class MemoryPool;

// Pages taken from a pool; returned when this object dies.
class PoolBuffer {
public:
    PoolBuffer() = default;
    PoolBuffer(PoolBuffer&& other) noexcept;
    PoolBuffer& operator=(PoolBuffer&& other) noexcept;
    PoolBuffer(const PoolBuffer&) = delete;
    PoolBuffer& operator=(const PoolBuffer&) = delete;
    ~PoolBuffer();

    void* data() const { return data_; }
    size_t size() const { return size_; }  // whole pages
    explicit operator bool() const { return data_ != nullptr; }

private:
    friend class MemoryPool;
    PoolBuffer(MemoryPool* pool, void* data, size_t size, MemoryUse use)
        : pool_(pool), data_(data), size_(size), use_(use) {}
    void release() noexcept;
    MemoryPool* pool_ = nullptr;
    void* data_ = nullptr;
    size_t size_ = 0;
    MemoryUse use_ = MemoryUse::Other;
};

class DWELL_CORE_API MemoryPool {
public:
    // page_size: a power of two >= 4096. budget_bytes 0: no budget.
    MemoryPool(size_t page_size, uint64_t budget_bytes);
    ~MemoryPool();
    MemoryPool(const MemoryPool&) = delete;
    MemoryPool& operator=(const MemoryPool&) = delete;

    // Throws dwell::Error(DWELL_ERR_OUT_OF_MEMORY) naming `what` when the
    // budget or the OS refuses. Memory is zero-filled.
    PoolBuffer allocate(size_t bytes, std::string_view what, MemoryUse use = MemoryUse::Other);

    // Counts memory that lives outside the pool's pages (memory-mapped
    // weights, the KV page space) against the same budget; throws like
    // allocate when it does not fit. uncharge gives the bytes back.
    void charge(uint64_t bytes, MemoryUse use, std::string_view what);
    void uncharge(uint64_t bytes, MemoryUse use) noexcept;
    // charge without the reclaimer and without throwing: false when the
    // bytes do not fit (for optional caches, which may hold a lock the
    // reclaimer needs).
    bool try_charge(uint64_t bytes, MemoryUse use) noexcept;

    // Called without the pool's lock when a request would exceed the budget:
    // frees up to `bytes` of memory only a cache holds (returns the bytes
    // freed), and the request is tried once more. Set before the pool is
    // shared between threads.
    void set_reclaimer(std::function<uint64_t(uint64_t bytes)> reclaimer) {
        reclaimer_ = std::move(reclaimer);
    }

    // The same for the C ABI (host services): nullptr instead of a throw.
    void* allocate_raw(size_t bytes, std::string_view what) noexcept;
    void free_raw(void* ptr) noexcept;

    PoolStats stats() const;
    size_t page_size() const { return page_size_; }
    uint64_t budget_bytes() const { return budget_; }

private:
    friend class PoolBuffer;
    struct DWELL_CORE_LOCAL Chunk;
    void* take_pages(size_t n_pages, std::string_view what);  // throws
    void* map_aligned(size_t bytes) const;                    // MAP_FAILED on failure
    void give_back(void* ptr, size_t bytes, MemoryUse use) noexcept;
    // Throws the budget refusal when `bytes` more would not fit; caller locks.
    void check_budget(uint64_t bytes, std::string_view what);
    void add_use(uint64_t bytes, MemoryUse use);  // caller locks
    PoolBuffer allocate_once(size_t n_pages, std::string_view what, MemoryUse use);
    void charge_once(uint64_t bytes, MemoryUse use, std::string_view what);
    // Runs `request`; on a budget refusal asks the reclaimer for `bytes` and
    // runs it once more.
    template <class Request>
    auto with_reclaim(uint64_t bytes, Request request) -> decltype(request());

    const size_t page_size_;
    const uint64_t budget_;
    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<Chunk>> chunks_;
    std::unordered_map<void*, size_t> raw_;  // allocate_raw pointers -> bytes
    PoolStats stats_;
    std::function<uint64_t(uint64_t)> reclaimer_;
};

}  // namespace dwell
