#include "dwell/core/model/weight_streamer.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/model/expert_cache.hpp"
#include "dwell/core/platform/posix_file.hpp"

namespace dwell {

namespace {

// O_DIRECT wants file offsets, lengths and buffers aligned to the logical
// block size; 4 KiB covers every common device.
constexpr uint64_t kIoAlign = 4096;
constexpr size_t kReadLogMax = 4096;
// Compressed bytes read per request while decompressing.
constexpr uint64_t kStageChunk = uint64_t{4} << 20;

uint64_t align_up(uint64_t v, uint64_t a) {
    return (v + a - 1) / a * a;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "blk.N." -> N; -1 for the embedding, -3 for RoPE frequency factors, -2
// for everything else (the head).
int32_t layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) == 0) {
        int32_t n = 0;
        size_t i = 4;
        for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && n < (1 << 24); ++i)
            n = n * 10 + (name[i] - '0');
        if (i > 4 && i < name.size() && name[i] == '.') return n;
    }
    // Every layer's ROPE reads them: in the head's unit, each layer would
    // need two units at once. Their own unit is tiny and always pinned.
    if (name.rfind("rope_freqs", 0) == 0 || name.rfind("rope_factors", 0) == 0) return -3;
    return name.rfind("token_embd", 0) == 0 ? -1 : -2;
}

