// The KV page pool: reference counts, exhaustion and double free reported
// as one-line errors, budget accounting, and a long random run checked
// against a shadow model (no leak, no page handed out twice, no page
// content disturbed by another page's owner).
#include "dwell/core/kv/kv_page_pool.hpp"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "dwell/core/base/error.hpp"

namespace dwell {
namespace {

constexpr size_t kPage = 16384;

dwell_status status_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.status();
    }
    return DWELL_OK;
}

TEST(KvPagePool, PagesAreZeroedAlignedAndCharged) {
    MemoryPool memory(kPage, 0);
    KvPagePool pages(memory, 64 * kPage);
    EXPECT_EQ(pages.capacity(), 64);
    EXPECT_EQ(pages.page_bytes(), kPage);
    const int32_t a = pages.allocate("test");
    const int32_t b = pages.allocate("test");
    EXPECT_NE(a, b);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pages.data(a)) % kPage, 0u);
    for (size_t i = 0; i < kPage; ++i) ASSERT_EQ(pages.data(a)[i], 0);
    EXPECT_EQ(memory.stats().used_by[static_cast<int>(MemoryUse::Kv)], 2 * kPage);
    std::memset(pages.data(a), 0xab, kPage);
    pages.release(a);
    // A freed page comes back zero-filled to its next owner.
    const int32_t c = pages.allocate("test");
    EXPECT_EQ(c, a);
    for (size_t i = 0; i < kPage; ++i) ASSERT_EQ(pages.data(c)[i], 0);
    pages.release(b);
    pages.release(c);
    EXPECT_EQ(pages.pages_in_use(), 0);
    EXPECT_EQ(memory.stats().used_bytes, 0u);
}

// Heap bytes in use (small and mmap'd blocks alike).
uint64_t heap_bytes() {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
}

TEST(KvPagePool, LargeSpaceCostsNoBookkeepingUntilPagesAreUsed) {
    // A 1 TiB space (a large --memory-budget) holds 2^26 pages of 16 KiB; a
    // count per possible page would be 256 MiB of heap before any is used.
    MemoryPool memory(kPage, 0);
    const uint64_t before = heap_bytes();
    KvPagePool pages(memory, uint64_t{1} << 40);
    ASSERT_EQ(pages.capacity(), 1 << 26);
    EXPECT_LT(heap_bytes() - before, uint64_t{1} << 20);
    std::vector<int32_t> held;
    for (int i = 0; i < 100; ++i) held.push_back(pages.allocate("test"));
    EXPECT_LT(heap_bytes() - before, uint64_t{1} << 20);
    for (int32_t p : held) EXPECT_EQ(pages.refcount(p), 1);
    // Pages past those handed out are not in use, whatever the space holds.
    EXPECT_EQ(pages.refcount(1 << 25), 0);
    EXPECT_EQ(status_of([&] { pages.release(1 << 25); }), DWELL_ERR_INTERNAL);
    EXPECT_EQ(status_of([&] { pages.retain(200); }), DWELL_ERR_INTERNAL);
    for (int32_t p : held) pages.release(p);
    EXPECT_EQ(pages.pages_in_use(), 0);
    // Freed pages are reused before new ones are made.
    const int32_t again = pages.allocate("test");
    EXPECT_LT(again, 100);
    pages.release(again);
}

TEST(KvPagePool, ReferenceCounts) {
    MemoryPool memory(kPage, 0);
    KvPagePool pages(memory, 8 * kPage);
    const int32_t p = pages.allocate("test");
    pages.retain(p);
    pages.retain(p);
    EXPECT_EQ(pages.refcount(p), 3);
    pages.release(p);
    pages.release(p);
    EXPECT_EQ(pages.pages_in_use(), 1);
    pages.release(p);
    EXPECT_EQ(pages.refcount(p), 0);
    EXPECT_EQ(pages.pages_in_use(), 0);
}

TEST(KvPagePool, DoubleFreeAndBadIdsAreErrors) {
    MemoryPool memory(kPage, 0);
    KvPagePool pages(memory, 8 * kPage);
    const int32_t p = pages.allocate("test");
    pages.release(p);
    try {
        pages.release(p);
        FAIL() << "double free accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_INTERNAL);
        EXPECT_NE(std::string(e.what()).find("double free"), std::string::npos) << e.what();
    }
    EXPECT_EQ(status_of([&] { pages.retain(p); }), DWELL_ERR_INTERNAL);
    EXPECT_EQ(status_of([&] { pages.release(-1); }), DWELL_ERR_INTERNAL);
    EXPECT_EQ(status_of([&] { pages.release(8); }), DWELL_ERR_INTERNAL);
    // Nothing was disturbed: the page can be handed out again exactly once.
    EXPECT_EQ(pages.allocate("test"), p);
    EXPECT_EQ(pages.pages_in_use(), 1);
}

