// Experts as streaming units, end to end on a scaled-down synthetic qwen3moe
// (4 layers, 16 experts of which 4 are used): greedy tokens streamed through
// an expert cache equal the tokens with every weight mapped; the cache's
// hits, prefetch hits, misses and the order of its reads equal an
// independent simulation of its policy (LRU; held and prefetched-not-yet-
// used experts protected) fed with the routing of a run whose cache holds
// every expert; a budget below the shared weights plus one slot per expert
// of a layer is refused naming the MiB needed; a file cut inside an expert
// fails with one line; a raw pack streams experts too, a zstd pack (whose
// experts are not ranges of frames) streams layers, both with the same
// tokens.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/model/weight_streamer.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/convert.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kExperts = 16;
constexpr int32_t kLayers = 4;
constexpr int32_t kGenerate = 24;

SyntheticModelSpec moe_spec() {
    SyntheticModelSpec s;
    s.family = SyntheticFamily::qwen3moe;
    s.n_embd = 128;
    s.n_layer = kLayers;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 64;
    s.n_vocab = 512;
    s.n_expert = kExperts;
    s.n_expert_used = 4;
    s.dtype = DWELL_Q4_0;
    s.router_std = 0.3f;  // routing that depends on the token
    s.seed = 7;
    return s;
}

RuntimeOptions options(const TempDir& dir, const std::string& weights, uint64_t budget) {
    RuntimeOptions o;
    o.manifest = dir.write("m-" + weights + std::to_string(budget) + ".toml",
                           "[device]\nname = \"moe stream test\"\n[[backend]]\nplugin = \"cpu\"\n"
                           "[memory]\nweights = \"" +
                               weights + "\"\n");
    o.threads = 2;
    if (budget > 0) o.weight_budget_bytes = budget;
    return o;
}

const std::vector<int32_t> kPrompt = {1, 40, 300, 77, 5, 123, 9};

std::vector<int32_t> greedy(Runtime& rt, const std::shared_ptr<Model>& model) {
    SessionOptions so;
    so.kv_dtype = DWELL_F32;
    Session session(rt, model, so);
    auto logits = session.decode(kPrompt);
    std::vector<int32_t> out;
    for (int32_t i = 0; i < kGenerate; ++i) {
        const auto best =
            static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        out.push_back(best);
        logits = session.decode(std::vector<int32_t>{best});
    }
    return out;
}

// The policy the expert cache documents, written again from its header:
// slots are taken lowest free first, else from the unprotected expert used
// (or prefetched) longest ago; experts held by the computing layer and
// prefetched ones not yet consumed are protected; a layer's acquire first
// unprotects its own mispredictions, holds its hits, then reads its misses
// in order; prefetch queues predicted experts not present while a slot is
// available.
struct Simulation {
    struct Entry {
        int32_t slot = -1;
        bool pending = false;
        bool held = false;
        uint64_t last = 0;
    };
    explicit Simulation(int64_t slots) : owner(static_cast<size_t>(slots), -1) {}
    std::vector<int32_t> owner;
    std::map<int32_t, Entry> entries;
    uint64_t tick = 0, needed = 0, hits = 0, prefetch_hits = 0, misses = 0, prefetches = 0;
    std::vector<std::string> reads;

    static int32_t id(int32_t li, int32_t e) { return li * static_cast<int32_t>(kExperts) + e; }
    int32_t victim() {
        int32_t best = -1;
        for (size_t s = 0; s < owner.size(); ++s) {
            if (owner[s] < 0) return static_cast<int32_t>(s);
            const Entry& v = entries[owner[s]];
            if (v.held || v.pending) continue;
            if (best < 0 || v.last < entries[owner[static_cast<size_t>(best)]].last)
                best = static_cast<int32_t>(s);
        }
        if (best >= 0) {
            entries[owner[static_cast<size_t>(best)]].slot = -1;
            owner[static_cast<size_t>(best)] = -1;
        }
        return best;
    }
    void take(int32_t li, int32_t e, int32_t s) {
        owner[static_cast<size_t>(s)] = id(li, e);
        entries[id(li, e)].slot = s;
        reads.push_back(std::to_string(li) + ":" + std::to_string(e));
    }
    void step(const ExpertRouting& r) {
        const int32_t li = r.moe_layer;
        for (int32_t e = 0; e < kExperts; ++e) {
            if (std::find(r.needed.begin(), r.needed.end(), e) == r.needed.end())
                entries[id(li, e)].pending = false;
        }
        std::vector<int32_t> missing;
        for (const int32_t e : r.needed) {
            Entry& v = entries[id(li, e)];
            ++needed;
            if (v.slot < 0) {
                missing.push_back(e);
                continue;
            }
            ++hits;
            if (v.pending) ++prefetch_hits;
            v.pending = false;
            v.held = true;
            v.last = ++tick;
        }
        for (const int32_t e : missing) {
            ++misses;
            const int32_t s = victim();
            ASSERT_GE(s, 0);
            take(li, e, s);
            Entry& v = entries[id(li, e)];
            v.held = true;
            v.last = ++tick;
        }
        for (const int32_t e : r.predicted_next) {
            if (entries[id(li + 1, e)].slot >= 0) continue;
            const int32_t s = victim();
            if (s < 0) break;
            take(li + 1, e, s);
            Entry& v = entries[id(li + 1, e)];
            v.pending = true;
            v.last = ++tick;
            ++prefetches;
        }
        for (const int32_t e : r.needed) entries[id(li, e)].held = false;
    }
};