// "blk.N.ffn_gate_exps.weight" -> 0, up -> 1, down -> 2; -1 otherwise.
int expert_part_of(const std::string& name) {
    static constexpr const char* kParts[3] = {".ffn_gate_exps.weight", ".ffn_up_exps.weight",
                                              ".ffn_down_exps.weight"};
    for (int p = 0; p < 3; ++p) {
        const std::string suffix = kParts[p];
        if (name.size() > suffix.size() &&
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
            return p;
    }
    return -1;
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalise
            exp = 127 - 15 + 1;
            while ((mant & 0x400u) == 0) {
                mant <<= 1;
                --exp;
            }
            bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

constexpr size_t kRoutingLogMax = 65536;

struct ZstdDCtxFree {
    void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

}  // namespace

struct WeightStreamer::Impl {
    struct Place {
        const SourceTensor* tensor;
        uint64_t region = 0;  // offset of its region in the unit's buffer
        uint64_t data = 0;    // offset of its first byte in the unit's buffer
        bool verified = false;
    };
    enum class State { Absent, Queued, Loading, Resident };
    struct Unit {
        std::string name;
        int32_t layer = -2;
        std::vector<Place> places;
        uint64_t bytes = 0;  // buffer bytes (regions)
        uint64_t raw = 0;    // tensor bytes
        bool pinned = false;
        PoolBuffer own;  // pinned units
        int32_t slot = -1;
        State state = State::Absent;
        bool demand = false;   // a computing thread waits for it
        bool pending = false;  // read ahead, not computed yet
        int32_t refs = 0;
        uint64_t last_used = 0;
        std::string error;  // a failed read, for the next acquire
        dwell_status error_code = DWELL_OK;
    };
    struct Slot {
        PoolBuffer buf;
        int32_t unit = -1;
    };

    const ModelSource& source;
    std::string path;
    FileDescriptor fd;
    bool direct = false;
    std::vector<Unit> units;  // model order: embedding, layers, head
    std::unordered_map<std::string, std::pair<int32_t, size_t>> where;  // name -> unit, place
    std::vector<Slot> slots;
    int32_t prefetch = 0;
    PoolBuffer staging;  // compressed frames, two chunks
    std::unique_ptr<ZSTD_DCtx, ZstdDCtxFree> dctx;

    mutable std::mutex mutex;
    std::condition_variable cv;
    std::deque<int32_t> queue;
    std::deque<std::string> read_log;
    uint64_t clock = 0;
    bool stop = false;
    WeightStreamStats stats;
    std::thread reader;

    // Mixture-of-experts streaming (empty when the model has none, or when
    // everything is pinned).
    struct MoeLayer {
        ExpertLayerTensors tensors;
        std::string router;             // "blk.N.ffn_gate_inp.weight"
        std::vector<float> router_f32;  // [n_embd, n_expert] rows, for prediction
        int64_t n_embd = 0;
    };
    std::vector<MoeLayer> moe;
    std::unordered_map<std::string, std::pair<int32_t, int>> expert_tensors;  // -> layer, part
    int64_t n_expert = 0;
    int32_t expert_margin = 0;
    std::unique_ptr<ExpertCache> experts;
    std::mutex expert_phase;                          // one layer's experts held at a time
    std::deque<ExpertRouting> routing;                // under `mutex`
    std::vector<std::vector<int32_t>> predicted_for;  // per MoE layer, under expert_phase

    // One MoE layer's EXPERT_MATMULs in a run() range.
    struct ExpertPhase {
        int32_t li = -1;
        int32_t first = -1, last = -1;             // nodes
        std::vector<std::pair<int32_t, int>> ems;  // node, part
        int32_t ids = -1;                          // storage of the ids they read
        int32_t x = -1;                            // the router's input, -1: unknown
    };
    void find_moe_tensors(const std::vector<const SourceTensor*>& tensors);
    void plan_experts(const WeightStreamOptions& options, MemoryPool& pool);
    void keep_routers_f32();
    std::vector<ExpertPhase> expert_phases(const Graph& graph, int32_t first, int32_t end) const;
    std::vector<int32_t> predict(int32_t li, const dwell_tensor& x, int32_t k) const;
    void run_expert_phase(const Graph& graph, const dwell_graph& cg, const ExpertPhase& ph,
                          const std::function<void(int32_t, int32_t)>& compute);
    void compute_with_units(const Graph& graph, const dwell_graph& cg, int32_t a, int32_t b,
                            const std::vector<int32_t>& seg,
                            const std::function<void(int32_t, int32_t)>& compute);

    Impl(const ModelSource& src, MemoryPool& pool, const std::vector<std::string>& names,
         const WeightStreamOptions& options);
    ~Impl() {
        {
            std::lock_guard lock(mutex);
            stop = true;
        }
        cv.notify_all();
        if (reader.joinable()) reader.join();
    }

    void open_file();
    void layout(Unit& u) const;
    // plan()'s steps, in order.
    void plan(const WeightStreamOptions& options, MemoryPool& pool);
    void allocate_staging(MemoryPool& pool);
    void plan_slots(const WeightStreamOptions& options, MemoryPool& pool);
    uint64_t pin_listed_layers(const std::vector<int32_t>& layers);
    void check_budget_holds_a_layer(uint64_t budget_bytes, uint64_t budget, uint64_t pinned) const;
    uint64_t pin_what_fits(const WeightStreamOptions& options, uint64_t budget, uint64_t pinned);
    void allocate_slots(uint64_t n_slots, const WeightStreamOptions& options, MemoryPool& pool);
    void read_pinned_units(const LoadProgress& progress, MemoryPool& pool);
    void fill_stats();
    const Unit* largest_unpinned() const;
    uint64_t count_unpinned() const;

    // One read of read_unit(): a raw tensor whole, or a chunk of whole
    // frames of a compressed one.
    struct ReadJob {
        Place* place;
        uint64_t offset, bytes;
        size_t f0 = 0, f1 = 0;  // frames, for a compressed chunk
        uint64_t raw0 = 0;
        int64_t chunk = -1;  // index among the compressed chunks; -1: raw
    };
    // What read_unit()'s I/O thread and its decompressing thread share.
    struct ReadPipeline {
        std::mutex m;
        std::condition_variable cv;
        size_t n_read = 0;       // jobs read
        int64_t n_unpacked = 0;  // chunks decompressed
        bool abort = false;
        std::exception_ptr io_error;
        // One more job read or chunk decompressed: the other side may go on.
        template <typename N>
        void advance(N& counter) {
            std::lock_guard lock(m);
            ++counter;
            cv.notify_all();
        }
    };
    // Runs `work`, adding the seconds it took to the stats' `timer`.
    template <typename F>
    void timed(double WeightStreamStats::*timer, F&& work) {
        const auto t0 = Clock::now();
        work();
        const double s = seconds_since(t0);
        std::lock_guard lock(mutex);
        stats.*timer += s;
    }
    void read_unit(Unit& u, uint8_t* base);
    std::vector<ReadJob> read_jobs_of(Unit& u) const;
    uint8_t* stage(int64_t chunk);
    void read_jobs(const std::vector<ReadJob>& jobs, uint8_t* base, ReadPipeline& pipe);
    void decompress_jobs(const std::vector<ReadJob>& jobs, uint8_t* base, ReadPipeline& pipe);
    void verify_checksums(Unit& u, const uint8_t* base) const;
    void read_range(const SourceTensor& t, uint64_t offset, uint64_t bytes, uint8_t* dst);
    void decompress(const SourceTensor& t, const uint8_t* src, size_t f0, size_t f1, uint64_t raw0,
                    uint8_t* region);
    void reader_loop();
    int32_t pick_slot(bool demand) const;
    void request_ahead(int32_t u);
    uint8_t* acquire(int32_t u);
    void release(int32_t u);
    void units_of_node(const Graph& graph, int32_t node, std::vector<int32_t>& out) const;
};

WeightStreamer::Impl::Impl(const ModelSource& src, MemoryPool& pool,
                           const std::vector<std::string>& names,
                           const WeightStreamOptions& options)
    : source(src), path(src.path().string()) {
    // Units in model order: embedding (-1), layers ascending, head (-2 last).
    std::vector<const SourceTensor*> tensors;
    for (const std::string& n : names) {
        const SourceTensor* t = src.find_tensor(n);
        if (t == nullptr) throw Error(DWELL_ERR_INTERNAL, path + ": no tensor '" + n + "'");
        tensors.push_back(t);
    }
    if (!options.pin_all) find_moe_tensors(tensors);
    if (!moe.empty()) {
        std::erase_if(tensors,
                      [&](const SourceTensor* t) { return expert_tensors.count(t->name) != 0; });
        expert_margin = std::max(options.expert_margin, 0);
    }
    const auto rank = [](int32_t layer) {
        return layer == -3   ? int64_t{-2}
               : layer == -1 ? int64_t{-1}
               : layer == -2 ? int64_t{1} << 40
                             : int64_t{layer};
    };
    std::stable_sort(tensors.begin(), tensors.end(), [&](const auto* a, const auto* b) {
        return rank(layer_of(a->name)) < rank(layer_of(b->name));
    });
    for (const SourceTensor* t : tensors) {
        const int32_t layer = layer_of(t->name);
        if (units.empty() || units.back().layer != layer) {
            Unit u;
            u.layer = layer;
            u.name = layer == -1   ? "embedding"
                     : layer == -2 ? "head"
                     : layer == -3 ? "rope factors"
                                   : "layer " + std::to_string(layer);
            units.push_back(std::move(u));
        }
        units.back().places.push_back({t});
    }
    for (size_t i = 0; i < units.size(); ++i) {
        layout(units[i]);
        for (size_t p = 0; p < units[i].places.size(); ++p)
            where[units[i].places[p].tensor->name] = {static_cast<int32_t>(i), p};
    }
    open_file();
    plan(options, pool);
    if (!slots.empty()) reader = std::thread([this] { reader_loop(); });
}

// The MoE layers: each with its three expert tensors [K, N, E], stored raw
// (a zstd-framed one keeps the whole model on layer streaming).
void WeightStreamer::Impl::find_moe_tensors(const std::vector<const SourceTensor*>& tensors) {
    std::map<int32_t, MoeLayer> by_layer;
    std::map<int32_t, int> parts;
    for (const SourceTensor* t : tensors) {
        const int p = expert_part_of(t->name);
        const int32_t layer = layer_of(t->name);
        if (p < 0 || layer < 0) continue;
        if (!t->stored.frame_sizes.empty() || t->n_dims != 3 || t->ne[2] < 1) {
            spdlog::info("{}: '{}' is {}: streaming whole layers, not experts", path, t->name,
                         t->stored.frame_sizes.empty() ? "not [K, N, E]" : "zstd-framed");
            return;
        }
        MoeLayer& l = by_layer[layer];
        l.tensors.layer = layer;
        l.tensors.tensors[static_cast<size_t>(p)] = t;
        parts[layer] |= 1 << p;
    }
    for (auto& [layer, l] : by_layer) {
        const int64_t e = l.tensors.tensors[0] ? l.tensors.tensors[0]->ne[2] : 0;
        if (parts[layer] != 7 || (n_expert != 0 && e != n_expert) ||
            l.tensors.tensors[1]->ne[2] != e || l.tensors.tensors[2]->ne[2] != e) {
            spdlog::info("{}: layer {}'s expert tensors do not match: streaming whole layers", path,
                         layer);
            return;
        }
        n_expert = e;
        l.router = "blk." + std::to_string(layer) + ".ffn_gate_inp.weight";
    }
    for (auto& [layer, l] : by_layer) {
        const auto li = static_cast<int32_t>(moe.size());
        for (int p = 0; p < 3; ++p)
            expert_tensors[l.tensors.tensors[static_cast<size_t>(p)]->name] = {li, p};
        moe.push_back(std::move(l));
    }
}

void WeightStreamer::Impl::open_file() {
    int f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    direct = f >= 0;
    if (f < 0) f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // e.g. tmpfs refuses O_DIRECT
    if (f < 0) throw_io(path, "cannot open for streaming", errno);
    fd = FileDescriptor(f);
}

// Each tensor gets a region aligned for direct I/O. A raw tensor is read
// with the file's alignment, so its data starts `offset % 4096` into its
// region; a compressed one is decompressed to the region's start.
void WeightStreamer::Impl::layout(Unit& u) const {
    uint64_t at = 0;
    for (Place& p : u.places) {
        const SourceTensor& t = *p.tensor;
        p.region = at;
        if (t.stored.frame_sizes.empty()) {
            const uint64_t lead = t.stored.offset % kIoAlign;
            p.data = at + lead;
            at += align_up(lead + t.size, kIoAlign);
        } else {
            p.data = at;
            at += align_up(t.size, kIoAlign);
        }
        u.raw += t.size;
    }
    u.bytes = at;
}

void WeightStreamer::Impl::plan(const WeightStreamOptions& options, MemoryPool& pool) {
    allocate_staging(pool);
    if (options.pin_all) {
        for (Unit& u : units) u.pinned = true;
    } else if (!moe.empty()) {
        plan_experts(options, pool);
    } else {
        plan_slots(options, pool);
    }
    read_pinned_units(options.progress, pool);
    if (experts) keep_routers_f32();
    if (slots.empty()) {
        staging = PoolBuffer();  // nothing is read after this
        dctx.reset();
    }
    fill_stats();
}

// Every unit (the shared weights) pinned, the rest of the budget expert
// cache slots: at least one per expert of a layer, at most one per expert.
void WeightStreamer::Impl::plan_experts(const WeightStreamOptions& options, MemoryPool& pool) {
    if (options.budget_bytes == 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    path +
                        ": streaming weights needs a weight budget: set [memory] "
                        "weight_budget_mb in the manifest or --weight-budget");
    }
    uint64_t pinned = 0;
    for (Unit& u : units) {
        u.pinned = true;
        pinned += u.bytes;
    }
    std::vector<ExpertLayerTensors> layers;
    for (const MoeLayer& l : moe) layers.push_back(l.tensors);
    const uint64_t slot = ExpertCache::slot_bytes(layers);
    const uint64_t fixed = pinned + staging.size();
    const uint64_t need = fixed + static_cast<uint64_t>(n_expert) * slot;
    if (options.budget_bytes < need) {
        throw Error(DWELL_ERR_OUT_OF_MEMORY,
                    path + ": the weight budget " + format_bytes(options.budget_bytes) +
                        " cannot hold the shared weights (" + format_bytes(fixed) +
                        ", pinned) plus an expert cache of one slot per expert of a layer (" +
                        std::to_string(n_expert) + " x " + format_bytes(slot) +
                        "); raise --weight-budget / [memory] weight_budget_mb to at least " +
                        std::to_string((need + (1 << 20) - 1) >> 20) + " MiB");
    }
    const auto total = static_cast<uint64_t>(n_expert) * moe.size();
    // The pool hands out whole pages: the region's rounding counts too.
    const uint64_t page = pool.page_size();
    uint64_t n_slots = std::min(total, (options.budget_bytes - fixed) / slot);
    while (n_slots > static_cast<uint64_t>(n_expert) &&
           align_up(n_slots * slot, page) > options.budget_bytes - fixed)
        --n_slots;
    experts = std::make_unique<ExpertCache>(path, std::move(layers), n_expert,
                                            static_cast<int64_t>(n_slots),
                                            std::max(options.expert_readers, 1), pool);
}

// The routers in f32 for predicting the next layer's experts: read once
// here (they are small); a router of another type predicts nothing.
void WeightStreamer::Impl::keep_routers_f32() {
    for (MoeLayer& l : moe) {
        auto it = where.find(l.router);
        if (it == where.end()) continue;
        const Unit& u = units[static_cast<size_t>(it->second.first)];
        const Place& p = u.places[it->second.second];
        const SourceTensor& t = *p.tensor;
        if (t.n_dims != 2 || t.ne[1] != n_expert) continue;
        const uint8_t* src = static_cast<const uint8_t*>(u.own.data()) + p.data;
        const auto n = static_cast<size_t>(t.ne[0] * t.ne[1]);
        l.n_embd = t.ne[0];
        l.router_f32.resize(n);
        if (t.dtype == DWELL_F32) {
            std::memcpy(l.router_f32.data(), src, n * sizeof(float));
        } else if (t.dtype == DWELL_F16 || t.dtype == DWELL_BF16) {
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                if (t.dtype == DWELL_F16) {
                    l.router_f32[i] = f16_to_f32(h);
                } else {
                    const uint32_t bits = uint32_t{h} << 16;
                    std::memcpy(&l.router_f32[i], &bits, 4);
                }
            }
        } else {
            spdlog::info("{}: router '{}' is {}: no prefetch for its layer", path, l.router,
                         dwell_dtype_name(t.dtype));
            l.router_f32.clear();
            l.n_embd = 0;
        }
    }
}

