// WeightStreamer over real packs (raw and zstd): every streamed tensor's
// bytes equal what was written; units are read once per pass in model order
// with read-ahead; eviction takes the least recently computed unit; pinned
// layers are never re-read; a budget below one layer, a pack truncated or
// corrupted while in use, all fail with one clear line.
#include "dwell/core/model/weight_streamer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/pack_file.hpp"
#include "dwell/tools/pack_writer.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

constexpr int kLayers = 4;
constexpr int64_t kRowLen = 256;  // F32 values per row
constexpr int64_t kRows = 96;     // 96 KiB per tensor

std::vector<uint8_t> bytes_of(int seed, size_t n) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<uint8_t> b(n);
    // Half random, half runs: zstd has something to compress.
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i % 512 < 256 ? rng() : i / 512);
    return b;
}

class WeightStreamerTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("dwell-stream-test-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
        names_ = {"token_embd.weight", "output_norm.weight", "output.weight"};
        for (int l = 0; l < kLayers; ++l) {
            names_.push_back("blk." + std::to_string(l) + ".attn_q.weight");
            names_.push_back("blk." + std::to_string(l) + ".ffn_up.weight");
        }
    }
    void TearDown() override { fs::remove_all(dir_); }

    // Every tensor [kRowLen, kRows] F32 (the head's norm [kRowLen]).
    fs::path write(PackCompression c) {
        const fs::path p = dir_ / (c == PackCompression::Zstd ? "m.zst.dwell" : "m.dwell");
        PackWriter::Options o;
        o.compression = c;
        o.frame_bytes = 16 * 1024;
        PackWriter w(p, o);
        w.metadata().add_string("general.architecture", "llama");
        for (size_t i = 0; i < names_.size(); ++i) {
            const bool norm = names_[i] == "output_norm.weight";
            const std::vector<int64_t> ne =
                norm ? std::vector<int64_t>{kRowLen} : std::vector<int64_t>{kRowLen, kRows};
            const size_t n = static_cast<size_t>(4 * kRowLen * (norm ? 1 : kRows));
            contents_[names_[i]] = bytes_of(static_cast<int>(i) + 1, n);
            w.add_tensor(names_[i], DWELL_F32, ne, contents_[names_[i]]);
        }
        w.finish();
        return p;
    }

    // A graph with one node per weight, in model order (embedding, layers,
    // head), each reading its weight; run() checks every weight's bytes
    // the moment its node computes.
    void build_graph() {
        graph_ = std::make_unique<Graph>();
        std::vector<std::string> order = {"token_embd.weight"};
        for (int l = 0; l < kLayers; ++l) {
            order.push_back("blk." + std::to_string(l) + ".attn_q.weight");
            order.push_back("blk." + std::to_string(l) + ".ffn_up.weight");
        }
        order.push_back("output_norm.weight");
        order.push_back("output.weight");
        const int64_t ne[2] = {kRowLen, kRows};
        for (const std::string& n : order) {
            const int32_t w =
                graph_->add_tensor(make_tensor(DWELL_F32, 2, ne), TensorRole::Weight, n);
            const int32_t out =
                graph_->add_tensor(make_tensor(DWELL_F32, 2, ne), TensorRole::Activation, "");
            dwell_node node{};
            node.op = DWELL_OP_SCALE;
            node.output = out;
            node.n_inputs = 1;
            node.inputs[0] = w;
            graph_->nodes.push_back(node);
        }
    }

    // One pass over the graph: each node's weight must hold its bytes.
    void pass(WeightStreamer& ws) {
        const dwell_graph& cg = graph_->c_graph();
        ws.run(*graph_, cg, 0, static_cast<int32_t>(graph_->nodes.size()),
               [&](int32_t a, int32_t b) {
                   for (int32_t n = a; n < b; ++n) {
                       const int32_t w = graph_->nodes[static_cast<size_t>(n)].inputs[0];
                       const dwell_tensor* t = dwell_graph_tensor(&cg, w);
                       const auto& want =
                           contents_.at(graph_->slots[static_cast<size_t>(w)].tensor.name);
                       ASSERT_NE(t->data, nullptr);
                       ASSERT_EQ(0, std::memcmp(t->data, want.data(), want.size())) << t->name;
                   }
               });
    }

    // The streamer's two halves of staging for compressed frames (a chunk is
    // at most one tensor's bytes, plus alignment); none for a raw pack.
    static uint64_t staging(PackCompression c) {
        return c == PackCompression::Zstd ? 2 * (uint64_t{4 * kRowLen * kRows} + 8192) : 0;
    }
    static uint64_t unit_bytes() {
        return 2 * static_cast<uint64_t>(4 * kRowLen * kRows);  // two tensors, 4 KiB-aligned
    }

    // A streamer over the pack written with `c`, with `slots` slots' worth of
    // budget (plus the staging it needs), no auto-pinning and `prefetch`
    // units read ahead. The pack's source and the pool live in the fixture.
    WeightStreamer& stream(PackCompression c, uint64_t slots, int32_t prefetch) {
        ws_.reset();
        src_ = open_pack_source(write(c), {}, TensorData::Deferred);
        pool_ = std::make_unique<MemoryPool>(16384, 0);
        WeightStreamOptions o;
        o.budget_bytes = slots * unit_bytes() + staging(c);
        o.pin_auto = false;
        o.prefetch = prefetch;
        ws_ = std::make_unique<WeightStreamer>(*src_, names_, o, *pool_);
        build_graph();
        return *ws_;
    }

    fs::path dir_;
    std::vector<std::string> names_;
    std::map<std::string, std::vector<uint8_t>> contents_;
    std::unique_ptr<Graph> graph_;
    std::unique_ptr<PackSource> src_;
    std::unique_ptr<MemoryPool> pool_;
    std::unique_ptr<WeightStreamer> ws_;  // last: borrows src_ and pool_
};

