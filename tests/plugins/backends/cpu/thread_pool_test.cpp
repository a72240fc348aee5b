// The pool covers every index exactly once, in disjoint ranges, for any
// size, repeatedly, and reports a range's exception to the caller.
#include "host/thread_pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dwell::cpu {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceForManySizes) {
    for (unsigned threads : {1u, 2u, 3u, 5u}) {
        ThreadPool pool(threads);
        EXPECT_EQ(pool.size(), threads);
        for (int64_t n : {0, 1, 2, 3, 7, 64, 1000}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            pool.parallel_for(n, [&](int64_t b, int64_t e) {
                ASSERT_LE(0, b);
                ASSERT_LT(b, e);
                ASSERT_LE(e, n);
                for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
            });
            for (int64_t i = 0; i < n; ++i)
                EXPECT_EQ(hits[static_cast<size_t>(i)], 1) << n << " " << i;
        }
    }
}

TEST(ThreadPool, UsesSeveralThreadsAndRespectsMinChunk) {
    ThreadPool pool(3);
    std::mutex m;
    std::set<std::thread::id> ids;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    // Each range waits (up to a generous deadline) until all three have
    // started: only three threads running at once get there.
    std::atomic<int> started{0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    pool.parallel_for(
        90,
        [&](int64_t b, int64_t e) {
            {
                std::lock_guard lock(m);
                ids.insert(std::this_thread::get_id());
                ranges.emplace_back(b, e);
            }
            ++started;
            while (started.load() < 3 && std::chrono::steady_clock::now() < deadline) {
                std::this_thread::yield();
            }
        },
        30);
    std::sort(ranges.begin(), ranges.end());
    EXPECT_EQ(ranges, (std::vector<std::pair<int64_t, int64_t>>{{0, 30}, {30, 60}, {60, 90}}));
    EXPECT_EQ(ids.size(), 3u);

    ranges.clear();
    pool.parallel_for(
        50, [&](int64_t b, int64_t e) { ranges.emplace_back(b, e); }, 100);
    ASSERT_EQ(ranges.size(), 1u);  // below min_chunk: inline, one range
    EXPECT_EQ(ranges[0], std::make_pair(int64_t{0}, int64_t{50}));
}

// Eight threads pinned to one CPU: most jobs find the workers descheduled,
// and the caller must finish them without waiting for those workers.
TEST(ThreadPool, MoreThreadsThanCoresStillFinish) {
    const std::vector<int> one = {0};
    const CpuAffinityScope pin(one);
    ThreadPool pool(8, one);
    std::atomic<int64_t> total{0};
    for (int job = 0; job < 500; ++job) {
        pool.parallel_for_dynamic(
            64, [&](int64_t b, int64_t e) { total += e - b; }, 4);
        pool.parallel_for(16, [&](int64_t b, int64_t e) { total += e - b; });
    }
    EXPECT_EQ(total.load(), 500 * (64 + 16));
}

TEST(ThreadPool, DynamicRangesCoverEveryIndexOnce) {
    for (unsigned threads : {2u, 3u, 5u}) {
        ThreadPool pool(threads);
        for (int64_t n : {1, 2, 3, 5, 63, 64, 65, 1000}) {
            for (int64_t chunk : {1, 4, 64}) {
                std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
                pool.parallel_for_dynamic(
                    n,
                    [&](int64_t b, int64_t e) {
                        EXPECT_LE(e - b, chunk);
                        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
                    },
                    chunk);
                for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1);
            }
        }
    }
}

// Each thread walks its own contiguous share front to back (so prefetching
// carries from one range into the next); others take from the share's far
// end. The caller's share is the first: what the caller runs of [0, 300)
// is one ascending run from 0.
TEST(ThreadPool, DynamicRangesWalkTheOwnShareInOrder) {
    for (unsigned threads : {2u, 3u, 5u}) {
        ThreadPool pool(threads);
        for (int job = 0; job < 50; ++job) {
            const std::thread::id caller = std::this_thread::get_id();
            const int64_t share = 900 / threads;
            std::vector<std::pair<int64_t, int64_t>> mine;  // only the caller writes
            std::vector<std::atomic<int>> hits(900);
            pool.parallel_for_dynamic(
                900,
                [&](int64_t b, int64_t e) {
                    if (std::this_thread::get_id() == caller && b < share) mine.emplace_back(b, e);
                    for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
                },
                7);
            for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
            int64_t next = 0;
            for (const auto& [b, e] : mine) {
                ASSERT_EQ(b, next) << threads << " threads, job " << job;
                next = e;
            }
        }
    }
}

TEST(ThreadPool, ManyBackToBackJobs) {
    ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    for (int job = 0; job < 2000; ++job) {
        pool.parallel_for(10, [&](int64_t b, int64_t e) { total += e - b; });
    }
    EXPECT_EQ(total.load(), 20000);
}

TEST(ThreadPool, RethrowsAfterAllRangesFinish) {
    ThreadPool pool(3);
    std::atomic<int> finished{0};
    EXPECT_THROW(pool.parallel_for(3,
                                   [&](int64_t b, int64_t) {
                                       if (b == 1) throw std::runtime_error("boom");
                                       finished++;
                                   }),
                 std::runtime_error);
    EXPECT_EQ(finished.load(), 2);
    // The pool still works afterwards.
    std::atomic<int> count{0};
    pool.parallel_for(6, [&](int64_t b, int64_t e) { count += static_cast<int>(e - b); });
    EXPECT_EQ(count.load(), 6);
}

TEST(ThreadPool, DefaultThreadsIsPositive) {
    EXPECT_GE(ThreadPool::default_threads(), 1u);
}

}  // namespace
}  // namespace dwell::cpu
