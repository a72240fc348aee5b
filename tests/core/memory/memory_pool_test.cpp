#include "dwell/core/memory/memory_pool.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "dwell/core/base/error.hpp"

namespace dwell {
namespace {

constexpr size_t kPage = 16384;

TEST(MemoryPool, RoundsUpToWholePagesAndCountsThem) {
    MemoryPool pool(kPage, 0);
    PoolBuffer a = pool.allocate(1, "a");
    PoolBuffer b = pool.allocate(kPage + 1, "b");
    EXPECT_EQ(a.size(), kPage);
    EXPECT_EQ(b.size(), 2 * kPage);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % kPage, 0u);
    const PoolStats s = pool.stats();
    EXPECT_EQ(s.used_bytes, 3 * kPage);
    EXPECT_EQ(s.allocations, 2u);
    EXPECT_EQ(s.page_size, kPage);
}

TEST(MemoryPool, MemoryIsZeroedEvenWhenPagesAreReused) {
    MemoryPool pool(kPage, 0);
    void* first = nullptr;
    {
        PoolBuffer a = pool.allocate(kPage, "a");
        std::memset(a.data(), 0xab, a.size());
        first = a.data();
    }
    PoolBuffer b = pool.allocate(kPage, "b");
    EXPECT_EQ(b.data(), first);  // first fit reuses the freed page
    const auto* p = static_cast<const uint8_t*>(b.data());
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(p[i], 0) << i;
}

TEST(MemoryPool, BudgetIsEnforcedWithAMessageNamingTheRequest) {
    MemoryPool pool(kPage, 4 * kPage);
    PoolBuffer a = pool.allocate(3 * kPage, "weights");
    try {
        pool.allocate(2 * kPage, "the KV cache of layer 7");
        FAIL() << "allocation past the budget succeeded";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_OUT_OF_MEMORY);
        const std::string msg = e.what();
        EXPECT_NE(msg.find("the KV cache of layer 7 needs 32.0 KiB"), std::string::npos) << msg;
        EXPECT_NE(msg.find("budget of 64.0 KiB has 16.0 KiB left"), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos);
    }
    EXPECT_EQ(pool.stats().failed_allocations, 1u);
    PoolBuffer fits = pool.allocate(kPage, "fits");  // exactly at the budget
    EXPECT_EQ(pool.stats().used_bytes, 4 * kPage);
}

TEST(MemoryPool, FreedPagesReturnToTheBudgetAndPeakIsKept) {
    MemoryPool pool(kPage, 4 * kPage);
    { PoolBuffer a = pool.allocate(4 * kPage, "a"); }
    PoolBuffer b = pool.allocate(4 * kPage, "b");
    EXPECT_EQ(pool.stats().peak_used_bytes, 4 * kPage);
    PoolBuffer moved = std::move(b);
    EXPECT_FALSE(b);
    EXPECT_EQ(pool.stats().allocations, 1u);
    moved = PoolBuffer();
    EXPECT_EQ(pool.stats().used_bytes, 0u);
}

TEST(MemoryPool, LargeAllocationsGetTheirOwnChunkAndAreUnmappedWhenFree) {
    MemoryPool pool(kPage, 0);
    PoolBuffer small = pool.allocate(kPage, "small");
    const uint64_t mapped_before = pool.stats().mapped_bytes;
    {
        PoolBuffer big = pool.allocate(size_t{64} << 20, "big");
        EXPECT_GE(pool.stats().mapped_bytes, mapped_before + (uint64_t{64} << 20));
    }
    EXPECT_EQ(pool.stats().mapped_bytes, mapped_before);
}

TEST(MemoryPool, RawAllocationsForPluginsReturnNullPastTheBudget) {
    MemoryPool pool(kPage, 2 * kPage);
    void* p = pool.allocate_raw(kPage, "plugin");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(pool.allocate_raw(2 * kPage, "plugin"), nullptr);
    pool.free_raw(p);
    pool.free_raw(nullptr);
    EXPECT_EQ(pool.stats().used_bytes, 0u);
}

TEST(MemoryPool, RejectsBadPageSizes) {
    EXPECT_THROW(MemoryPool(1000, 0), Error);
    EXPECT_THROW(MemoryPool(2048, 0), Error);
    EXPECT_NO_THROW(MemoryPool(4096, 0));
}

}  // namespace
}  // namespace dwell