class MoeStream : public ::testing::Test {
protected:
    void SetUp() override {
        gguf_ = dir_.path() / "qwen3moe-16x4.gguf";
        write_synthetic_model(moe_spec(), gguf_);
        Runtime rt(options(dir_, "mmap", 0));
        auto model = Model::load(rt, gguf_);
        reference_ = greedy(rt, model);
        // A budget that holds every expert, to learn the plan's sizes.
        Runtime big(options(dir_, "stream", uint64_t{1} << 30));
        auto m = Model::load(big, gguf_);
        ASSERT_NE(m->streamer(), nullptr);
        const WeightStreamStats s = m->streamer()->stats();
        ASSERT_EQ(s.moe_layers, kLayers);
        ASSERT_EQ(s.expert_slots, kExperts * kLayers);
        pinned_ = s.pinned_bytes;
        slot_ = s.expert_slot_bytes;
        EXPECT_EQ(greedy(big, m), reference_);
        full_routing_ = m->streamer()->expert_routing();
        const WeightStreamStats after = m->streamer()->stats();
        // Every expert read once at most.
        EXPECT_LE(after.expert_misses + after.expert_prefetches,
                  static_cast<uint64_t>(kExperts * kLayers));
    }

    TempDir dir_;
    fs::path gguf_;
    std::vector<int32_t> reference_;
    std::vector<ExpertRouting> full_routing_;
    uint64_t pinned_ = 0, slot_ = 0;
};

TEST_F(MoeStream, TokensAndHitCountsMatchAnIndependentSimulationOfThePolicy) {
    ASSERT_GT(reference_.size(), 0u);
    ASSERT_EQ(full_routing_.size(), static_cast<size_t>(kLayers * (1 + kGenerate)));
    // 20 slots of 64 experts: misses, evictions and skipped prefetches.
    const int64_t slots = kExperts + 4;
    Runtime rt(options(dir_, "stream", pinned_ + static_cast<uint64_t>(slots) * slot_));
    auto model = Model::load(rt, gguf_);
    const WeightStreamer& ws = *model->streamer();
    ASSERT_EQ(ws.stats().expert_slots, slots);
    EXPECT_EQ(greedy(rt, model), reference_);

    const std::vector<ExpertRouting> routing = ws.expert_routing();
    ASSERT_EQ(routing.size(), full_routing_.size());
    Simulation sim(slots);
    for (size_t i = 0; i < routing.size(); ++i) {
        EXPECT_EQ(routing[i].moe_layer, full_routing_[i].moe_layer) << i;
        EXPECT_EQ(routing[i].needed, full_routing_[i].needed) << i;
        EXPECT_EQ(routing[i].predicted_next, full_routing_[i].predicted_next) << i;
        sim.step(full_routing_[i]);
    }
    const WeightStreamStats s = ws.stats();
    EXPECT_EQ(s.experts_needed, sim.needed);
    EXPECT_EQ(s.expert_hits, sim.hits);
    EXPECT_EQ(s.expert_prefetch_hits, sim.prefetch_hits);
    EXPECT_EQ(s.expert_misses, sim.misses);
    EXPECT_EQ(s.expert_prefetches, sim.prefetches);
    EXPECT_EQ(ws.expert_read_log(), sim.reads);
    // The run really streamed: evictions happened and prefetches hit.
    EXPECT_GT(sim.misses, static_cast<uint64_t>(slots));
    EXPECT_GT(sim.prefetch_hits, 0u);
    EXPECT_LE(s.resident_bytes, pinned_ + static_cast<uint64_t>(slots) * slot_);
}

