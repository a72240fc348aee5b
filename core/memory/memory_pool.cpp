#include "dwell/core/memory/memory_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"

namespace dwell {

namespace {
// Chunks of at least 4 MiB keep the number of mappings (and bitmap scans)
// small while not over-reserving for tiny models.
constexpr size_t kMinChunkBytes = size_t{4} << 20;
}  // namespace

const char* memory_use_name(MemoryUse use) {
    switch (use) {
        case MemoryUse::Weights:
            return "weights";
        case MemoryUse::Kv:
            return "KV cache";
        case MemoryUse::Activations:
            return "activations";
        case MemoryUse::Other:
            break;
    }
    return "other";
}

struct MemoryPool::Chunk {
    uint8_t* base = nullptr;
    size_t n_pages = 0;
    size_t n_free = 0;
    std::vector<bool> used;

    size_t bytes = 0;

    Chunk(uint8_t* b, size_t n, size_t page_size)
        : base(b), n_pages(n), n_free(n), used(n, false), bytes(n * page_size) {}
    Chunk(const Chunk&) = delete;
    Chunk& operator=(const Chunk&) = delete;
    ~Chunk() { munmap(base, bytes); }

    // First fit: the lowest run of n free pages, or n_pages if none.
    size_t find_run(size_t n) const {
        size_t run = 0;
        for (size_t i = 0; i < n_pages; ++i) {
            run = used[i] ? 0 : run + 1;
            if (run == n) return i + 1 - n;
        }
        return n_pages;
    }
};

PoolBuffer::PoolBuffer(PoolBuffer&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      use_(other.use_) {}

PoolBuffer& PoolBuffer::operator=(PoolBuffer&& other) noexcept {
    if (this != &other) {
        release();
        pool_ = std::exchange(other.pool_, nullptr);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        use_ = other.use_;
    }
    return *this;
}

PoolBuffer::~PoolBuffer() {
    release();
}

void PoolBuffer::release() noexcept {
    if (pool_ && data_) pool_->give_back(data_, size_, use_);
    pool_ = nullptr;
    data_ = nullptr;
    size_ = 0;
}

// mmap only aligns to the OS page (4 KiB on most phones); pool pages are
// aligned to their own size, which DMA-buf imports and the kernels' aligned
// loads rely on. Maps one pool page more and returns the slack to the OS.
void* MemoryPool::map_aligned(size_t bytes) const {
    const auto os_page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t slack = page_size_ > os_page ? page_size_ - os_page : 0;
    void* raw =
        mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED || slack == 0) return raw;
    auto* p = static_cast<uint8_t*>(raw);
    const size_t misalign = reinterpret_cast<uintptr_t>(p) % page_size_;
    const size_t head = misalign == 0 ? 0 : page_size_ - misalign;
    if (head > 0) munmap(p, head);
    if (slack > head) munmap(p + head + bytes, slack - head);
    return p + head;
}

MemoryPool::MemoryPool(size_t page_size, uint64_t budget_bytes)
    : page_size_(page_size), budget_(budget_bytes) {
    if (page_size < 4096 || (page_size & (page_size - 1)) != 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "memory pool: page size " + std::to_string(page_size) +
                        " must be a power of two of at least 4096 bytes");
    }
    stats_.page_size = page_size;
    stats_.budget_bytes = budget_bytes;
}

MemoryPool::~MemoryPool() = default;

void MemoryPool::check_budget(uint64_t bytes, std::string_view what) {
    if (budget_ == 0 || (stats_.used_bytes <= budget_ && bytes <= budget_ - stats_.used_bytes)) {
        return;
    }
    ++stats_.failed_allocations;
    std::string in_use;
    for (int u = 0; u < kMemoryUses; ++u) {
        if (stats_.used_by[u] == 0) continue;
        if (!in_use.empty()) in_use += ", ";
        in_use += memory_use_name(static_cast<MemoryUse>(u));
        in_use += ' ';
        in_use += format_bytes(stats_.used_by[u]);
    }
    std::string message(what);
    message += " needs ";
    message += format_bytes(bytes);
    message += " but the memory budget of ";
    message += format_bytes(budget_);
    message += " has ";
    message += format_bytes(stats_.used_bytes < budget_ ? budget_ - stats_.used_bytes : 0);
    message += " left (in use: ";
    message += in_use.empty() ? std::string("nothing") : in_use;
    message +=
        "): raise [memory] budget_mb or --memory-budget, or use a smaller context or "
        "--kv-type q8_0";
    throw Error(DWELL_ERR_OUT_OF_MEMORY, message);
}

void MemoryPool::add_use(uint64_t bytes, MemoryUse use) {
    stats_.used_bytes += bytes;
    stats_.used_by[static_cast<int>(use)] += bytes;
    stats_.peak_used_bytes = std::max(stats_.peak_used_bytes, stats_.used_bytes);
}

template <class Request>
auto MemoryPool::with_reclaim(uint64_t bytes, Request request) -> decltype(request()) {
    try {
        return request();
    } catch (const Error& e) {
        if (e.status() != DWELL_ERR_OUT_OF_MEMORY || !reclaimer_ || reclaimer_(bytes) == 0) throw;
    }
    return request();
}

void MemoryPool::charge_once(uint64_t bytes, MemoryUse use, std::string_view what) {
    std::lock_guard lock(mutex_);
    check_budget(bytes, what);
    add_use(bytes, use);
}