std::vector<std::string> cycle(int passes) {
    std::vector<std::string> c;
    for (int p = 0; p < passes; ++p) {
        c.push_back("embedding");
        for (int l = 0; l < kLayers; ++l) c.push_back("layer " + std::to_string(l));
        c.push_back("head");
    }
    return c;
}

TEST_F(WeightStreamerTest, RawAndZstdUnitsReadOncePerPassInModelOrder) {
    for (PackCompression c : {PackCompression::None, PackCompression::Zstd}) {
        SCOPED_TRACE(c == PackCompression::Zstd ? "zstd" : "raw");
        WeightStreamer& ws = stream(c, 3, 2);
        for (int i = 0; i < 3; ++i) pass(ws);
        const WeightStreamStats s = ws.stats();
        EXPECT_EQ(s.pinned_units, 0);
        EXPECT_EQ(s.slots, 3);
        EXPECT_EQ(s.prefetch, 2);
        // Read-ahead runs past the end of a pass into the next one, so the
        // log may hold the next pass's first units as well.
        std::vector<std::string> log = ws.read_log();
        ASSERT_GE(log.size(), cycle(3).size());
        log.resize(cycle(3).size());
        EXPECT_EQ(log, cycle(3));
        // The reader's time is counted (dwell bench reports it per token).
        EXPECT_GT(s.read_seconds, 0.0);
        if (c == PackCompression::Zstd) {
            EXPECT_GE(s.bytes_decompressed, 3 * s.streamed_bytes);
            EXPECT_LT(s.bytes_read, s.bytes_decompressed);  // the runs compress
            EXPECT_GT(s.decompress_seconds, 0.0);
        } else {
            EXPECT_GE(s.bytes_read, 3 * s.streamed_bytes);
            EXPECT_EQ(s.decompress_seconds, 0.0);
        }
        // The slots and the staging buffer are all the pool holds.
        EXPECT_EQ(pool_->stats().used_by[static_cast<int>(MemoryUse::Weights)], s.resident_bytes);
    }
}

TEST_F(WeightStreamerTest, EvictsTheLeastRecentlyComputedUnit) {
    // No read-ahead: every read on demand, so the order is the acquire order.
    WeightStreamer& ws = stream(PackCompression::None, 3, 0);
    ASSERT_EQ(ws.stats().slots, 3);
    // Nodes 1-2 are layer 0, 3-4 layer 1, 5-6 layer 2, 7-8 layer 3.
    const dwell_graph& cg = graph_->c_graph();
    const auto layer = [&](int l) {
        ws.run(*graph_, cg, 1 + 2 * l, 3 + 2 * l, [](int32_t, int32_t) {});
    };
    layer(0);
    layer(1);
    layer(2);
    layer(0);  // resident: no read; now layer 1 is the least recent
    layer(3);  // evicts layer 1
    layer(2);  // still resident
    layer(1);  // read again, evicting layer 0
    layer(3);
    const std::vector<std::string> want = {"layer 0", "layer 1", "layer 2", "layer 3", "layer 1"};
    EXPECT_EQ(ws.read_log(), want);
    EXPECT_EQ(ws.stats().demand_reads, 5u);
}