TEST_F(MoeStream, ABudgetBelowTheSharedWeightsPlusOneLayersExpertsIsRefused) {
    const uint64_t need = pinned_ + static_cast<uint64_t>(kExperts) * slot_;
    const std::string mib = std::to_string((need + (1 << 20) - 1) >> 20) + " MiB";
    {
        Runtime rt(options(dir_, "stream", need));
        EXPECT_EQ(Model::load(rt, gguf_)->streamer()->stats().expert_slots, kExperts);
    }
    Runtime rt(options(dir_, "stream", need - 1));
    try {
        Model::load(rt, gguf_);
        FAIL() << "a budget one byte short was accepted";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        EXPECT_NE(what.find("cannot hold the shared weights"), std::string::npos) << what;
        EXPECT_NE(what.find("at least " + mib), std::string::npos) << what;
    }
}

TEST_F(MoeStream, AFileCutInsideAnExpertFailsWithOneLine) {
    Runtime rt(options(dir_, "stream", pinned_ + static_cast<uint64_t>(kExperts) * slot_));
    auto model = Model::load(rt, gguf_);
    SessionOptions so;
    so.kv_dtype = DWELL_F32;
    Session session(rt, model, so);
    session.decode(kPrompt);
    // Cut two thirds in, inside the expert tensors (most of the file): the
    // experts not in the cache now end early.
    const auto size = fs::file_size(gguf_);
    const uint64_t cut = size - size / 3;
    ASSERT_EQ(::truncate(gguf_.c_str(), static_cast<off_t>(cut)), 0);
    try {
        for (int32_t i = 0; i < 64; ++i) session.decode(std::vector<int32_t>{(i * 37) % 512});
        FAIL() << "64 tokens decoded from a truncated file";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        EXPECT_NE(what.find("is cut short"), std::string::npos) << what;
        EXPECT_NE(what.find("expert"), std::string::npos) << what;
    }
}

// Packs hold only SPM vocabularies: the Mixtral-style family, same shape.
TEST(MoeStreamPack, ARawPackStreamsExpertsAndAZstdPackStreamsLayersWithTheSameTokens) {
    TempDir dir;
    SyntheticModelSpec spec = moe_spec();
    spec.family = SyntheticFamily::mixtral;
    const fs::path gguf = dir.path() / "mixtral-16x4.gguf";
    write_synthetic_model(spec, gguf);
    std::vector<int32_t> reference;
    {
        Runtime rt(options(dir, "mmap", 0));
        reference = greedy(rt, Model::load(rt, gguf));
    }
    for (const PackCompression c : {PackCompression::None, PackCompression::Zstd}) {
        ConvertOptions co;
        co.input = gguf;
        co.output = dir.path() / (c == PackCompression::Zstd ? "m.zst.dwell" : "m.dwell");
        co.compression = c;
        co.frame_bytes = 16 * 1024;
        convert_to_pack(co);
        SCOPED_TRACE(co.output.filename().string());
        if (c == PackCompression::Zstd) {
            Runtime rt(options(dir, "stream", uint64_t{700} << 10));
            auto model = Model::load(rt, co.output);
            EXPECT_EQ(greedy(rt, model), reference);
            EXPECT_EQ(model->streamer()->stats().moe_layers, 0);
            EXPECT_GT(model->streamer()->stats().slots, 0);
            continue;
        }
        uint64_t pinned = 0, slot = 0;
        {
            Runtime rt(options(dir, "stream", uint64_t{1} << 30));
            const WeightStreamStats s = Model::load(rt, co.output)->streamer()->stats();
            ASSERT_EQ(s.moe_layers, kLayers);
            pinned = s.pinned_bytes;
            slot = s.expert_slot_bytes;
        }
        Runtime rt(options(dir, "stream", pinned + static_cast<uint64_t>(kExperts + 2) * slot));
        auto model = Model::load(rt, co.output);
        EXPECT_EQ(greedy(rt, model), reference);
        const WeightStreamStats s = model->streamer()->stats();
        EXPECT_EQ(s.expert_slots, kExperts + 2);
        EXPECT_GT(s.expert_misses, static_cast<uint64_t>(kExperts + 2));
    }
}

}  // namespace
}  // namespace dwell::test
