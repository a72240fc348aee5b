// Available memory is the least of /proc/meminfo and what the process's
// memory cgroup (v2 or v1, as Android mounts them) still allows, read under
// a relocatable root: each case fakes a device tree in a temporary folder.
#include "dwell/core/platform/system_memory.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "test_dirs.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = uint64_t{1} << 20;

class SystemMemory : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = test::fresh_test_dir("dwell-sysmem");
        // 8 GiB available of 16 GiB.
        write("proc/meminfo",
              "MemTotal:       16777216 kB\nMemFree:  100 kB\nMemAvailable:    8388608 kB\n");
    }
    void TearDown() override { test::remove_test_dir(root_); }

    void write(const std::string& rel, const std::string& text) {
        fs::create_directories((root_ / rel).parent_path());
        std::ofstream(root_ / rel) << text;
    }

    fs::path root_;
};

TEST_F(SystemMemory, MeminfoAloneWithoutACgroup) {
    EXPECT_EQ(available_memory_bytes(root_), 8192 * kMiB);
    EXPECT_EQ(physical_memory_bytes(root_), 16384 * kMiB);
    EXPECT_FALSE(cgroup_memory_left_bytes(root_));
}

TEST_F(SystemMemory, CgroupV2LimitMinusUsage) {
    write("proc/self/cgroup", "0::/apps/uid_10123/pid_4242\n");
    write("sys/fs/cgroup/apps/uid_10123/pid_4242/memory.max", "1073741824\n");
    write("sys/fs/cgroup/apps/uid_10123/pid_4242/memory.current", "268435456\n");
    EXPECT_EQ(available_memory_bytes(root_), 768 * kMiB);
    EXPECT_EQ(physical_memory_bytes(root_), 1024 * kMiB);
}

TEST_F(SystemMemory, CgroupV2TightestAncestorWinsAndMaxIsNoLimit) {
    write("proc/self/cgroup", "0::/apps/uid_10123/pid_4242\n");
    write("sys/fs/cgroup/apps/uid_10123/pid_4242/memory.max", "max\n");
    write("sys/fs/cgroup/apps/uid_10123/pid_4242/memory.current", "100\n");
    write("sys/fs/cgroup/apps/memory.max", "536870912\n");
    write("sys/fs/cgroup/apps/memory.current", "134217728\n");
    EXPECT_EQ(available_memory_bytes(root_), 384 * kMiB);
}

TEST_F(SystemMemory, CgroupV2MaxEverywhereIsMeminfo) {
    write("proc/self/cgroup", "0::/user.slice\n");
    write("sys/fs/cgroup/user.slice/memory.max", "max\n");
    write("sys/fs/cgroup/user.slice/memory.current", "100\n");
    EXPECT_EQ(available_memory_bytes(root_), 8192 * kMiB);
}

TEST_F(SystemMemory, CgroupV1AndroidMemcg) {
    write("proc/self/cgroup", "5:cpuset:/top-app\n4:memory:/apps\n3:cpu,cpuacct:/\n");
    write("dev/memcg/apps/memory.limit_in_bytes", "2147483648\n");
    write("dev/memcg/apps/memory.usage_in_bytes", "1610612736\n");
    EXPECT_EQ(available_memory_bytes(root_), 512 * kMiB);
}

TEST_F(SystemMemory, CgroupV1UnlimitedIsMeminfo) {
    write("proc/self/cgroup", "4:cpuacct,memory:/docker/abc\n");
    write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
    write("sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "4096\n");
    EXPECT_EQ(available_memory_bytes(root_), 8192 * kMiB);
}

TEST_F(SystemMemory, MeminfoBelowTheCgroupWins) {
    write("proc/self/cgroup", "0::/\n");
    write("sys/fs/cgroup/memory.max", "34359738368\n");  // 32 GiB
    write("sys/fs/cgroup/memory.current", "0\n");
    EXPECT_EQ(available_memory_bytes(root_), 8192 * kMiB);
}

TEST_F(SystemMemory, ExhaustedCgroupIsARefusalNotUnknown) {
    write("proc/self/cgroup", "0::/full\n");
    write("sys/fs/cgroup/full/memory.max", "1048576\n");
    write("sys/fs/cgroup/full/memory.current", "2097152\n");
    const uint64_t left = available_memory_bytes(root_);
    EXPECT_GT(left, 0u);
    EXPECT_LE(left, 1u);
}

TEST_F(SystemMemory, HostileCgroupPathStaysInsideTheMount) {
    fs::create_directories(root_);
    write("proc/self/cgroup", "0::/../../outside\n");
    write("sys/outside/memory.max", "1048576\n");
    write("sys/outside/memory.current", "0\n");
    EXPECT_EQ(available_memory_bytes(root_), 8192 * kMiB);
}

}  // namespace
}  // namespace dwell
