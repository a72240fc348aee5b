// Which CPUs the backend may run on, and which of them are the big cores of
// a big.LITTLE (or prime/performance/efficiency) system, read from sysfs:
// cpu_capacity where the kernel publishes it (arm64), else
// cpufreq/cpuinfo_max_freq: every core above the lowest tier. A system where
// every core looks alike has only big cores.
//
// Thread-safety: pure functions over the file system. Ownership: values.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dwell::cpu {

// The CPUs this thread may run on (sched_getaffinity), ascending.
std::vector<int> allowed_cpus();

// The subset of `cpus` above the lowest capacity (or max-frequency) tier per
// `sysfs_cpu_dir` (normally /sys/devices/system/cpu); `cpus` itself when all
// are alike or neither file is readable for any of them.
std::vector<int> big_cores(const std::vector<int>& cpus,
                           const std::filesystem::path& sysfs_cpu_dir = "/sys/devices/system/cpu");

// "0-3,6" style, for logs.
std::string cpu_list_string(const std::vector<int>& cpus);

}  // namespace dwell::cpu
