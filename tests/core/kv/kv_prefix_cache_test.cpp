// The prefix cache: pages found again by the exact tokens before them, the
// references it holds, least-recently-used reclaim of pages only it holds,
// forgetting a model, and optional logits that never block on the budget.
#include "dwell/core/kv/kv_prefix_cache.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace dwell {
namespace {

constexpr size_t kPage = 16384;

struct Fixture {
    explicit Fixture(uint64_t budget = 0) : memory(kPage, budget) {
        pages.set_reclaimer([this](int64_t n) { return cache.reclaim(n); });
        memory.set_reclaimer([this](uint64_t b) {
            return static_cast<uint64_t>(cache.reclaim(static_cast<int64_t>(b / kPage + 1))) *
                   kPage;
        });
    }
    MemoryPool memory;
    KvPagePool pages{memory, 64 * kPage};
    KvPrefixCache cache{pages, memory, 32};
};

TEST(KvPrefixCache, FindsPagesByTheWholePrefix) {
    Fixture f;
    const uint64_t root = KvPrefixCache::root_key(1, DWELL_F16, 4);
    const std::vector<int32_t> a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
    const std::vector<int32_t> ids_a = {f.pages.allocate("t"), f.pages.allocate("t")};
    const std::vector<int32_t> ids_b = {f.pages.allocate("t"), f.pages.allocate("t")};
    f.cache.insert(1, root, a, ids_a, {});
    const uint64_t key_a = KvPrefixCache::child_key(root, a);
    f.cache.insert(1, key_a, b, ids_b, {});
    EXPECT_EQ(f.pages.refcount(ids_a[0]), 2);  // the cache's reference

    auto hit = f.cache.find(root, a);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->page_ids, ids_a);
    EXPECT_EQ(hit->key, key_a);
    EXPECT_EQ(f.pages.refcount(ids_a[0]), 3);  // retained for the caller
    for (int32_t p : hit->page_ids) f.pages.release(p);
    // b after a is cached; b from the start, or after another prefix, is not.
    EXPECT_TRUE(f.cache.find(key_a, b));
    EXPECT_FALSE(f.cache.find(root, b));
    EXPECT_FALSE(f.cache.find(KvPrefixCache::root_key(2, DWELL_F16, 4), a));   // another model
    EXPECT_FALSE(f.cache.find(KvPrefixCache::root_key(1, DWELL_Q8_0, 4), a));  // another type
}

TEST(KvPrefixCache, ReclaimsOnlyWhatNobodyElseHoldsOldestFirst) {
    Fixture f;
    const uint64_t root = KvPrefixCache::root_key(1, DWELL_F16, 2);
    std::vector<std::vector<int32_t>> ids;
    for (int32_t i = 0; i < 3; ++i) {
        ids.push_back({f.pages.allocate("t")});
        f.cache.insert(1, root, std::vector<int32_t>{i, i}, ids.back(), {});
    }
    f.pages.release(ids[0][0]);  // entries 0 and 2: only the cache holds them
    f.pages.release(ids[2][0]);
    EXPECT_EQ(f.cache.reclaim(1), 1);  // the oldest free one: entry 0
    EXPECT_FALSE(f.cache.find(root, std::vector<int32_t>{0, 0}));
    EXPECT_EQ(f.pages.refcount(ids[0][0]), 0);
    EXPECT_EQ(f.cache.reclaim(5), 1);  // entry 2; entry 1 is still held by its session
    EXPECT_EQ(f.cache.entries(), 1);
    f.cache.forget_model(1);
    EXPECT_EQ(f.cache.entries(), 0);
    EXPECT_EQ(f.pages.refcount(ids[1][0]), 1);  // its session's reference only
    f.pages.release(ids[1][0]);
    EXPECT_EQ(f.pages.pages_in_use(), 0);
}

// Logits are kept only if the budget has room, and asking must not call the
// reclaimer (which needs the lock insert holds): this used to deadlock.
TEST(KvPrefixCache, LogitsNeverWaitOnTheBudget) {
    Fixture f(3 * kPage);
    const uint64_t root = KvPrefixCache::root_key(1, DWELL_F16, 2);
    const std::vector<int32_t> ids = {f.pages.allocate("t"), f.pages.allocate("t")};
    f.pages.release(ids[1]);
    const std::vector<int32_t> one = {ids[0]};
    const std::vector<float> logits(3 * kPage / sizeof(float), 1.0f);  // more than is left
    f.cache.insert(1, root, std::vector<int32_t>{7, 7}, one, logits);
    auto hit = f.cache.find(root, std::vector<int32_t>{7, 7});
    ASSERT_TRUE(hit);
    EXPECT_TRUE(hit->logits.empty());
    for (int32_t p : hit->page_ids) f.pages.release(p);
    const std::vector<float> small(16, 2.0f);
    f.cache.insert(1, root, std::vector<int32_t>{7, 7}, one, small);  // now it fits
    hit = f.cache.find(root, std::vector<int32_t>{7, 7});
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->logits, small);
    for (int32_t p : hit->page_ids) f.pages.release(p);
    f.pages.release(ids[0]);
}

}  // namespace
}  // namespace dwell

namespace dwell {
namespace {

// Hybrid models (ABI 1.6): an entry keeps the recurrent state after its
// page, charged like logits, added to an entry published without it, and
// given back to the budget when the entry goes.
TEST(KvPrefixCache, EntriesCarryTheRecurrentStateAfterTheirPage) {
    Fixture f;
    const uint64_t root = KvPrefixCache::root_key(1, DWELL_F16, 4);
    const std::vector<int32_t> a = {1, 2, 3, 4};
    const std::vector<int32_t> ids = {f.pages.allocate("t")};
    const auto kv_used = [&] { return f.memory.stats().used_by[static_cast<int>(MemoryUse::Kv)]; };
    const uint64_t before = kv_used();
    f.cache.insert(1, root, a, ids, {});  // a batch did not end at the page: no state
    auto hit = f.cache.find(root, a);
    ASSERT_TRUE(hit);
    EXPECT_TRUE(hit->state.empty());
    for (int32_t p : hit->page_ids) f.pages.release(p);

    const std::vector<float> state = {0.5f, -1.0f, 2.0f};
    f.cache.insert(1, root, a, ids, {}, state);  // another session had it there
    hit = f.cache.find(root, a);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->state, state);
    for (int32_t p : hit->page_ids) f.pages.release(p);
    EXPECT_EQ(kv_used(), before + state.size() * sizeof(float));

    f.cache.insert(1, root, a, ids, {}, std::vector<float>{9.0f, 9.0f, 9.0f});
    hit = f.cache.find(root, a);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->state, state);  // the first one stays
    for (int32_t p : hit->page_ids) f.pages.release(p);

    f.cache.forget_model(1);
    EXPECT_EQ(kv_used(), before);
    f.pages.release(ids[0]);
}

}  // namespace
}  // namespace dwell