void MemoryPool::charge(uint64_t bytes, MemoryUse use, std::string_view what) {
    with_reclaim(bytes, [&] { charge_once(bytes, use, what); });
}

bool MemoryPool::try_charge(uint64_t bytes, MemoryUse use) noexcept {
    std::lock_guard lock(mutex_);
    if (budget_ != 0 && (stats_.used_bytes > budget_ || bytes > budget_ - stats_.used_bytes)) {
        return false;
    }
    add_use(bytes, use);
    return true;
}

void MemoryPool::uncharge(uint64_t bytes, MemoryUse use) noexcept {
    std::lock_guard lock(mutex_);
    stats_.used_bytes -= std::min(bytes, stats_.used_bytes);
    uint64_t& by = stats_.used_by[static_cast<int>(use)];
    by -= std::min(bytes, by);
}

void* MemoryPool::take_pages(size_t n_pages, std::string_view what) {
    const uint64_t bytes = uint64_t{n_pages} * page_size_;
    check_budget(bytes, what);
    for (auto& chunk : chunks_) {
        if (chunk->n_free < n_pages) continue;
        size_t first = chunk->find_run(n_pages);
        if (first == chunk->n_pages) continue;
        std::fill_n(chunk->used.begin() + static_cast<std::ptrdiff_t>(first), n_pages, true);
        chunk->n_free -= n_pages;
        uint8_t* p = chunk->base + first * page_size_;
        // Reused pages may hold old data; fresh mappings are already zero.
        std::memset(p, 0, bytes);
        return p;
    }
    const size_t chunk_pages = std::max(n_pages, kMinChunkBytes / page_size_);
    const size_t chunk_bytes = chunk_pages * page_size_;
    void* base = map_aligned(chunk_bytes);
    if (base == MAP_FAILED) {
        ++stats_.failed_allocations;
        throw Error(DWELL_ERR_OUT_OF_MEMORY, std::string(what) + " needs " + format_bytes(bytes) +
                                                 " and the system refused to map " +
                                                 format_bytes(chunk_bytes) + ": " +
                                                 std::strerror(errno));
    }
    auto chunk = std::make_unique<Chunk>(static_cast<uint8_t*>(base), chunk_pages, page_size_);
    std::fill_n(chunk->used.begin(), n_pages, true);
    chunk->n_free -= n_pages;
    stats_.mapped_bytes += chunk_bytes;
    chunks_.push_back(std::move(chunk));
    return base;
}

PoolBuffer MemoryPool::allocate(size_t bytes, std::string_view what, MemoryUse use) {
    // bytes / page + remainder: the usual (bytes + page - 1) / page wraps near SIZE_MAX.
    const size_t n_pages = std::max<size_t>(1, bytes / page_size_ + (bytes % page_size_ != 0));
    if (n_pages > (uint64_t{1} << 40) / page_size_) {
        std::lock_guard lock(mutex_);
        ++stats_.failed_allocations;
        throw Error(
            DWELL_ERR_OUT_OF_MEMORY,
            std::string(what) + " asks for " + format_bytes(bytes) + ", more than any device has");
    }
    return with_reclaim(uint64_t{n_pages} * page_size_,
                        [&] { return allocate_once(n_pages, what, use); });
}

PoolBuffer MemoryPool::allocate_once(size_t n_pages, std::string_view what, MemoryUse use) {
    std::lock_guard lock(mutex_);
    void* p = take_pages(n_pages, what);
    add_use(uint64_t{n_pages} * page_size_, use);
    ++stats_.allocations;
    return PoolBuffer(this, p, n_pages * page_size_, use);
}

void* MemoryPool::allocate_raw(size_t bytes, std::string_view what) noexcept {
    try {
        PoolBuffer buf = allocate(bytes, what);
        std::lock_guard lock(mutex_);
        void* p = std::exchange(buf.data_, nullptr);
        raw_[p] = std::exchange(buf.size_, 0);
        buf.pool_ = nullptr;
        return p;
    } catch (...) {
        return nullptr;
    }
}

void MemoryPool::free_raw(void* ptr) noexcept {
    if (!ptr) return;
    size_t bytes = 0;
    {
        std::lock_guard lock(mutex_);
        auto it = raw_.find(ptr);
        if (it == raw_.end()) return;
        bytes = it->second;
        raw_.erase(it);
    }
    give_back(ptr, bytes, MemoryUse::Other);
}

void MemoryPool::give_back(void* ptr, size_t bytes, MemoryUse use) noexcept {
    std::lock_guard lock(mutex_);
    auto* p = static_cast<uint8_t*>(ptr);
    for (auto it = chunks_.begin(); it != chunks_.end(); ++it) {
        Chunk& c = **it;
        if (p < c.base || p >= c.base + c.bytes) continue;
        const size_t first = static_cast<size_t>(p - c.base) / page_size_;
        const size_t n = bytes / page_size_;
        std::fill_n(c.used.begin() + static_cast<std::ptrdiff_t>(first), n, false);
        c.n_free += n;
        stats_.used_bytes -= bytes;
        stats_.used_by[static_cast<int>(use)] -= bytes;
        --stats_.allocations;
        // Return wholly free chunks to the OS so RSS follows use, but keep
        // one around to avoid map/unmap churn between decode steps.
        if (c.n_free == c.n_pages && chunks_.size() > 1) {
            stats_.mapped_bytes -= c.bytes;
            chunks_.erase(it);
        }
        return;
    }
}

PoolStats MemoryPool::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

}  // namespace dwell