// Compressed frames pass through a staging buffer of a few MiB, which the
// weight budget includes.
void WeightStreamer::Impl::allocate_staging(MemoryPool& pool) {
    uint64_t frame_max = 0, stored_max = 0;
    for (const Unit& u : units) {
        for (const Place& p : u.places) {
            if (p.tensor->stored.frame_sizes.empty()) continue;
            stored_max = std::max(stored_max, p.tensor->stored.bytes);
            for (const uint64_t f : p.tensor->stored.frame_sizes)
                frame_max = std::max(frame_max, f);
        }
    }
    if (frame_max > 0) {
        // Two halves: one being read while the other is decompressed. A
        // chunk is whole frames of one tensor, up to kStageChunk bytes.
        const uint64_t chunk = std::max(frame_max, std::min(kStageChunk, stored_max));
        staging = pool.allocate(2 * align_up(chunk + 2 * kIoAlign, kIoAlign),
                                "compressed-weight staging for " + path, MemoryUse::Weights);
    }
}

const WeightStreamer::Impl::Unit* WeightStreamer::Impl::largest_unpinned() const {
    const Unit* m = nullptr;
    for (const Unit& u : units)
        if (!u.pinned && (m == nullptr || u.bytes > m->bytes)) m = &u;
    return m;
}

uint64_t WeightStreamer::Impl::count_unpinned() const {
    return static_cast<uint64_t>(
        std::count_if(units.begin(), units.end(), [](const Unit& u) { return !u.pinned; }));
}

// Streaming within options.budget_bytes: the layers the manifest pins, then
// slots for the computing unit and the read-ahead, then more pinned units
// where the budget has room.
void WeightStreamer::Impl::plan_slots(const WeightStreamOptions& options, MemoryPool& pool) {
    if (options.budget_bytes == 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    path +
                        ": streaming weights needs a weight budget: set [memory] "
                        "weight_budget_mb in the manifest or --weight-budget");
    }
    const uint64_t budget =
        options.budget_bytes > staging.size() ? options.budget_bytes - staging.size() : 1;
    uint64_t pinned = pin_listed_layers(options.pin_layers);
    check_budget_holds_a_layer(options.budget_bytes, budget, pinned);
    const uint64_t n_slots = pin_what_fits(options, budget, pinned);
    allocate_slots(n_slots, options, pool);
}

// The RoPE factors' unit (every layer reads it) and the layers [memory]
// pin_layers names; returns their buffer bytes.
uint64_t WeightStreamer::Impl::pin_listed_layers(const std::vector<int32_t>& layers) {
    uint64_t pinned = 0;
    for (Unit& u : units) {
        if (u.layer != -3) continue;
        u.pinned = true;
        pinned += u.bytes;
    }
    int32_t max_layer = -1;
    for (const Unit& u : units) max_layer = std::max(max_layer, u.layer);
    for (const int32_t l : layers) {
        auto it =
            std::find_if(units.begin(), units.end(), [&](const Unit& u) { return u.layer == l; });
        if (it == units.end()) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        path + ": [memory] pin_layers names layer " + std::to_string(l) +
                            " but the model's layers are 0-" + std::to_string(max_layer));
        }
        if (!it->pinned) pinned += it->bytes;
        it->pinned = true;
    }
    return pinned;
}

// `budget` is what the staging buffer leaves of `budget_bytes`; besides
// `pinned` it must hold the largest unit that is streamed.
void WeightStreamer::Impl::check_budget_holds_a_layer(uint64_t budget_bytes, uint64_t budget,
                                                      uint64_t pinned) const {
    const Unit* big = largest_unpinned();
    if (big == nullptr) return;
    const std::string staged =
        staging ? " after " + format_bytes(staging.size()) + " of decompression staging" : "";
    if (budget < big->bytes) {
        throw Error(
            DWELL_ERR_OUT_OF_MEMORY,
            path + ": the weight budget " + format_bytes(budget_bytes) + staged +
                " is smaller than one layer (" + big->name + " needs " + format_bytes(big->bytes) +
                "); raise --weight-budget / [memory] "
                "weight_budget_mb to at least " +
                std::to_string((big->bytes + staging.size() + (1 << 20) - 1) >> 20) + " MiB");
    }
    if (pinned + big->bytes > budget) {
        throw Error(DWELL_ERR_OUT_OF_MEMORY,
                    path + ": the pinned layers take " + format_bytes(pinned) + " of the " +
                        format_bytes(budget_bytes) + " weight budget, leaving less than one " +
                        "layer (" + big->name + " needs " + format_bytes(big->bytes) +
                        "); pin fewer layers or raise the budget");
    }
}

