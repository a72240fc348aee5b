// ExpertCache on a hand-made file of two MoE layers with 4 experts each, in
// 4 slots: every slice read lands whole at its part of the slot (the
// tensors start at offsets that are not block-aligned, so direct reads move
// them); the order of reads, the slots chosen and the hit counts follow the
// documented policy, worked by hand below; held and prefetched experts are
// never evicted; a file cut inside an expert fails with one line.
#include "dwell/core/model/expert_cache.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "dwell/core/base/error.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kK = 64, kN = 8, kE = 4;
constexpr uint64_t kTensorBytes = kK * kN * kE * 4;  // F32
constexpr uint64_t kSlice = kTensorBytes / kE;

uint8_t byte_at(uint64_t pos) {
    return static_cast<uint8_t>((pos * 2654435761u) >> 13);
}

class ExpertCacheTest : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = fs::temp_directory_path() /
                ("dwell-expert-cache-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        // Six tensors at odd offsets: layer 0's gate, up, down, then layer 1's.
        uint64_t at = 100;
        for (int i = 0; i < 6; ++i) {
            SourceTensor& t = tensors_[static_cast<size_t>(i)];
            t.name = "blk." + std::to_string(i / 3) + ".t" + std::to_string(i % 3);
            t.dtype = DWELL_F32;
            t.n_dims = 3;
            t.ne[0] = kK;
            t.ne[1] = kN;
            t.ne[2] = kE;
            t.size = kTensorBytes;
            t.stored.offset = at;
            t.stored.bytes = kTensorBytes;
            at += kTensorBytes + 52;
        }
        std::vector<char> bytes(at);
        for (uint64_t i = 0; i < at; ++i) bytes[i] = static_cast<char>(byte_at(i));
        std::ofstream(path_, std::ios::binary).write(bytes.data(), static_cast<long>(at));
        for (int l = 0; l < 2; ++l) {
            ExpertLayerTensors lt;
            lt.layer = l;
            for (int p = 0; p < 3; ++p) lt.tensors[static_cast<size_t>(p)] = &tensors_[3 * l + p];
            layers_.push_back(lt);
        }
    }
    void TearDown() override { fs::remove(path_); }

    // Slot `s` holds expert e of MoE layer li: each part equals the file.
    void expect_holds(const ExpertCache& c, int32_t s, int32_t li, int32_t e) const {
        for (int p = 0; p < 3; ++p) {
            const SourceTensor& t = tensors_[static_cast<size_t>(3 * li + p)];
            const uint8_t* got =
                c.base() + static_cast<uint64_t>(s) * c.stride() + c.part_offset(p);
            const uint64_t from = t.stored.offset + static_cast<uint64_t>(e) * kSlice;
            for (uint64_t i = 0; i < kSlice; ++i) {
                ASSERT_EQ(got[i], byte_at(from + i))
                    << "slot " << s << " part " << p << " byte " << i;
            }
        }
    }

    fs::path path_;
    std::array<SourceTensor, 6> tensors_;
    std::vector<ExpertLayerTensors> layers_;
    MemoryPool pool_{4096, 0};
};

TEST_F(ExpertCacheTest, ReadsEvictsAndPrefetchesInThePolicysOrder) {
    ExpertCache c(path_.string(), layers_, kE, 4, 3, pool_);
    EXPECT_EQ(c.stride() % 4096, 0u);
    // Layer 0 needs 0, 1: free slots 0, 1. Prefetch layer 1's 2, 3, 0: the
    // free slots 2, 3 take 2 and 3; 0 finds only held slots.
    EXPECT_EQ(c.acquire(0, {0, 1}), (std::vector<int32_t>{0, 1}));
    expect_holds(c, 0, 0, 0);
    expect_holds(c, 1, 0, 1);
    EXPECT_EQ(c.prefetch(1, {2, 3, 0}), 2);
    // Prefetched and not yet used: protected as much as the held ones.
    EXPECT_EQ(c.prefetch(1, {1}), 0);
    c.release(0, {0, 1});
    // Layer 1 needs 2 (prefetched: a prefetch hit) and 0 (a miss). 3 was
    // mispredicted and loses its protection; the least recently used of
    // 0:0 (tick 1), 0:1 (2), 1:3 (4) is 0:0, in slot 0.
    EXPECT_EQ(c.acquire(1, {2, 0}), (std::vector<int32_t>{2, 0}));
    expect_holds(c, 2, 1, 2);
    expect_holds(c, 0, 1, 0);
    c.release(1, {2, 0});
    // Layer 0 needs 1 (a hit) and 0 (a miss): of 1:3 (tick 4), 1:2 (5) and
    // 1:0 (6) the oldest is 1:3, in slot 3.
    EXPECT_EQ(c.acquire(0, {1, 0}), (std::vector<int32_t>{1, 3}));
    expect_holds(c, 3, 0, 0);
    c.release(0, {1, 0});
    EXPECT_EQ(c.read_log(), (std::vector<std::string>{"0:0", "0:1", "1:2", "1:3", "1:0", "0:0"}));
    const ExpertCacheStats s = c.stats();
    EXPECT_EQ(s.needed, 6u);
    EXPECT_EQ(s.hits, 2u);
    EXPECT_EQ(s.prefetch_hits, 1u);
    EXPECT_EQ(s.misses, 4u);
    EXPECT_EQ(s.prefetches, 2u);
    EXPECT_EQ(s.reads, 6u);
    EXPECT_GE(s.bytes_read, 6 * 3 * kSlice);
}

TEST_F(ExpertCacheTest, AFileCutInsideAnExpertFailsWithOneLineAndHoldsNothing) {
    ExpertCache c(path_.string(), layers_, kE, 4, 2, pool_);
    // Cut inside layer 1's down slice of expert 2.
    const SourceTensor& down = tensors_[5];
    ASSERT_EQ(
        ::truncate(path_.c_str(), static_cast<off_t>(down.stored.offset + 2 * kSlice + kSlice / 2)),
        0);
    EXPECT_EQ(c.acquire(1, {0, 1}).size(), 2u);  // before the cut
    c.release(1, {0, 1});
    try {
        c.acquire(1, {2});
        FAIL() << "an expert past the end of the file was read";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        EXPECT_NE(what.find("expert 2 of tensor 'blk.1.t2'"), std::string::npos) << what;
        EXPECT_NE(what.find("cut short"), std::string::npos) << what;
    }
    // Nothing stays held: all four slots serve layer 0.
    EXPECT_EQ(c.acquire(0, {0, 1, 2, 3}).size(), 4u);
    c.release(0, {0, 1, 2, 3});
}

}  // namespace
}  // namespace dwell
