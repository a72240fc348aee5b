#include "dwell/core/kv/kv_page_pool.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"

namespace dwell {

namespace {

// Page ids are int32 in page tables; also keeps the reservation sane on a
// 64-bit address space when no budget bounds it.
constexpr uint64_t kMaxPages = uint64_t{1} << 30;

}  // namespace

KvPagePool::KvPagePool(MemoryPool& pool, uint64_t max_bytes)
    : pool_(pool), page_bytes_(pool.page_size()) {
    const uint64_t pages = std::min<uint64_t>(max_bytes / page_bytes_, kMaxPages);
    if (pages == 0) return;  // allocate() reports the empty space
    // Reserve address space only: MAP_NORESERVE takes no commit charge and
    // untouched pages cost nothing, so the space can be as large as the
    // budget while memory follows the pages in use.
    const size_t bytes = static_cast<size_t>(pages) * page_bytes_;
    const size_t slack = page_bytes_;
    void* raw = mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
        throw Error(DWELL_ERR_OUT_OF_MEMORY, "KV cache: cannot reserve " + format_bytes(bytes) +
                                                 " of address space: " + std::strerror(errno) +
                                                 " (lower [memory] budget_mb)");
    }
    // Pages aligned to their own size, as the memory pool's are.
    auto* p = static_cast<unsigned char*>(raw);
    const size_t misalign = reinterpret_cast<uintptr_t>(p) % page_bytes_;
    const size_t head = misalign == 0 ? 0 : page_bytes_ - misalign;
    if (head > 0) munmap(p, head);
    if (slack > head) munmap(p + head + bytes, slack - head);
    base_ = p + head;
    mapped_bytes_ = bytes;
    capacity_ = static_cast<int32_t>(pages);
    // refs_ grows with the pages actually handed out: a large budget makes
    // a large space, and a count per page it could hold would cost memory
    // (4 GiB at the page cap) for pages no context ever reaches.
}

KvPagePool::~KvPagePool() {
    if (in_use_ > 0) pool_.uncharge(uint64_t(in_use_) * page_bytes_, MemoryUse::Kv);
    if (base_) munmap(base_, mapped_bytes_);
}

void KvPagePool::check_page(int32_t page, const char* what) const {
    if (page < 0 || page >= capacity_) {
        throw Error(DWELL_ERR_INTERNAL, std::string("KV page ") + std::to_string(page) + " " +
                                            what + ": no such page (the space holds " +
                                            std::to_string(capacity_) + ")");
    }
    if (page >= never_used_) {
        throw Error(DWELL_ERR_INTERNAL, std::string("KV page ") + std::to_string(page) + " " +
                                            what + ": the page was never allocated");
    }
    if (refs_[static_cast<size_t>(page)] == 0) {
        throw Error(DWELL_ERR_INTERNAL, std::string("KV page ") + std::to_string(page) + " " +
                                            what +
                                            ": the page is free (double free or use after free)");
    }
}

int32_t KvPagePool::allocate(std::string_view what) {
    // Cached prefixes give way to live sessions: a batch of them is freed
    // and the request tried once more. (The budget side of this runs in
    // the memory pool's own reclaimer.)
    constexpr int64_t kReclaimBatch = 64;
    try {
        return allocate_once(what);
    } catch (const Error& e) {
        if (e.status() != DWELL_ERR_OUT_OF_MEMORY || !reclaimer_ ||
            reclaimer_(kReclaimBatch) == 0) {
            throw;
        }
    }
    return allocate_once(what);
}

int32_t KvPagePool::allocate_once(std::string_view what) {
    // Charged before the lock: the memory pool may call back into the
    // prefix cache, which releases pages here.
    pool_.charge(page_bytes_, MemoryUse::Kv, what);
    std::lock_guard lock(mutex_);
    if (free_.empty() && never_used_ == capacity_) {
        pool_.uncharge(page_bytes_, MemoryUse::Kv);
        throw Error(DWELL_ERR_OUT_OF_MEMORY,
                    std::string(what) + " needs a KV page but all " + std::to_string(capacity_) +
                        " pages (" + format_bytes(uint64_t(capacity_) * page_bytes_) +
                        ") are in use: raise [memory] budget_mb or --memory-budget, close "
                        "sessions, or use --kv-type q8_0");
    }
    int32_t page;
    if (!free_.empty()) {
        page = free_.back();
        free_.pop_back();
        refs_[static_cast<size_t>(page)] = 1;
    } else {
        try {
            refs_.push_back(1);
            // release() then never needs to allocate (it runs in destructors).
            free_.reserve(refs_.capacity());
        } catch (const std::bad_alloc&) {
            if (refs_.size() > static_cast<size_t>(never_used_)) refs_.pop_back();
            pool_.uncharge(page_bytes_, MemoryUse::Kv);
            throw Error(DWELL_ERR_OUT_OF_MEMORY,
                        std::string(what) + ": no memory for the KV page table");
        }
        page = never_used_++;
    }
    ++in_use_;
    return page;
}

void KvPagePool::retain(int32_t page) {
    std::lock_guard lock(mutex_);
    check_page(page, "retained");
    ++refs_[static_cast<size_t>(page)];
}

void KvPagePool::release(int32_t page) {
    {
        std::lock_guard lock(mutex_);
        check_page(page, "released");
        if (--refs_[static_cast<size_t>(page)] > 0) return;
        // Back to the OS now, so RSS follows the pages in use; the next user
        // of the page finds it zero-filled.
        madvise(data(page), page_bytes_, MADV_DONTNEED);
        free_.push_back(page);
        --in_use_;
    }
    pool_.uncharge(page_bytes_, MemoryUse::Kv);
}

int32_t KvPagePool::refcount(int32_t page) const {
    std::lock_guard lock(mutex_);
    if (page < 0 || page >= never_used_) return 0;
    return refs_[static_cast<size_t>(page)];
}

int32_t KvPagePool::pages_in_use() const {
    std::lock_guard lock(mutex_);
    return in_use_;
}

}  // namespace dwell