// Slots for the computing unit and the read-ahead; then, with pin_auto,
// pins what else fits, largest first (each pinned byte is a byte not read
// per token), re-sizing the slots as the largest unpinned unit shrinks.
// Returns the number of slots, each the size of the largest unpinned unit.
uint64_t WeightStreamer::Impl::pin_what_fits(const WeightStreamOptions& options, uint64_t budget,
                                             uint64_t pinned) {
    const auto wanted = static_cast<uint64_t>(options.prefetch) + 1;
    for (;;) {
        const Unit* big = largest_unpinned();
        if (big == nullptr) return 0;
        // Without auto-pinning the whole rest of the budget is slots,
        // kept by least recent use.
        const uint64_t n_slots = std::min({options.pin_auto ? wanted : count_unpinned(),
                                           count_unpinned(), (budget - pinned) / big->bytes});
        if (!options.pin_auto) return n_slots;
        const uint64_t spare = budget - pinned - n_slots * big->bytes;
        Unit* pick = nullptr;
        for (Unit& u : units) {
            if (u.pinned || u.bytes > spare) continue;
            // Pinning the largest unit shrinks the slots: count that in.
            const bool shrinks = &u == big;
            if (shrinks || count_unpinned() > n_slots) {
                if (pick == nullptr || u.bytes > pick->bytes) pick = &u;
            }
        }
        if (pick == nullptr) return n_slots;
        pick->pinned = true;
        pinned += pick->bytes;
    }
}

void WeightStreamer::Impl::allocate_slots(uint64_t n_slots, const WeightStreamOptions& options,
                                          MemoryPool& pool) {
    const Unit* big = largest_unpinned();
    if (big == nullptr) return;
    slots.resize(n_slots);
    for (auto& s : slots) {
        s.buf = pool.allocate(big->bytes, "a streamed-weight slot of " + path, MemoryUse::Weights);
    }
    prefetch = std::min(static_cast<int32_t>(n_slots) - 1, options.prefetch);
    if (prefetch < options.prefetch) {
        spdlog::warn(
            "{}: the weight budget {} holds {} slot(s) of {}: reading {} layer(s) "
            "ahead instead of {}",
            path, format_bytes(options.budget_bytes), n_slots, format_bytes(big->bytes), prefetch,
            options.prefetch);
    }
}

// Pinned units: read now, for good.
void WeightStreamer::Impl::read_pinned_units(const LoadProgress& progress, MemoryPool& pool) {
    uint64_t pinned_total = 0;
    for (const Unit& u : units)
        if (u.pinned) pinned_total += u.raw;
    const auto report = [&](uint64_t done_bytes) {
        if (progress)
            progress("loading weights", static_cast<int64_t>(done_bytes >> 20),
                     static_cast<int64_t>(pinned_total >> 20));
    };
    report(0);
    uint64_t done = 0;
    for (Unit& u : units) {
        if (!u.pinned) continue;
        u.own = pool.allocate(u.bytes, "the pinned weights (" + u.name + ") of " + path,
                              MemoryUse::Weights);
        read_unit(u, static_cast<uint8_t*>(u.own.data()));
        if (!u.error.empty()) throw Error(u.error_code, u.error);
        u.state = State::Resident;
        done += u.raw;
        report(done);
    }
}

void WeightStreamer::Impl::fill_stats() {
    for (const Unit& u : units) {
        if (u.pinned) {
            ++stats.pinned_units;
            stats.pinned_bytes += u.bytes;
        } else {
            stats.streamed_bytes += u.raw;
        }
    }
    stats.units = static_cast<int32_t>(units.size());
    stats.slots = static_cast<int32_t>(slots.size());
    stats.prefetch = std::max(prefetch, 0);
    stats.direct_io = direct;
    stats.resident_bytes = stats.pinned_bytes;
    for (const Slot& s : slots) stats.resident_bytes += s.buf.size();
    stats.resident_bytes += staging.size();
    if (experts) {
        stats.moe_layers = static_cast<int32_t>(moe.size());
        stats.n_expert = n_expert;
        stats.expert_slots = experts->slots();
        stats.expert_slot_bytes = experts->stride();
        stats.expert_readers = experts->readers();
        stats.expert_margin = expert_margin;
        stats.resident_bytes += experts->region_bytes();
        stats.direct_io = experts->direct_io();
    }
}