TEST_F(WeightStreamerTest, PinnedLayersAreReadOnceAndSkippedByReadAhead) {
    const fs::path p = write(PackCompression::Zstd);
    const auto src = open_pack_source(p, {}, TensorData::Deferred);
    MemoryPool pool(16384, 0);
    WeightStreamOptions o;
    o.budget_bytes = 4 * unit_bytes() + staging(PackCompression::Zstd);
    o.pin_layers = {1, 2};
    o.pin_auto = false;
    o.prefetch = 1;
    WeightStreamer ws(*src, names_, o, pool);
    EXPECT_EQ(ws.stats().pinned_units, 2);
    EXPECT_EQ(ws.stats().slots, 2);
    build_graph();
    pass(ws);
    pass(ws);
    std::vector<std::string> log = ws.read_log();
    const std::vector<std::string> want = {"embedding", "layer 0", "layer 3", "head",
                                           "embedding", "layer 0", "layer 3", "head"};
    ASSERT_GE(log.size(), want.size());
    log.resize(want.size());
    EXPECT_EQ(log, want);
}

TEST_F(WeightStreamerTest, AutoPinFillsTheBudgetLeftAfterTheSlots) {
    const fs::path p = write(PackCompression::None);
    const auto src = open_pack_source(p, {}, TensorData::Deferred);
    MemoryPool pool(16384, 0);
    WeightStreamOptions o;
    o.budget_bytes = 5 * unit_bytes();
    o.prefetch = 1;
    WeightStreamer ws(*src, names_, o, pool);
    const WeightStreamStats s = ws.stats();
    EXPECT_EQ(s.slots, 2);
    EXPECT_GE(s.pinned_units, 3);  // 3 layer-size units, plus the small embedding/head
    EXPECT_LE(s.resident_bytes, o.budget_bytes);
    build_graph();
    pass(ws);
    pass(ws);
}

TEST_F(WeightStreamerTest, ABudgetBelowOneLayerIsRefusedSayingWhatIsNeeded) {
    const fs::path p = write(PackCompression::None);
    const auto src = open_pack_source(p, {}, TensorData::Deferred);
    MemoryPool pool(16384, 0);
    WeightStreamOptions o;
    o.budget_bytes = unit_bytes() / 2;
    try {
        WeightStreamer ws(*src, names_, o, pool);
        FAIL() << "a budget of half a layer was accepted";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("smaller than one layer"), std::string::npos) << what;
        EXPECT_NE(what.find("--weight-budget"), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    o.budget_bytes = 0;
    EXPECT_THROW(WeightStreamer(*src, names_, o, pool), Error);
    o.budget_bytes = 3 * unit_bytes();
    o.pin_layers = {7};  // there are 4 layers
    EXPECT_THROW(WeightStreamer(*src, names_, o, pool), Error);
    EXPECT_EQ(pool.stats().used_bytes, 0u);
}

TEST_F(WeightStreamerTest, APackTruncatedMidStreamFailsCleanly) {
    for (PackCompression c : {PackCompression::None, PackCompression::Zstd}) {
        SCOPED_TRACE(c == PackCompression::Zstd ? "zstd" : "raw");
        WeightStreamer& ws = stream(c, 2, 0);
        const fs::path p = src_->path();
        pass(ws);
        fs::resize_file(p, fs::file_size(p) / 2);
        try {
            pass(ws);
            pass(ws);
            FAIL() << "a truncated pack streamed without an error";
        } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(p.string()), std::string::npos) << what;
            EXPECT_NE(what.find("cut short"), std::string::npos) << what;
        }
    }
}

TEST_F(WeightStreamerTest, ABitFlippedOnDiskIsCaughtByTheChecksumOnFirstRead) {
    const fs::path p = write(PackCompression::None);
    const auto src = open_pack_source(p, {}, TensorData::Deferred);
    const SourceTensor* t = src->find_tensor("blk.2.ffn_up.weight");
    ASSERT_NE(t, nullptr);
    {
        FILE* f = std::fopen(p.c_str(), "r+b");
        ASSERT_NE(f, nullptr);
        std::fseek(f, static_cast<long>(t->stored.offset + 1000), SEEK_SET);
        std::fputc(contents_["blk.2.ffn_up.weight"][1000] ^ 0x10, f);
        std::fclose(f);
    }
    MemoryPool pool(16384, 0);
    WeightStreamOptions o;
    o.budget_bytes = 2 * unit_bytes();
    o.pin_auto = false;
    WeightStreamer ws(*src, names_, o, pool);
    build_graph();
    try {
        pass(ws);
        FAIL() << "a corrupt tensor streamed without an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("blk.2.ffn_up.weight': checksum mismatch"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace dwell
