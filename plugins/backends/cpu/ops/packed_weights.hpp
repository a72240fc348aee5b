// Weights repacked into a GemmKernel's layout, made on first use and kept for
// the life of the backend context. Keyed by the weight's address, kernel and
// shape, and checked against a hash of the row data's two ends, so a weight
// buffer freed and reused for another tensor at the same address is packed
// afresh rather than served stale.
//
// Only weights no node writes (graph leaves) may be cached: a tensor whose
// bytes change between calls would be served stale (see op_dispatch.cpp).
//
// Thread-safety: every member may be called from any thread; one mutex
// serialises them. The returned pointer stays valid until the
// cache is destroyed or clear()ed. Ownership: the cache owns the packed
// copies; the caller keeps owning the source weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "dwell/tensor.h"
#include "host/thread_pool.hpp"
#include "simd/gemm_kernel.hpp"
#include "simd/sparse_matvec.hpp"

namespace dwell::cpu {

// 64-byte aligned bytes. Large buffers (packed weights) are mapped on their
// own, 2 MiB aligned and marked for transparent huge pages: decode streams
// every weight once per token, and 4 KiB pages would cost a TLB miss every
// 4 KiB of it.
struct AlignedFree {
    void* map_base = nullptr;  // set for mapped buffers, with map_bytes
    size_t map_bytes = 0;
    void operator()(void* p) const;
};
using AlignedBytes = std::unique_ptr<unsigned char[], AlignedFree>;
AlignedBytes make_aligned_bytes(size_t n);

// Packs all rows of w (a [k, n] weight of kernel.weight's dtype) into
// kernel's layout: ceil(n / R) blocks of kernel.block_bytes(k) bytes.
AlignedBytes pack_weight(const GemmKernel& kernel, const dwell_tensor& w, ThreadPool& pool);

class PackedWeights {
public:
    // Told the byte range of every weight once it is packed, so the host can
    // stop holding the original in memory (dwell_host_services.weights_copied).
    using CopiedFn = void (*)(void* host, const void* data, size_t bytes);

    PackedWeights() = default;
    PackedWeights(CopiedFn copied, void* host) : copied_(copied), host_(host) {}

    // The packed form of w for kernel, packing it first if needed.
    const unsigned char* get(const GemmKernel& kernel, const dwell_tensor& w, ThreadPool& pool);
    // The column layout of w for a sparse kernel (sparse_matvec.hpp), made
    // first if needed. It replaces any blocked copy of w: a weight fed by
    // SPARSIFY is kept once, in this layout.
    const unsigned char* get_sparse(const SparseKernel& kernel, const dwell_tensor& w,
                                    ThreadPool& pool);

    // Drops the packed copies of weights whose data start in
    // [data, data + bytes): the host no longer uses them.
    void release(const void* data, size_t bytes);

    // Bytes held by packed copies.
    size_t bytes() const;
    void clear();

private:
    struct Entry {
        int64_t k = 0;
        int64_t n = 0;
        uint64_t row_stride = 0;
        uint64_t fingerprint = 0;
        size_t size = 0;
        AlignedBytes data;
    };
    CopiedFn copied_ = nullptr;
    void* host_ = nullptr;
    mutable std::mutex mutex_;
    // Keyed by the weight's data and the kernel (a GemmKernel or a
    // SparseKernel) whose layout the entry holds.
    std::map<std::pair<const void*, const void*>, Entry> entries_;
    void note_copied(const dwell_tensor& w) const;
};

}  // namespace dwell::cpu