void WeightStreamer::Impl::read_range(const SourceTensor& t, uint64_t offset, uint64_t bytes,
                                      uint8_t* dst) {
    const uint64_t lead = offset % kIoAlign;
    const uint64_t start = offset - lead;
    const uint64_t want = lead + bytes;
    const uint64_t total = align_up(want, kIoAlign);
    uint64_t done = 0;
    while (done < want) {
        const ssize_t n =
            ::pread(fd.get(), dst + done, total - done, static_cast<off_t>(start + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            if (direct && errno == EINVAL) {
                // The file system takes O_DIRECT at open but not for this
                // read: go on through the page cache, dropping what we read.
                FileDescriptor plain(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
                if (plain.get() < 0) throw_io(path, "cannot reopen for streaming", errno);
                fd = std::move(plain);
                direct = false;
                continue;
            }
            throw_io(path, "reading tensor '" + t.name + "'", errno);
        }
        if (n == 0) {
            throw Error(DWELL_ERR_CORRUPT,
                        path + ": tensor '" + t.name + "' [offset " + std::to_string(offset) +
                            ", " + std::to_string(bytes) +
                            " bytes] is cut short: the file ends at byte " +
                            std::to_string(start + done) +
                            " (was it truncated or replaced while the model was loaded?)");
        }
        done += static_cast<uint64_t>(n);
    }
    if (!direct)
        ::posix_fadvise(fd.get(), static_cast<off_t>(start), static_cast<off_t>(done),
                        POSIX_FADV_DONTNEED);
    std::lock_guard lock(mutex);
    stats.bytes_read += done;
}

// Decompresses frames [f0, f1) of `t`, which start at `src`, into its
// region at raw byte `raw0`.
void WeightStreamer::Impl::decompress(const SourceTensor& t, const uint8_t* src, size_t f0,
                                      size_t f1, uint64_t raw0, uint8_t* region) {
    if (!dctx) {
        dctx.reset(ZSTD_createDCtx());
        if (!dctx) throw Error(DWELL_ERR_OUT_OF_MEMORY, path + ": cannot create a zstd context");
    }
    const auto& frames = t.stored.frame_sizes;
    uint64_t raw = raw0;
    for (size_t i = f0; i < f1; ++i) {
        const uint64_t expect = std::min(t.stored.frame_raw, t.size - raw);
        const size_t n = ZSTD_decompressDCtx(dctx.get(), region + raw, expect, src, frames[i]);
        if (ZSTD_isError(n) || n != expect) {
            throw Error(DWELL_ERR_CORRUPT,
                        path + ": tensor '" + t.name + "': zstd frame " + std::to_string(i + 1) +
                            " of " + std::to_string(frames.size()) + " does not decompress" +
                            (ZSTD_isError(n) ? std::string(": ") + ZSTD_getErrorName(n)
                                             : " to " + std::to_string(expect) + " bytes"));
        }
        src += frames[i];
        raw += expect;
    }
    std::lock_guard lock(mutex);
    stats.bytes_decompressed += raw - raw0;
}

// Reads every tensor of `u` into `base`; a failure is left in u.error.
// Raw tensors are read straight into their regions; compressed ones in
// chunks of whole frames, each read by an I/O thread into one half of the
// staging buffer while this thread decompresses the chunk before it.
void WeightStreamer::Impl::read_unit(Unit& u, uint8_t* base) {
    try {
        const std::vector<ReadJob> jobs = read_jobs_of(u);
        ReadPipeline pipe;
        const bool compressed =
            std::any_of(jobs.begin(), jobs.end(), [](const ReadJob& j) { return j.chunk >= 0; });
        if (!compressed) {
            read_jobs(jobs, base, pipe);
        } else {
            std::thread reader_io([&] { read_jobs(jobs, base, pipe); });
            try {
                decompress_jobs(jobs, base, pipe);
            } catch (...) {
                {
                    std::lock_guard lock(pipe.m);
                    pipe.abort = true;
                    pipe.cv.notify_all();
                }
                reader_io.join();
                throw;
            }
            reader_io.join();
        }
        if (pipe.io_error) std::rethrow_exception(pipe.io_error);
        verify_checksums(u, base);
    } catch (const Error& e) {
        u.error = e.what();
        u.error_code = e.status();
    } catch (const std::exception& e) {
        u.error = path + ": reading " + u.name + ": " + e.what();
        u.error_code = DWELL_ERR_IO;
    }
}

// The reads of `u` in file order: a raw tensor in one, a compressed one in
// chunks of whole frames of up to kStageChunk bytes (one frame at least).
std::vector<WeightStreamer::Impl::ReadJob> WeightStreamer::Impl::read_jobs_of(Unit& u) const {
    std::vector<ReadJob> jobs;
    int64_t chunks = 0;
    for (Place& p : u.places) {
        const SourceTensor& t = *p.tensor;
        const auto& frames = t.stored.frame_sizes;
        if (frames.empty()) {
            jobs.push_back({&p, t.stored.offset, t.size});
            continue;
        }
        uint64_t at = t.stored.offset, raw = 0;
        for (size_t i = 0; i < frames.size();) {
            ReadJob j{&p, at, 0, i, i, raw, chunks++};
            while (j.f1 < frames.size() && (j.f1 == i || j.bytes + frames[j.f1] <= kStageChunk)) {
                j.bytes += frames[j.f1];
                raw += std::min(t.stored.frame_raw, t.size - raw);
                ++j.f1;
            }
            at += j.bytes;
            i = j.f1;
            jobs.push_back(j);
        }
    }
    return jobs;
}

uint8_t* WeightStreamer::Impl::stage(int64_t chunk) {
    const size_t half = staging.size() / 2;
    return static_cast<uint8_t*>(staging.data()) + static_cast<size_t>(chunk % 2) * half;
}

// The I/O side: every job in order, a compressed chunk only once the half
// of the staging buffer it goes to has been decompressed. A failure is left
// in pipe.io_error.
void WeightStreamer::Impl::read_jobs(const std::vector<ReadJob>& jobs, uint8_t* base,
                                     ReadPipeline& pipe) {
    try {
        for (const ReadJob& j : jobs) {
            uint8_t* dst = base + j.place->region;
            if (j.chunk >= 0) {
                std::unique_lock lock(pipe.m);
                pipe.cv.wait(lock, [&] { return pipe.abort || j.chunk < pipe.n_unpacked + 2; });
                if (pipe.abort) return;
                dst = stage(j.chunk);
            }
            timed(&WeightStreamStats::read_seconds,
                  [&] { read_range(*j.place->tensor, j.offset, j.bytes, dst); });
            pipe.advance(pipe.n_read);
        }
    } catch (...) {
        std::lock_guard lock(pipe.m);
        pipe.io_error = std::current_exception();
        pipe.cv.notify_all();
    }
}

// The decompressing side: each chunk once it is read, into its tensor's
// region; stops at the first read that failed.
void WeightStreamer::Impl::decompress_jobs(const std::vector<ReadJob>& jobs, uint8_t* base,
                                           ReadPipeline& pipe) {
    for (size_t k = 0; k < jobs.size(); ++k) {
        const ReadJob& j = jobs[k];
        {
            std::unique_lock lock(pipe.m);
            pipe.cv.wait(lock, [&] { return pipe.io_error || pipe.n_read > k; });
            if (pipe.io_error) return;
        }
        if (j.chunk < 0) continue;
        timed(&WeightStreamStats::decompress_seconds, [&] {
            decompress(*j.place->tensor, stage(j.chunk) + j.offset % kIoAlign, j.f0, j.f1, j.raw0,
                       base + j.place->region);
        });
        pipe.advance(pipe.n_unpacked);
    }
}

// Each tensor the file gives a checksum for, once per unit buffer.
void WeightStreamer::Impl::verify_checksums(Unit& u, const uint8_t* base) const {
    for (Place& p : u.places) {
        const SourceTensor& t = *p.tensor;
        if (p.verified || !t.stored.xxh3) continue;
        if (XXH3_64bits(base + p.data, t.size) != *t.stored.xxh3) {
            throw Error(DWELL_ERR_CORRUPT, path + ": tensor '" + t.name +
                                               "': checksum mismatch while streaming: the "
                                               "file is corrupt");
        }
        p.verified = true;
    }
}

int32_t WeightStreamer::Impl::pick_slot(bool demand) const {
    int32_t best = -1;
    bool best_pending = true;
    for (size_t s = 0; s < slots.size(); ++s) {
        const int32_t owner = slots[s].unit;
        if (owner < 0) return static_cast<int32_t>(s);
        const Unit& o = units[static_cast<size_t>(owner)];
        if (o.refs > 0 || o.state != State::Resident) continue;
        if (o.pending && !demand) continue;
        // Least recently computed first; read-ahead not yet used last.
        if (best < 0 || (best_pending && !o.pending) ||
            (best_pending == o.pending &&
             o.last_used <
                 units[static_cast<size_t>(slots[static_cast<size_t>(best)].unit)].last_used)) {
            best = static_cast<int32_t>(s);
            best_pending = o.pending;
        }
    }
    return best;
}

void WeightStreamer::Impl::reader_loop() {
    std::unique_lock lock(mutex);
    for (;;) {
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (stop) return;
        const int32_t id = queue.front();
        Unit& u = units[static_cast<size_t>(id)];
        int32_t s = pick_slot(u.demand);
        if (s < 0 && !u.demand) {
            // No slot to spare for read-ahead: the unit is read on demand.
            queue.pop_front();
            u.state = State::Absent;
            continue;
        }
        if (s < 0) {
            cv.wait(lock, [&] {
                return stop || queue.empty() || queue.front() != id || pick_slot(true) >= 0;
            });
            continue;  // re-examine the queue's front
        }
        queue.pop_front();
        Slot& slot = slots[static_cast<size_t>(s)];
        if (slot.unit >= 0) {
            Unit& old = units[static_cast<size_t>(slot.unit)];
            old.state = State::Absent;
            old.slot = -1;
            old.pending = false;
        }
        slot.unit = id;
        u.slot = s;
        u.state = State::Loading;
        const bool demand = u.demand;
        lock.unlock();
        read_unit(u, static_cast<uint8_t*>(slot.buf.data()));
        lock.lock();
        ++stats.unit_reads;
        if (read_log.size() == kReadLogMax) read_log.pop_front();
        read_log.push_back(u.name);
        if (u.error.empty()) {
            u.state = State::Resident;
            u.pending = !demand;
            u.last_used = ++clock;
        } else {
            u.state = State::Absent;
            u.slot = -1;
            slot.unit = -1;
        }
        u.demand = false;
        cv.notify_all();
    }
}

// Queues the next `prefetch` unpinned units after u, in model order and
// round the end (the next token starts at the first).
void WeightStreamer::Impl::request_ahead(int32_t u) {
    const auto n = static_cast<int32_t>(units.size());
    int32_t queued = 0;
    for (int32_t k = 1; k < n && queued < prefetch; ++k) {
        Unit& v = units[static_cast<size_t>((u + k) % n)];
        if (v.pinned) continue;
        ++queued;
        if (v.state == State::Absent && v.error.empty()) {
            v.state = State::Queued;
            queue.push_back((u + k) % n);
        }
    }
    cv.notify_all();
}

uint8_t* WeightStreamer::Impl::acquire(int32_t id) {
    std::unique_lock lock(mutex);
    Unit& u = units[static_cast<size_t>(id)];
    ++stats.acquires;
    if (u.pinned) return static_cast<uint8_t*>(u.own.data());
    const auto t0 = Clock::now();
    if (u.state == State::Absent && u.error.empty()) {
        u.state = State::Queued;
        u.demand = true;
        queue.push_front(id);
        ++stats.demand_reads;
        cv.notify_all();
    } else if (u.state == State::Queued && !u.demand) {
        u.demand = true;
        queue.erase(std::find(queue.begin(), queue.end(), id));
        queue.push_front(id);
        ++stats.demand_reads;
        cv.notify_all();
    }
    cv.wait(lock, [&] { return u.state == State::Resident || !u.error.empty(); });
    if (!u.error.empty()) {
        const std::string what = std::move(u.error);
        u.error.clear();
        throw Error(u.error_code, what);
    }
    ++u.refs;
    u.pending = false;
    u.last_used = ++clock;
    stats.wait_seconds += seconds_since(t0);
    request_ahead(id);
    return static_cast<uint8_t*>(slots[static_cast<size_t>(u.slot)].buf.data());
}

void WeightStreamer::Impl::release(int32_t id) {
    std::lock_guard lock(mutex);
    Unit& u = units[static_cast<size_t>(id)];
    if (u.pinned) return;
    --u.refs;
    u.last_used = ++clock;
    cv.notify_all();
}

void WeightStreamer::Impl::units_of_node(const Graph& graph, int32_t node,
                                         std::vector<int32_t>& out) const {
    out.clear();
    const dwell_node& n = graph.nodes[static_cast<size_t>(node)];
    for (int32_t i = 0; i < n.n_inputs; ++i) {
        const int32_t id = n.inputs[i];
        if (id < 0 || static_cast<size_t>(id) >= graph.slots.size()) continue;
        const TensorSlot& s = graph.slots[static_cast<size_t>(graph.storage_of(id))];
        if (s.role != TensorRole::Weight || s.tensor.name == nullptr) continue;
        auto it = where.find(s.tensor.name);
        if (it == where.end()) continue;
        if (std::find(out.begin(), out.end(), it->second.first) == out.end())
            out.push_back(it->second.first);
    }
}

// Acquires units `seg` for nodes [a, b), points the C view's weights at
// them, computes, and gives them back however it ends.
void WeightStreamer::Impl::compute_with_units(
    const Graph& graph, const dwell_graph& cg, int32_t a, int32_t b,
    const std::vector<int32_t>& seg, const std::function<void(int32_t, int32_t)>& compute) {
    struct Leases {
        Impl& m;
        std::vector<int32_t> held;
        ~Leases() {
            for (const int32_t u : held) m.release(u);
        }
    } leases{*this, {}};
    for (const int32_t u : seg) {
        uint8_t* base = acquire(u);
        leases.held.push_back(u);
        for (int32_t n = a; n < b; ++n) {
            const dwell_node& node = graph.nodes[static_cast<size_t>(n)];
            for (int32_t i = 0; i < node.n_inputs; ++i) {
                const int32_t id = graph.storage_of(node.inputs[i]);
                const TensorSlot& s = graph.slots[static_cast<size_t>(id)];
                if (s.role != TensorRole::Weight || s.tensor.name == nullptr) continue;
                auto it = where.find(s.tensor.name);
                if (it == where.end() || it->second.first != u) continue;
                uint8_t* data = base + units[static_cast<size_t>(u)].places[it->second.second].data;
                dwell_graph_tensor(&cg, id)->data = data;
                // A row view of the weight (weight_rows) reads from inside it.
                const int32_t in = node.inputs[i];
                if (in != id)
                    dwell_graph_tensor(&cg, in)->data =
                        data + graph.slots[static_cast<size_t>(in)].view_offset;
            }
        }
    }
    const auto t0 = Clock::now();
    compute(a, b);
    const double s = seconds_since(t0);
    std::lock_guard lock(mutex);
    stats.compute_seconds += s;
}

// The MoE layers' EXPERT_MATMUL groups among nodes [first, end), in node
// order, with the ids they share and the router input that chose them.
std::vector<WeightStreamer::Impl::ExpertPhase> WeightStreamer::Impl::expert_phases(
    const Graph& graph, int32_t first, int32_t end) const {
    std::map<int32_t, ExpertPhase> by_layer;
    for (int32_t n = first; n < end; ++n) {
        const dwell_node& node = graph.nodes[static_cast<size_t>(n)];
        if (node.op != DWELL_OP_EXPERT_MATMUL || node.n_inputs < 3) continue;
        const TensorSlot& w = graph.slots[static_cast<size_t>(graph.storage_of(node.inputs[0]))];
        if (w.role != TensorRole::Weight || w.tensor.name == nullptr) continue;
        auto it = expert_tensors.find(w.tensor.name);
        if (it == expert_tensors.end()) continue;
        if (graph.storage_of(node.inputs[0]) != node.inputs[0]) {
            throw Error(DWELL_ERR_UNSUPPORTED,
                        path + ": expert streaming needs EXPERT_MATMUL to read '" + w.tensor.name +
                            "' whole, not a view of it");
        }
        ExpertPhase& ph = by_layer[it->second.first];
        const int32_t ids = graph.storage_of(node.inputs[2]);
        if (ph.li < 0) {
            ph.li = it->second.first;
            ph.first = n;
            ph.ids = ids;
        } else if (ph.ids != ids) {
            throw Error(DWELL_ERR_UNSUPPORTED,
                        path + ": the EXPERT_MATMULs of layer " +
                            std::to_string(moe[static_cast<size_t>(ph.li)].tensors.layer) +
                            " read different expert ids: expert streaming cannot serve them");
        }
        ph.last = n;
        ph.ems.emplace_back(n, it->second.second);
    }
    std::vector<ExpertPhase> out;
    for (auto& [li, ph] : by_layer) {
        const dwell_tensor& idt = graph.slots[static_cast<size_t>(ph.ids)].tensor;
        if (idt.dtype != DWELL_I32 || idt.nb[0] != 4 ||
            idt.nb[1] != 4 * static_cast<uint64_t>(idt.ne[0])) {
            throw Error(DWELL_ERR_UNSUPPORTED,
                        path + ": expert ids of layer " +
                            std::to_string(moe[static_cast<size_t>(li)].tensors.layer) +
                            " are not a dense I32 [k, T] tensor: expert streaming cannot read "
                            "them");
        }
        // ids <- TOPK(logits) <- MATMUL(router, x): x is what the router saw.
        const int32_t topk = graph.slots[static_cast<size_t>(ph.ids)].producer;
        if (topk >= 0 && graph.nodes[static_cast<size_t>(topk)].op == DWELL_OP_TOPK) {
            const int32_t logits =
                graph.storage_of(graph.nodes[static_cast<size_t>(topk)].inputs[0]);
            const int32_t mm = graph.slots[static_cast<size_t>(logits)].producer;
            if (mm >= 0 && graph.nodes[static_cast<size_t>(mm)].op == DWELL_OP_MATMUL)
                ph.x = graph.nodes[static_cast<size_t>(mm)].inputs[1];
        }
        out.push_back(std::move(ph));
    }
    std::sort(out.begin(), out.end(),
              [](const ExpertPhase& a, const ExpertPhase& b) { return a.first < b.first; });
    for (size_t i = 1; i < out.size(); ++i) {
        if (out[i].first <= out[i - 1].last) {
            throw Error(DWELL_ERR_UNSUPPORTED,
                        path +
                            ": the EXPERT_MATMULs of two MoE layers interleave: expert "
                            "streaming cannot serve this graph");
        }
    }
    return out;
}

// Layer li's router applied to x [n_embd, T] (the previous layer's router
// input): each token's top k experts, best first, merged rank by rank.
// The last 32 tokens at most: a longer batch's union is most experts.
std::vector<int32_t> WeightStreamer::Impl::predict(int32_t li, const dwell_tensor& x,
                                                   int32_t k) const {
    const MoeLayer& l = moe[static_cast<size_t>(li)];
    std::vector<int32_t> out;
    if (l.router_f32.empty() || x.dtype != DWELL_F32 || x.ne[0] != l.n_embd || x.data == nullptr)
        return out;
    const int64_t n_tokens = x.ne[1] * x.ne[2] * x.ne[3];
    const int64_t t0 = std::max<int64_t>(0, n_tokens - 32);
    k = static_cast<int32_t>(std::min<int64_t>(k, n_expert));
    std::vector<std::vector<int32_t>> tops;
    std::vector<float> logits(static_cast<size_t>(n_expert));
    std::vector<int32_t> order(static_cast<size_t>(n_expert));
    for (int64_t t = t0; t < n_tokens; ++t) {
        const auto* row = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x.data) +
                                                         static_cast<uint64_t>(t) * x.nb[1]);
        for (int64_t e = 0; e < n_expert; ++e) {
            const float* w = l.router_f32.data() + e * l.n_embd;
            // Eight partial sums: the compiler may vectorise them.
            float acc[8] = {};
            int64_t i = 0;
            for (; i + 8 <= l.n_embd; i += 8)
                for (int j = 0; j < 8; ++j) acc[j] += w[i + j] * row[i + j];
            for (; i < l.n_embd; ++i) acc[0] += w[i] * row[i];
            logits[static_cast<size_t>(e)] =
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
        }
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
            return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
                   (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
        });
        tops.emplace_back(order.begin(), order.begin() + k);
    }
    std::vector<bool> seen(static_cast<size_t>(n_expert), false);
    for (int32_t r = 0; r < k; ++r) {
        for (const auto& top : tops) {
            const int32_t e = top[static_cast<size_t>(r)];
            if (!seen[static_cast<size_t>(e)]) {
                seen[static_cast<size_t>(e)] = true;
                out.push_back(e);
            }
        }
    }
    return out;
}

