// Big-core detection from a fake sysfs tree, and the affinity the pool and
// CpuAffinityScope set (checked with sched_getaffinity / sched_getcpu).
#include "host/cpu_topology.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "host/thread_pool.hpp"

namespace dwell::cpu {
namespace {

namespace fs = std::filesystem;

class FakeSysfs : public ::testing::Test {
protected:
    void SetUp() override {
        std::random_device rd;
        dir_ = fs::temp_directory_path() / ("dwell-sysfs-" + std::to_string(rd()));
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    void put(int cpu, const std::string& file, const std::string& value) {
        const fs::path p = dir_ / ("cpu" + std::to_string(cpu)) / file;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << value << "\n";
    }
    fs::path dir_;
};

TEST_F(FakeSysfs, CapacityKeepsEveryTierAboveTheLittleCores) {
    // A 4+3+1 phone: little 0-3 (capacity 325), big 4-6 (825), prime 7 (1024).
    for (int c = 0; c < 8; ++c) put(c, "cpu_capacity", c < 4 ? "325" : c < 7 ? "825" : "1024");
    for (int c = 0; c < 8; ++c) put(c, "cpufreq/cpuinfo_max_freq", "2000000");
    EXPECT_EQ(big_cores({0, 1, 2, 3, 4, 5, 6, 7}, dir_), (std::vector<int>{4, 5, 6, 7}));
    // Only among the allowed CPUs.
    EXPECT_EQ(big_cores({0, 1, 4, 5}, dir_), (std::vector<int>{4, 5}));
}

TEST_F(FakeSysfs, FavouredCoresDoNotShrinkTheBigSet) {
    // A desktop chip whose two favoured P-cores boost 100 MHz higher, and
    // E-cores far below.
    const char* freq[] = {"5100000", "5100000", "5000000", "5000000", "3800000", "3800000"};
    for (int c = 0; c < 6; ++c) put(c, "cpufreq/cpuinfo_max_freq", freq[c]);
    EXPECT_EQ(big_cores({0, 1, 2, 3, 4, 5}, dir_), (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(FakeSysfs, MaxFrequencyWhenNoCapacity) {
    for (int c = 0; c < 6; ++c) {
        put(c, "cpufreq/cpuinfo_max_freq", c >= 2 && c < 4 ? "3100000" : "1800000");
    }
    EXPECT_EQ(big_cores({0, 1, 2, 3, 4, 5}, dir_), (std::vector<int>{2, 3}));
}

TEST_F(FakeSysfs, AllCoresWhenNothingIsPublished) {
    EXPECT_EQ(big_cores({0, 1, 2}, dir_), (std::vector<int>{0, 1, 2}));
    put(1, "cpu_capacity", "not a number");
    EXPECT_EQ(big_cores({0, 1, 2}, dir_), (std::vector<int>{0, 1, 2}));
}

TEST(CpuTopology, ListString) {
    EXPECT_EQ(cpu_list_string({}), "");
    EXPECT_EQ(cpu_list_string({3}), "3");
    EXPECT_EQ(cpu_list_string({0, 1, 2, 3, 6, 8, 9}), "0-3,6,8-9");
}

TEST(CpuTopology, AllowedCpusIncludesTheCurrentOne) {
    const std::vector<int> cpus = allowed_cpus();
    ASSERT_FALSE(cpus.empty());
    const int now = sched_getcpu();
    EXPECT_NE(std::find(cpus.begin(), cpus.end(), now), cpus.end());
}

TEST(CpuAffinity, PoolWorkersRunOnTheirCpuAndScopeRestores) {
    const std::vector<int> cpus = allowed_cpus();
    ASSERT_FALSE(cpus.empty());
    const int target = cpus.back();
    ThreadPool pool(3, {target});
    EXPECT_EQ(pool.cpus(), (std::vector<int>{target}));
    std::atomic<int> off_target{0};
    {
        const CpuAffinityScope scope(pool.cpus());
        for (int round = 0; round < 20; ++round) {
            pool.parallel_for(3, [&](int64_t, int64_t) {
                if (sched_getcpu() != target) ++off_target;
            });
        }
    }
    EXPECT_EQ(off_target.load(), 0);
    // The caller's mask is back to what it was.
    EXPECT_EQ(allowed_cpus(), cpus);
}

}  // namespace
}  // namespace dwell::cpu
