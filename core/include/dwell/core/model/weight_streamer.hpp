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
    WeightStreamStats stats() const;
    // One line for the log: units, pinned, slots, read-ahead, I/O mode.
    std::string describe() const;

private:
    struct DWELL_CORE_LOCAL Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dwell