// Layer ph.li's experts resident, the next layer's predicted ones queued,
// the C view pointed at the cache for its EXPERT_MATMULs and put back.
void WeightStreamer::Impl::run_expert_phase(const Graph& graph, const dwell_graph& cg,
                                            const ExpertPhase& ph,
                                            const std::function<void(int32_t, int32_t)>& compute) {
    std::lock_guard phase(expert_phase);
    const dwell_tensor& idt = *dwell_graph_tensor(&cg, ph.ids);
    const auto n_ids = static_cast<size_t>(dwell_tensor_nelements(&idt));
    const auto* ids = static_cast<const int32_t*>(idt.data);
    const int32_t layer = moe[static_cast<size_t>(ph.li)].tensors.layer;
    std::vector<int32_t> needed(ids, ids + n_ids);
    for (const int32_t e : needed) {
        if (e < 0 || e >= n_expert) {
            throw Error(DWELL_ERR_INTERNAL, path + ": layer " + std::to_string(layer) +
                                                " chose expert " + std::to_string(e) + " of " +
                                                std::to_string(n_expert));
        }
    }
    std::sort(needed.begin(), needed.end());
    needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
    if (predicted_for.size() < moe.size()) predicted_for.resize(moe.size());
    if (auto& p = predicted_for[static_cast<size_t>(ph.li)]; !p.empty()) {
        const auto in_p = std::count_if(needed.begin(), needed.end(), [&](int32_t e) {
            return std::find(p.begin(), p.end(), e) != p.end();
        });
        std::lock_guard lock(mutex);
        stats.experts_predicted += static_cast<uint64_t>(in_p);
        stats.experts_predictable += needed.size();
        p.clear();
    }
    const std::vector<int32_t> slot_of_needed = experts->acquire(ph.li, needed);
    struct Held {
        ExpertCache& c;
        int32_t li;
        const std::vector<int32_t>& e;
        ~Held() { c.release(li, e); }
    } held{*experts, ph.li, needed};

    ExpertRouting r;
    r.moe_layer = ph.li;
    r.needed = needed;
    if (static_cast<size_t>(ph.li) + 1 < moe.size() && ph.x >= 0) {
        const int32_t k = static_cast<int32_t>(idt.ne[0]) + expert_margin;
        r.predicted_next = predict(ph.li + 1, *dwell_graph_tensor(&cg, ph.x), k);
        experts->prefetch(ph.li + 1, r.predicted_next);
        predicted_for[static_cast<size_t>(ph.li) + 1] = r.predicted_next;
    }
    {
        std::lock_guard lock(mutex);
        if (routing.size() == kRoutingLogMax) routing.pop_front();
        routing.push_back(std::move(r));
    }

    std::vector<int32_t> slot_ids(n_ids);
    std::vector<int32_t> slot_of(static_cast<size_t>(n_expert), -1);
    for (size_t i = 0; i < needed.size(); ++i)
        slot_of[static_cast<size_t>(needed[i])] = slot_of_needed[i];
    for (size_t i = 0; i < n_ids; ++i) slot_ids[i] = slot_of[static_cast<size_t>(ids[i])];

    // The descriptors patched, and what they were.
    std::vector<std::pair<int32_t, dwell_tensor>> saved;
    std::vector<bool> is_em(static_cast<size_t>(ph.last - ph.first + 1), false);
    for (const auto& [n, part] : ph.ems) {
        is_em[static_cast<size_t>(n - ph.first)] = true;
        const dwell_node& node = graph.nodes[static_cast<size_t>(n)];
        for (const int32_t id : {node.inputs[0], node.inputs[2]}) {
            if (std::none_of(saved.begin(), saved.end(),
                             [&](const auto& p) { return p.first == id; }))
                saved.emplace_back(id, *dwell_graph_tensor(&cg, id));
        }
    }
    const auto patch = [&] {
        for (const auto& [n, part] : ph.ems) {
            const dwell_node& node = graph.nodes[static_cast<size_t>(n)];
            dwell_tensor& w = *dwell_graph_tensor(&cg, node.inputs[0]);
            w.data = experts->base() + experts->part_offset(part);
            w.nb[2] = experts->stride();
            w.ne[2] = experts->slots();
            w.nb[3] = w.nb[2] * static_cast<uint64_t>(w.ne[2]);
            dwell_tensor& v = *dwell_graph_tensor(&cg, node.inputs[2]);
            v.data = reinterpret_cast<uint8_t*>(slot_ids.data()) +
                     graph.slots[static_cast<size_t>(node.inputs[2])].view_offset;
        }
    };
    const auto restore = [&] {
        for (const auto& [id, t] : saved) *dwell_graph_tensor(&cg, id) = t;
    };
    struct Restore {
        const decltype(restore)& f;
        ~Restore() { f(); }
    } restore_at_end{restore};

    // Nodes among the EXPERT_MATMULs that read the ids too see the
    // original view: runs of them alternate with patched runs.
    std::vector<bool> foreign(is_em.size(), false);
    for (int32_t n = ph.first; n <= ph.last; ++n) {
        if (is_em[static_cast<size_t>(n - ph.first)]) continue;
        const dwell_node& node = graph.nodes[static_cast<size_t>(n)];
        for (int32_t i = 0; i < node.n_inputs; ++i)
            if (graph.storage_of(node.inputs[i]) == ph.ids)
                foreign[static_cast<size_t>(n - ph.first)] = true;
    }
    std::vector<int32_t> seg, node_units;
    int32_t a = ph.first;
    while (a <= ph.last) {
        const bool f = foreign[static_cast<size_t>(a - ph.first)];
        int32_t b = a + 1;
        while (b <= ph.last && foreign[static_cast<size_t>(b - ph.first)] == f) ++b;
        seg.clear();
        for (int32_t n = a; n < b; ++n) {
            units_of_node(graph, n, node_units);
            for (const int32_t u : node_units)
                if (std::find(seg.begin(), seg.end(), u) == seg.end()) seg.push_back(u);
        }
        if (f) {
            restore();
        } else {
            patch();
        }
        compute_with_units(graph, cg, a, b, seg, compute);
        a = b;
    }
}

