#include "ops/packed_weights.hpp"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <sys/mman.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "ops/tensor_access.hpp"

namespace dwell::cpu {

void AlignedFree::operator()(void* p) const {
    if (map_base != nullptr) {
        ::munmap(map_base, map_bytes);
    } else {
        std::free(p);
    }
}

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

AlignedBytes make_aligned_bytes(size_t n) {
    const size_t size = std::max<size_t>(64, (n + 63) / 64 * 64);
    if (size < 2 * kHugePage) {
        void* p = std::aligned_alloc(64, size);
        if (p == nullptr) throw std::bad_alloc();
        return AlignedBytes(static_cast<unsigned char*>(p));
    }
    const size_t bytes = (size + kHugePage - 1) / kHugePage * kHugePage;
    const size_t map_bytes = bytes + kHugePage;  // room to align the start
    void* base =
        ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::bad_alloc();
    auto* p = static_cast<unsigned char*>(base);
    const size_t misalign = reinterpret_cast<uintptr_t>(p) % kHugePage;
    unsigned char* start = p + (misalign == 0 ? 0 : kHugePage - misalign);
    // Advice only: where the kernel has no huge pages this changes nothing.
    // The partly used last 2 MiB stays on small pages, or touching it would
    // make a whole huge page resident.
    if (size >= kHugePage) (void)::madvise(start, size / kHugePage * kHugePage, MADV_HUGEPAGE);
    return AlignedBytes(start, AlignedFree{base, map_bytes});
}

namespace {

size_t packed_size(const GemmKernel& kernel, int64_t k, int64_t n) {
    const int64_t blocks = (n + kernel.rows_per_block - 1) / kernel.rows_per_block;
    return static_cast<size_t>(blocks) * kernel.block_bytes(k);
}

// Two ends of the weight's bytes: cheap, and enough to tell two tensors
// apart in practice (a model's weights do not share their first and last
// 256 bytes).
uint64_t fingerprint(const dwell_tensor& w) {
    const size_t row = dwell_row_bytes(w.dtype, w.ne[0]);
    const size_t span = std::min<size_t>(256, row);
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    XXH3_64bits_update(&state, row_at(w, 0), span);
    XXH3_64bits_update(&state, row_at(w, w.ne[1] - 1) + row - span, span);
    return XXH3_64bits_digest(&state);
}

}  // namespace

AlignedBytes pack_weight(const GemmKernel& kernel, const dwell_tensor& w, ThreadPool& pool) {
    const int64_t k = w.ne[0];
    const int64_t n = w.ne[1];
    const int R = kernel.rows_per_block;
    const size_t block = kernel.block_bytes(k);
    AlignedBytes out = make_aligned_bytes(packed_size(kernel, k, n));
    const int64_t blocks = (n + R - 1) / R;
    pool.parallel_for(blocks, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
            const int nr = static_cast<int>(std::min<int64_t>(R, n - b * R));
            kernel.pack_block(row_at(w, b * R), static_cast<size_t>(w.nb[1]), nr, k,
                              out.get() + static_cast<size_t>(b) * block);
        }
    });
    return out;
}

void PackedWeights::note_copied(const dwell_tensor& w) const {
    if (copied_ == nullptr) return;
    const unsigned char* first = row_at(w, 0);
    const unsigned char* last = row_at(w, w.ne[1] - 1) + dwell_row_bytes(w.dtype, w.ne[0]);
    copied_(host_, first, static_cast<size_t>(last - first));
}

const unsigned char* PackedWeights::get(const GemmKernel& kernel, const dwell_tensor& w,
                                        ThreadPool& pool) {
    const uint64_t fp = fingerprint(w);
    std::lock_guard lock(mutex_);
    Entry& e = entries_[{w.data, &kernel}];
    if (e.data == nullptr || e.k != w.ne[0] || e.n != w.ne[1] || e.row_stride != w.nb[1] ||
        e.fingerprint != fp) {
        e.data = pack_weight(kernel, w, pool);
        e.k = w.ne[0];
        e.n = w.ne[1];
        e.row_stride = w.nb[1];
        e.fingerprint = fp;
        e.size = packed_size(kernel, e.k, e.n);
        note_copied(w);
    }
    return e.data.get();
}

const unsigned char* PackedWeights::get_sparse(const SparseKernel& kernel, const dwell_tensor& w,
                                               ThreadPool& pool) {
    const uint64_t fp = fingerprint(w);
    std::lock_guard lock(mutex_);
    Entry& e = entries_[{w.data, &kernel}];
    if (e.data == nullptr || e.k != w.ne[0] || e.n != w.ne[1] || e.row_stride != w.nb[1] ||
        e.fingerprint != fp) {
        const int64_t k = w.ne[0], n = w.ne[1];
        const size_t size = sparse_layout_bytes(kernel, k, n);
        e.data = make_aligned_bytes(size);
        const int64_t tiles = sparse_padded_rows(kernel, n) / kernel.rows_per_tile;
        unsigned char* out = e.data.get();
        pool.parallel_for(tiles, [&](int64_t begin, int64_t end) {
            sparse_pack_tiles(kernel, row_at(w, 0), static_cast<size_t>(w.nb[1]), k, n, begin, end,
                              out);
        });
        e.k = k;
        e.n = n;
        e.row_stride = w.nb[1];
        e.fingerprint = fp;
        e.size = size;
        // One layout per weight: drop the blocked copies a dense matmul made.
        for (auto it = entries_.begin(); it != entries_.end();) {
            if (it->first.first == w.data && it->first.second != &kernel) {
                it = entries_.erase(it);
            } else {
                ++it;
            }
        }
        note_copied(w);
    }
    return e.data.get();
}

void PackedWeights::release(const void* data, size_t bytes) {
    const auto* begin = static_cast<const unsigned char*>(data);
    std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
        const auto* p = static_cast<const unsigned char*>(it->first.first);
        if (p >= begin && p < begin + bytes) {
            it = entries_.erase(it);
        } else {
            ++it;
        }
    }
}

size_t PackedWeights::bytes() const {
    std::lock_guard lock(mutex_);
    size_t total = 0;
    for (const auto& [key, e] : entries_) total += e.size;
    return total;
}

void PackedWeights::clear() {
    std::lock_guard lock(mutex_);
    entries_.clear();
}

}  // namespace dwell::cpu
