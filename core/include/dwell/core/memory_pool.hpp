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
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dwell {

struct PoolStats {
    uint64_t page_size = 0;
    uint64_t budget_bytes = 0;  // 0: unlimited
    uint64_t mapped_bytes = 0;  // address space taken from the OS
    uint64_t used_bytes = 0;    // pages handed out
    uint64_t peak_used_bytes = 0;
    uint64_t allocations = 0;  // live allocations
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
    PoolBuffer(MemoryPool* pool, void* data, size_t size) : pool_(pool), data_(data), size_(size) {}
    void release() noexcept;
    MemoryPool* pool_ = nullptr;
    void* data_ = nullptr;
    size_t size_ = 0;
};

class MemoryPool {
public:
    // page_size: a power of two >= 4096. budget_bytes 0: no budget.
    MemoryPool(size_t page_size, uint64_t budget_bytes);
    ~MemoryPool();
    MemoryPool(const MemoryPool&) = delete;
    MemoryPool& operator=(const MemoryPool&) = delete;

    // Throws dwell::Error(DWELL_ERR_OUT_OF_MEMORY) naming `what` when the
    // budget or the OS refuses. Memory is zero-filled.
    PoolBuffer allocate(size_t bytes, std::string_view what);

    // The same for the C ABI (host services): nullptr instead of a throw.
    void* allocate_raw(size_t bytes, std::string_view what) noexcept;
    void free_raw(void* ptr) noexcept;

    PoolStats stats() const;
    size_t page_size() const { return page_size_; }
    uint64_t budget_bytes() const { return budget_; }

private:
    friend class PoolBuffer;
    struct Chunk;
    void* take_pages(size_t n_pages, std::string_view what);  // throws
    void* map_aligned(size_t bytes) const;                    // MAP_FAILED on failure
    void give_back(void* ptr, size_t bytes) noexcept;

    const size_t page_size_;
    const uint64_t budget_;
    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<Chunk>> chunks_;
    std::unordered_map<void*, size_t> raw_;  // allocate_raw pointers -> bytes
    PoolStats stats_;
};

}  // namespace dwell
