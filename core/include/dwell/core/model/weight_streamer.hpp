// Weights that live in a bounded set of memory-pool buffers instead of the
// whole model file: `[memory] weights = "stream"` (and "load", which is the
// same with every layer pinned).
//
// The model's tensors are grouped into units: the token embedding, one unit
// per layer ("blk.N.*"), and the head (everything else: output norm and
// projection). Pinned units are read once and stay; the others share slots
// of the largest unit's size. Before the scheduler runs the nodes that read a
// unit, run() acquires it (reading it on demand if the prefetch thread has
// not), points the graph's weight tensors at it, and asks for the next
// `prefetch` units, in model order, to be read meanwhile. A slot is reused
// for the least recently computed unit; units read ahead and not yet
// computed are kept unless a demand read has no other slot.
//
// Reads bypass the page cache (O_DIRECT, else posix_fadvise DONTNEED after
// each read) so the budget is the real footprint; zstd-framed pack tensors
// are decompressed by the prefetch thread; a pack tensor's checksum is
// verified the first time it is read.
//
// Mixture-of-experts models (every layer's ffn_{gate,up,down}_exps stored
// raw) stream experts, not layers: the shared weights (embedding,
// attention, norms, routers, head) are all pinned, and each expert of each
// layer (its three slices) is a unit of an ExpertCache (expert_cache.hpp)
// that takes the rest of the budget, at least one slot per expert of a
// layer so any batch's experts of one layer fit. EXPERT_MATMUL sees the
// cache without an ABI change: run() stops before a layer's first
// EXPERT_MATMUL (its TOPK has run), makes the chosen experts resident,
// points the layer's three expert tensors in the C view at the cache region
// (data = region + part offset, nb[2] = slot stride, ne[2] = slots) and the
// ids those nodes read at a copy holding slot indices, runs the layer's
// EXPERT_MATMULs, and puts the view back. Then, with layer l's router input
// still at hand, it predicts layer l+1's experts by applying l+1's router
// (kept in f32) to it and queues the top k + margin of them for reading
// while layer l+1's attention computes. A graph whose expert ids feed
// other nodes among the EXPERT_MATMULs runs those nodes with the original
// view. zstd-framed expert tensors keep layer streaming (an expert is not
// a range of frames).
//
// Streamed tensors carry DWELL_TENSOR_VOLATILE: their address holds another
// layer later, so backends must not cache copies derived from them.
//
// Thread-safety: run() and stats() may be called from several threads
// (sessions sharing a model); one internal thread reads ahead.
// Ownership: owned by its Model; borrows the source and the pool, which
// must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/graph/graph.hpp"
#include "dwell/core/memory/memory_pool.hpp"
#include "dwell/core/model/load_progress.hpp"
#include "dwell/core/model/model_source.hpp"

namespace dwell {

struct WeightStreamOptions {
    bool pin_all = false;       // "load": everything resident, nothing streamed
    uint64_t budget_bytes = 0;  // stream: bytes of weight buffers, pinned + slots
    std::vector<int32_t> pin_layers;
    bool pin_auto = true;  // pin more units while the budget allows
    int32_t prefetch = 2;  // units read ahead of the one computing
    // MoE: experts predicted for the next layer beyond the k it uses, and
    // the threads that read experts (demand misses in parallel).
    int32_t expert_margin = 0;
    int32_t expert_readers = 4;
    // Told how far reading the pinned weights has come (MiB done of total),
    // on the constructing thread; hosts draw it (a terminal progress bar).
    LoadProgress progress;
};

struct WeightStreamStats {
    uint64_t bytes_read = 0;          // from the file, since creation
    uint64_t bytes_decompressed = 0;  // zstd output
    uint64_t unit_reads = 0;          // units read into a slot (demand + prefetch)
    uint64_t demand_reads = 0;        // of which the computing thread had to ask for
    uint64_t acquires = 0;            // units acquired for computing
    double wait_seconds = 0;          // computing threads blocked on a unit
    double compute_seconds = 0;       // running nodes whose weights were resident
    double read_seconds = 0;          // the prefetch thread reading
    double decompress_seconds = 0;    // the prefetch thread decompressing
    uint64_t resident_bytes = 0;      // weight buffers held (pinned + slots): the peak too
    uint64_t pinned_bytes = 0;
    uint64_t streamed_bytes = 0;  // raw bytes of the units not pinned (read per pass)
    int32_t units = 0;
    int32_t pinned_units = 0;
    int32_t slots = 0;
    int32_t prefetch = 0;  // effective read-ahead (fewer than asked if slots are short)
    bool direct_io = false;