WeightStreamer::WeightStreamer(const ModelSource& source, const std::vector<std::string>& names,
                               const WeightStreamOptions& options, MemoryPool& pool)
    : impl_(std::make_unique<Impl>(source, pool, names, options)) {}

WeightStreamer::~WeightStreamer() = default;

void WeightStreamer::run(const Graph& graph, const dwell_graph& cg, int32_t first, int32_t end,
                         const std::function<void(int32_t, int32_t)>& compute) {
    Impl& m = *impl_;
    const std::vector<Impl::ExpertPhase> phases =
        m.experts ? m.expert_phases(graph, first, end) : std::vector<Impl::ExpertPhase>{};
    size_t next = 0;
    std::vector<int32_t> seg, node_units;
    int32_t a = first;
    while (a < end) {
        if (next < phases.size() && phases[next].first == a) {
            m.run_expert_phase(graph, cg, phases[next], compute);
            a = phases[next].last + 1;
            ++next;
            continue;
        }
        // Segments stop where a MoE layer's experts are needed.
        const int32_t stop = next < phases.size() ? phases[next].first : end;
        m.units_of_node(graph, a, seg);
        int32_t b = a + 1;
        for (; b < stop; ++b) {
            m.units_of_node(graph, b, node_units);
            const bool inside = std::all_of(node_units.begin(), node_units.end(), [&](int32_t u) {
                return std::find(seg.begin(), seg.end(), u) != seg.end();
            });
            if (inside) continue;
            if (!seg.empty()) break;
            seg = node_units;
        }
        m.compute_with_units(graph, cg, a, b, seg, compute);
        a = b;
    }
}

