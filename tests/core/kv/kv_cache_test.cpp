// The paged KV cache of one sequence: page tables as the ATTENTION op reads
// them, fork sharing every page, copy on write at the first write into a
// shared page, truncation giving pages back, and the row formats' sizes.
#include "dwell/core/kv/kv_cache.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "dwell/core/base/error.hpp"

namespace dwell {
namespace {

constexpr size_t kPage = 16384;

struct Fixture {
    MemoryPool memory{kPage, 0};
    KvPagePool pages{memory, 256 * kPage};
};

// Layer l, K/V `which`, position `pos` filled with a recognisable byte.
void fill_row(const KvCache& kv, int32_t l, int32_t which, int64_t pos, unsigned char v) {
    std::memset(kv.row(l, which, pos), v, kv.row_bytes());
}

TEST(KvCache, RowSizesAndPagesPerFormat) {
    Fixture f;
    // The synthetic 1.1B shape: 16 layers of 8 KV heads x 64.
    const KvCache f16(f.pages, 16, 512, 2048, DWELL_F16);
    const KvCache q8(f.pages, 16, 512, 2048, DWELL_Q8_0);
    const KvCache fp8(f.pages, 16, 512, 2048, DWELL_FP8_E4M3);
    EXPECT_EQ(f16.bytes_per_token(), 512u * 2 * 2 * 16);
    EXPECT_EQ(q8.bytes_per_token(), 544u * 2 * 16);  // 16 blocks of 34 bytes
    EXPECT_EQ(fp8.bytes_per_token(), 512u * 2 * 16);
    EXPECT_EQ(f16.rows_per_page(), 16);
    EXPECT_EQ(q8.rows_per_page(), 30);
    EXPECT_EQ(fp8.rows_per_page(), 32);
    EXPECT_THROW(KvCache(f.pages, 2, 48, 64, DWELL_Q8_0), Error);  // not whole blocks
    EXPECT_THROW(KvCache(f.pages, 2, 64, 64, DWELL_Q4_0), Error);
    EXPECT_THROW(KvCache(f.pages, 2, 8192, 64, DWELL_F32), Error);  // a row over a page
}

TEST(KvCache, PageTablesAreWhatAttentionReads) {
    Fixture f;
    KvCache kv(f.pages, 2, 64, 100, DWELL_F16);  // 128-byte rows: 128 per page
    EXPECT_EQ(kv.n_pages(), 0);
    kv.prepare_write(0, 100);
    EXPECT_EQ(kv.n_pages(), 1);
    EXPECT_EQ(kv.pages_held(), 4);
    for (int32_t l = 0; l < 2; ++l) {
        const dwell_tensor* space = kv.tensor(l, 0);
        const dwell_tensor* table = kv.tensor(l, 1);
        ASSERT_NE(space, nullptr);
        ASSERT_NE(table, nullptr);
        EXPECT_EQ(space->dtype, DWELL_F16);
        EXPECT_EQ(space->ne[0], 64);
        EXPECT_EQ(space->ne[1], 128);
        EXPECT_EQ(space->nb[1], 128u);
        EXPECT_EQ(space->nb[2], kPage);
        EXPECT_EQ(table->dtype, DWELL_I32);
        EXPECT_EQ(table->ne[0], 2);
        EXPECT_EQ(table->ne[1], 1);
        const auto* ids = static_cast<const int32_t*>(table->data);
        for (int which = 0; which < 2; ++which) {
            const unsigned char* row7 = static_cast<const unsigned char*>(space->data) +
                                        ids[which] * space->nb[2] + 7 * space->nb[1];
            EXPECT_EQ(row7, kv.row(l, which, 7));
        }
    }
    EXPECT_EQ(kv.tensor(2, 0), nullptr);
    EXPECT_EQ(kv.tensor(0, 2), nullptr);
    EXPECT_THROW(kv.prepare_write(90, 101), Error);  // past the context
}

TEST(KvCache, ForkSharesPagesAndCopiesOnWrite) {
    Fixture f;
    KvCache a(f.pages, 2, 512, 64, DWELL_F16);  // 16 rows per page
    a.prepare_write(0, 20);                     // two logical pages
    for (int64_t pos = 0; pos < 20; ++pos) {
        for (int32_t l = 0; l < 2; ++l) {
            fill_row(a, l, 0, pos, static_cast<unsigned char>(pos));
            fill_row(a, l, 1, pos, static_cast<unsigned char>(100 + pos));
        }
    }
    const int32_t in_use = f.pages.pages_in_use();
    KvCache b = a.fork();
    EXPECT_EQ(f.pages.pages_in_use(), in_use);  // nothing copied yet
    EXPECT_EQ(b.page_ids(0), a.page_ids(0));
    EXPECT_EQ(b.page_ids(1), a.page_ids(1));
    for (int32_t p : a.page_ids(1)) EXPECT_EQ(f.pages.refcount(p), 2);

    // b writes position 20 (in logical page 1): page 1 of every layer is
    // copied for b, page 0 stays shared.
    b.prepare_write(20, 21);
    EXPECT_EQ(b.page_ids(0), a.page_ids(0));
    for (size_t i = 0; i < 4; ++i) EXPECT_NE(b.page_ids(1)[i], a.page_ids(1)[i]);
    EXPECT_EQ(f.pages.pages_in_use(), in_use + 4);
    for (int64_t pos = 16; pos < 20; ++pos) {
        EXPECT_EQ(std::memcmp(a.row(1, 0, pos), b.row(1, 0, pos), a.row_bytes()), 0);
    }
    fill_row(b, 1, 0, 18, 0xee);
    EXPECT_EQ(a.row(1, 0, 18)[0], 18);  // a never sees b's writes
    EXPECT_EQ(b.row(1, 0, 18)[0], 0xee);
    for (int32_t p : a.page_ids(1)) EXPECT_EQ(f.pages.refcount(p), 1);

    // a writing into its now unshared page copies nothing.
    a.prepare_write(19, 20);
    EXPECT_EQ(f.pages.pages_in_use(), in_use + 4);
}

TEST(KvCache, TruncateAndDestructionGiveEveryPageBack) {
    Fixture f;
    {
        KvCache a(f.pages, 3, 512, 100, DWELL_Q8_0);  // 30 rows per page
        a.prepare_write(0, 95);
        EXPECT_EQ(a.n_pages(), 4);
        KvCache b = a.fork();
        a.truncate(31);  // keeps pages 0 and 1
        EXPECT_EQ(a.n_pages(), 2);
        EXPECT_EQ(b.n_pages(), 4);
        EXPECT_EQ(f.pages.pages_in_use(), 4 * 3 * 2);  // b still holds all four
        a.truncate(0);
        EXPECT_EQ(a.n_pages(), 0);
        KvCache c = std::move(b);
        EXPECT_EQ(c.n_pages(), 4);
        EXPECT_EQ(f.pages.pages_in_use(), 4 * 3 * 2);
    }
    EXPECT_EQ(f.pages.pages_in_use(), 0);
    EXPECT_EQ(f.memory.stats().used_bytes, 0u);
}

TEST(KvCache, AdoptedPagesAreShared) {
    Fixture f;
    KvCache a(f.pages, 2, 512, 64, DWELL_F16);
    a.prepare_write(0, 16);
    KvCache b(f.pages, 2, 512, 64, DWELL_F16);
    b.adopt_page(a.page_ids(0));
    EXPECT_EQ(b.page_ids(0), a.page_ids(0));
    for (int32_t p : a.page_ids(0)) EXPECT_EQ(f.pages.refcount(p), 2);
    const std::vector<int32_t> too_few = {1, 2};
    EXPECT_THROW(b.adopt_page(too_few), Error);
}

}  // namespace
}  // namespace dwell
