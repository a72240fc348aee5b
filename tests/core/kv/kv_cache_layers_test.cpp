// A hybrid model's KV cache (ABI 1.6): layers that never attend get no
// pages, and every path that walks the tables (copy on write, fork,
// truncation, adoption, the prefix cache) skips them.
#include <gtest/gtest.h>

#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/kv/kv_cache.hpp"
#include "dwell/core/kv/kv_prefix_cache.hpp"

namespace dwell {
namespace {

constexpr size_t kPage = 16384;

struct Fixture {
    MemoryPool memory{kPage, 0};
    KvPagePool pages{memory, 64 * kPage};
};

TEST(KvCacheLayers, OnlyTheLayersWithKvTakePages) {
    Fixture f;
    KvCache kv(f.pages, 3, 512, 64, DWELL_F16);  // 16 rows a page
    kv.use_layers({false, false, true});
    EXPECT_EQ(kv.bytes_per_token(), 512u * 2 * 2);
    kv.prepare_write(0, 20);
    EXPECT_EQ(kv.n_pages(), 2);
    EXPECT_EQ(kv.pages_held(), 2 * 2);
    EXPECT_EQ(f.pages.pages_in_use(), 4);
    EXPECT_EQ(kv.tensor(0, 0), nullptr);
    EXPECT_EQ(kv.tensor(1, 1), nullptr);
    EXPECT_NE(kv.tensor(2, 0), nullptr);
    EXPECT_THROW(kv.row(0, 0, 3), Error);
    kv.row(2, 1, 19)[0] = 7;
    const std::vector<int32_t> ids = kv.page_ids(1);
    ASSERT_EQ(ids.size(), 6u);
    EXPECT_EQ(ids[0], KvCache::kNoPage);
    EXPECT_EQ(ids[3], KvCache::kNoPage);
    EXPECT_GE(ids[4], 0);
    EXPECT_THROW(kv.use_layers({true, true, true}), Error);  // pages exist

    // A fork shares the pages and the layers; its first write copies.
    KvCache b = kv.fork();
    EXPECT_FALSE(b.uses_layer(0));
    EXPECT_EQ(f.pages.pages_in_use(), 4);
    b.prepare_write(19, 20);
    EXPECT_EQ(f.pages.pages_in_use(), 6);
    EXPECT_EQ(b.row(2, 1, 19)[0], 7);

    // A page of every layer does not fit a cache without KV in layer 0.
    KvCache c(f.pages, 3, 512, 64, DWELL_F16);
    c.use_layers({false, false, true});
    const std::vector<int32_t> all = {ids[4], ids[5], ids[4], ids[5], ids[4], ids[5]};
    EXPECT_THROW(c.adopt_page(all), Error);
    c.adopt_page(ids);
    EXPECT_EQ(c.pages_held(), 2);
    b.truncate(0);
    c.truncate(0);
    kv.truncate(0);
    EXPECT_EQ(f.pages.pages_in_use(), 0);
}

TEST(KvCacheLayers, ThePrefixCacheHoldsOnlyRealPages) {
    Fixture f;
    KvPrefixCache cache(f.pages, f.memory, 8);
    KvCache kv(f.pages, 2, 512, 64, DWELL_F16);
    kv.use_layers({false, true});
    kv.prepare_write(0, 16);
    const uint64_t root = KvPrefixCache::root_key(1, DWELL_F16, 16);
    const std::vector<int32_t> tokens(16, 3);
    cache.insert(1, root, tokens, kv.page_ids(0), {});
    EXPECT_EQ(cache.pages_held(), 2);
    auto hit = cache.find(root, tokens);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->page_ids, kv.page_ids(0));
    for (int32_t p : hit->page_ids)
        if (p != KvCache::kNoPage) f.pages.release(p);
    kv.truncate(0);
    EXPECT_EQ(cache.reclaim(8), 2);  // only the cache held them
    EXPECT_EQ(cache.pages_held(), 0);
    EXPECT_EQ(f.pages.pages_in_use(), 0);
}

}  // namespace
}  // namespace dwell