bool WeightStreamer::holds(const std::string& name) const {
    return impl_->where.count(name) != 0;
}

std::vector<std::string> WeightStreamer::read_log() const {
    std::lock_guard lock(impl_->mutex);
    return {impl_->read_log.begin(), impl_->read_log.end()};
}

std::vector<std::string> WeightStreamer::unit_names() const {
    std::vector<std::string> out;
    for (const auto& u : impl_->units) out.push_back(u.name);
    return out;
}

WeightStreamStats WeightStreamer::stats() const {
    WeightStreamStats s;
    {
        std::lock_guard lock(impl_->mutex);
        s = impl_->stats;
    }
    if (impl_->experts) {
        const ExpertCacheStats c = impl_->experts->stats();
        s.experts_needed = c.needed;
        s.expert_hits = c.hits;
        s.expert_prefetch_hits = c.prefetch_hits;
        s.expert_misses = c.misses;
        s.expert_prefetches = c.prefetches;
        s.expert_bytes_read = c.bytes_read;
        s.expert_wait_seconds = c.wait_seconds;
        s.bytes_read += c.bytes_read;
        s.wait_seconds += c.wait_seconds;
        s.read_seconds += c.read_seconds;
        s.unit_reads += c.reads;
        s.demand_reads += c.misses;
    }
    return s;
}

std::vector<ExpertRouting> WeightStreamer::expert_routing() const {
    std::lock_guard lock(impl_->mutex);
    return {impl_->routing.begin(), impl_->routing.end()};
}

std::vector<std::string> WeightStreamer::expert_read_log() const {
    return impl_->experts ? impl_->experts->read_log() : std::vector<std::string>{};
}

std::string WeightStreamer::describe() const {
    const WeightStreamStats s = stats();
    if (s.moe_layers > 0) {
        return "weights: experts streamed; shared weights pinned (" + format_bytes(s.pinned_bytes) +
               ", " + std::to_string(s.units) + " units); expert cache " +
               std::to_string(s.expert_slots) + " slots of " + format_bytes(s.expert_slot_bytes) +
               " (" + format_bytes(s.expert_slot_bytes * static_cast<uint64_t>(s.expert_slots)) +
               ", " + std::to_string(s.expert_slots) + " of " +
               std::to_string(s.n_expert * s.moe_layers) + " experts in " +
               std::to_string(s.moe_layers) + " MoE layers); prefetching the next layer's top k+" +
               std::to_string(s.expert_margin) + " on " + std::to_string(s.expert_readers) +
               " reader threads" +
               (s.direct_io ? " (O_DIRECT)" : " (page cache dropped after reads)");
    }
    if (s.slots == 0) {
        return "weights: " + std::to_string(s.units) + " units read into memory (" +
               format_bytes(s.pinned_bytes) + ")";
    }
    return "weights: streamed, " + std::to_string(s.pinned_units) + " of " +
           std::to_string(s.units) + " units pinned (" + format_bytes(s.pinned_bytes) + "), " +
           std::to_string(s.slots) + " slots of " +
           format_bytes((s.resident_bytes - s.pinned_bytes) / std::max(s.slots, 1)) + ", reading " +
           std::to_string(s.prefetch) + " ahead, " + format_bytes(s.streamed_bytes) +
           " read per pass" + (s.direct_io ? " (O_DIRECT)" : " (page cache dropped after reads)");
}

}  // namespace dwell
