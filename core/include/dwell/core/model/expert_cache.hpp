// The expert cache of a streamed mixture-of-experts model: one contiguous
// region of equal slots, each holding one expert of one layer (its gate, up
// and down slices, each aligned for direct I/O), read from the model file by
// a few reader threads.
//
// Eviction: least recently used, with two protections. An expert the node
// being computed needs is held (refs > 0) and never evicted; an expert the
// prefetcher read for the next layer and that layer has not consumed yet
// ("pending") is never evicted either. When layer l acquires its experts,
// the pending experts of layer l it did not choose (mispredictions) lose
// their protection and age like the rest. Why LRU: routing of one token
// correlates with the routing of the tokens just before it (the same
// topic, the same experts), and the cache holds several tokens' worth of
// every layer's experts, so recency is the best cheap predictor of reuse;
// the cost of every miss is the same (experts are equal in size), so a
// cost-aware policy has nothing to weigh, and frequency counts adapt
// slowly to a change of topic. The policy is a pure function of the order
// of acquire() and prefetch() calls, never of read timing: a slot is chosen
// when its read is queued, and a victim still being read is waited for (or,
// when its read has not started, cancelled), so hit counts are
// deterministic for a given routing.
//
// Slot choice: the lowest free slot, else the unprotected slot whose expert
// was used (or prefetched) longest ago.
//
// Thread-safety: every public member may be called from any thread; the
// caller serialises acquire/prefetch/release of one step (the streamer
// holds a lock across a layer's expert phase). Ownership: borrows the
// source's tensors and the pool, which must outlive the cache.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/memory/memory_pool.hpp"
#include "dwell/core/model/model_source.hpp"

namespace dwell {

// One MoE layer's expert tensors, each [K, N, E] stored raw: gate, up, down.
struct ExpertLayerTensors {
    int32_t layer = 0;
    std::array<const SourceTensor*, 3> tensors{};
};

struct ExpertCacheStats {
    uint64_t needed = 0;         // experts the computing layers asked for
    uint64_t hits = 0;           // of which were resident (or being read) already
    uint64_t prefetch_hits = 0;  // of the hits, read by the prefetcher and not used since
    uint64_t misses = 0;         // of which had to be read on demand
    uint64_t prefetches = 0;     // experts the prefetcher queued
    uint64_t cancelled = 0;      // prefetches dropped before their read started
    uint64_t reads = 0;          // expert reads completed
    uint64_t bytes_read = 0;     // from the file
    double wait_seconds = 0;     // acquire() blocked on reads
    double read_seconds = 0;     // reader threads reading (summed over threads)
};

class DWELL_CORE_API ExpertCache {
public:
    // Bytes of one slot for `layers` (the largest slices, each part padded
    // for direct I/O).
    static uint64_t slot_bytes(const std::vector<ExpertLayerTensors>& layers);

    // `slots` slots (>= the experts per layer); `readers` threads. Opens
    // `path` for reading (O_DIRECT where the file system takes it).
    ExpertCache(const std::string& path, std::vector<ExpertLayerTensors> layers, int64_t n_expert,
                int64_t slots, int32_t readers, MemoryPool& pool);
    ~ExpertCache();
    ExpertCache(const ExpertCache&) = delete;
    ExpertCache& operator=(const ExpertCache&) = delete;

    // Makes experts `needed` (distinct) of MoE layer index `li` resident,
    // held until release(); returns their slots, in the same order. Throws
    // dwell::Error with one line when a read failed (nothing stays held).
    std::vector<int32_t> acquire(int32_t li, const std::vector<int32_t>& needed);
    void release(int32_t li, const std::vector<int32_t>& needed);
    // Queues reads of `predicted` experts of layer `li`, most likely first,
    // while slots without protection remain; returns how many it queued.
    int32_t prefetch(int32_t li, const std::vector<int32_t>& predicted);

    // The region's slot `s` starts at base() + s * stride(); part p (0 gate,
    // 1 up, 2 down) of a slot at part_offset(p).
    uint8_t* base() const;
    uint64_t stride() const;
    uint64_t part_offset(int p) const;
    int64_t slots() const;
    int32_t readers() const;
    bool direct_io() const;
    uint64_t region_bytes() const;

    ExpertCacheStats stats() const;
    // "L:E" (MoE layer index, expert) per read queued, in the order the
    // slots were assigned (deterministic); the last 4096.
    std::vector<std::string> read_log() const;

private:
    struct DWELL_CORE_LOCAL Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dwell