    // Mixture-of-experts streaming (moe_layers > 0); counts since creation.
    int32_t moe_layers = 0;
    int64_t n_expert = 0;
    int64_t expert_slots = 0;        // cache slots, one expert each
    uint64_t expert_slot_bytes = 0;  // its three slices, aligned
    int32_t expert_readers = 0;
    int32_t expert_margin = 0;          // predicted beyond the k used
    uint64_t experts_needed = 0;        // (layer, expert) pairs computed
    uint64_t expert_hits = 0;           // of which were in the cache (or being read)
    uint64_t expert_prefetch_hits = 0;  // of the hits, read by the prefetcher
    uint64_t expert_misses = 0;         // of which were read on demand
    uint64_t expert_prefetches = 0;     // experts the prefetcher queued
    // Needed experts that were in the prediction for their layer, resident
    // or not: the predictor's recall, apart from what the cache already had.
    uint64_t experts_predicted = 0;
    uint64_t experts_predictable = 0;  // needed experts of layers with a prediction
    uint64_t expert_bytes_read = 0;    // included in bytes_read
    double expert_wait_seconds = 0;    // included in wait_seconds
};

// One MoE layer's routing as run() saw it: the experts the batch chose
// (ascending) and the ones it predicted for the next MoE layer (most likely
// first; empty for the last layer).
struct ExpertRouting {
    int32_t moe_layer = 0;  // index among the MoE layers
    std::vector<int32_t> needed;
    std::vector<int32_t> predicted_next;
};

class DWELL_CORE_API WeightStreamer {
public:
    // `names`: the tensors the model binds. Throws dwell::Error with one line
    // when the budget cannot hold the largest unit (plus the pinned ones)
    // or a pinned layer does not exist; reads the pinned units.
    WeightStreamer(const ModelSource& source, const std::vector<std::string>& names,
                   const WeightStreamOptions& options, MemoryPool& pool);
    ~WeightStreamer();
    WeightStreamer(const WeightStreamer&) = delete;
    WeightStreamer& operator=(const WeightStreamer&) = delete;

    // Runs nodes [first, end) of `graph` through compute(a, b) in segments
    // whose weights are resident, patching the data pointers of `cg` (the
    // graph's C view). Throws dwell::Error naming the tensor when a read fails.
    void run(const Graph& graph, const dwell_graph& cg, int32_t first, int32_t end,
             const std::function<void(int32_t, int32_t)>& compute);

    // Whether `name` is one of the streamer's tensors.
    bool holds(const std::string& name) const;
    // The order in which units were read into slots, as "unit name" strings
    // (for tests of eviction and prefetch order); kept for the last 4096.
    std::vector<std::string> read_log() const;
    std::vector<std::string> unit_names() const;
    // MoE streaming: the routing of the last 65536 MoE layers computed, and
    // the expert reads queued ("moe layer:expert"), in slot-assignment
    // order, for tests of the cache's policy.
    std::vector<ExpertRouting> expert_routing() const;
    std::vector<std::string> expert_read_log() const;
    WeightStreamStats stats() const;
    // One line for the log: units, pinned, slots, read-ahead, I/O mode.
    std::string describe() const;

private:
    struct DWELL_CORE_LOCAL Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dwell