TEST(KvPagePool, ExhaustionOfTheSpaceAndOfTheBudget) {
    {
        MemoryPool memory(kPage, 0);
        KvPagePool pages(memory, 4 * kPage);
        for (int i = 0; i < 4; ++i) pages.allocate("test");
        try {
            pages.allocate("session 3");
            FAIL() << "a fifth page from a space of four";
        } catch (const Error& e) {
            EXPECT_EQ(e.status(), DWELL_ERR_OUT_OF_MEMORY);
            EXPECT_NE(std::string(e.what()).find("session 3"), std::string::npos) << e.what();
        }
        EXPECT_EQ(pages.pages_in_use(), 4);
    }
    {
        // The budget is shared with other uses: weights take most of it.
        MemoryPool memory(kPage, 10 * kPage);
        memory.charge(7 * kPage, MemoryUse::Weights, "weights");
        KvPagePool pages(memory, 10 * kPage);
        for (int i = 0; i < 3; ++i) pages.allocate("test");
        try {
            pages.allocate("the KV cache (400 tokens)");
            FAIL() << "the budget was exceeded";
        } catch (const Error& e) {
            const std::string m = e.what();
            EXPECT_EQ(e.status(), DWELL_ERR_OUT_OF_MEMORY);
            EXPECT_NE(m.find("the KV cache (400 tokens) needs 16.0 KiB"), std::string::npos) << m;
            EXPECT_NE(m.find("weights 112.0 KiB"), std::string::npos) << m;
            EXPECT_NE(m.find("KV cache 48.0 KiB"), std::string::npos) << m;
            EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        }
        EXPECT_EQ(pages.pages_in_use(), 3);
        EXPECT_EQ(memory.stats().used_bytes, 10 * kPage);
    }
}

TEST(KvPagePool, TenThousandRandomCyclesKeepEveryPageIntact) {
    MemoryPool memory(kPage, 0);
    KvPagePool pages(memory, 96 * kPage);
    std::mt19937 rng(1234);
    std::map<int32_t, int32_t> refs;  // the shadow model: page -> references
    std::map<int32_t, uint32_t> stamp;
    uint32_t next_stamp = 1;
    auto write_stamp = [&](int32_t p) {
        stamp[p] = next_stamp++;
        auto* words = reinterpret_cast<uint32_t*>(pages.data(p));
        for (size_t i = 0; i < kPage / 4; i += 97) words[i] = stamp[p] ^ static_cast<uint32_t>(i);
    };
    auto check_stamp = [&](int32_t p) {
        const auto* words = reinterpret_cast<const uint32_t*>(pages.data(p));
        for (size_t i = 0; i < kPage / 4; i += 97) {
            ASSERT_EQ(words[i], stamp[p] ^ static_cast<uint32_t>(i)) << "page " << p;
        }
    };
    for (int step = 0; step < 10000; ++step) {
        const int op = static_cast<int>(rng() % 3);
        if (op == 0 || refs.empty()) {
            if (pages.pages_in_use() == pages.capacity()) {
                EXPECT_EQ(status_of([&] { pages.allocate("test"); }), DWELL_ERR_OUT_OF_MEMORY);
                continue;
            }
            const int32_t p = pages.allocate("test");
            ASSERT_EQ(refs.count(p), 0u) << "page " << p << " handed out twice";
            refs[p] = 1;
            write_stamp(p);
        } else {
            auto it = refs.begin();
            std::advance(it, static_cast<long>(rng() % refs.size()));
            const int32_t p = it->first;
            check_stamp(p);
            if (op == 1) {
                pages.retain(p);
                ++it->second;
            } else {
                pages.release(p);
                if (--it->second == 0) refs.erase(it);
            }
        }
        ASSERT_EQ(pages.pages_in_use(), static_cast<int32_t>(refs.size()));
    }
    for (const auto& [p, n] : refs) {
        check_stamp(p);
        EXPECT_EQ(pages.refcount(p), n);
        for (int32_t i = 0; i < n; ++i) pages.release(p);
    }
    EXPECT_EQ(pages.pages_in_use(), 0);
    EXPECT_EQ(memory.stats().used_bytes, 0u);
}

}  // namespace
}  // namespace dwell
