#include "host/cpu_topology.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <optional>

namespace dwell::cpu {
namespace {

std::optional<uint64_t> read_number(const std::filesystem::path& path) {
    std::ifstream in(path);
    uint64_t v = 0;
    if (in >> v) return v;
    return std::nullopt;
}

// The cores above the lowest tier of `file`'s value under cpuN/ (all of
// them when every core has the same value), or nullopt when no core has the
// file. "Above the lowest tier" rather than "the top value": a 4+3+1 phone's
// big cores are the 3 and the 1, and x86 chips with favoured cores publish a
// slightly higher frequency for one or two P-cores only.
std::optional<std::vector<int>> above_lowest(const std::vector<int>& cpus,
                                             const std::filesystem::path& dir, const char* file) {
    std::vector<std::pair<int, uint64_t>> values;
    for (int c : cpus) {
        if (auto v = read_number(dir / ("cpu" + std::to_string(c)) / file)) {
            values.emplace_back(c, *v);
        }
    }
    if (values.empty()) return std::nullopt;
    uint64_t low = values.front().second, top = low;
    for (const auto& [c, v] : values) {
        low = std::min(low, v);
        top = std::max(top, v);
    }
    // Within 10% of the lowest still counts as the little tier.
    const uint64_t cut = low + (top - low) / 10;
    std::vector<int> out;
    for (const auto& [c, v] : values) {
        if (top == low || v > cut) out.push_back(c);
    }
    return out;
}

}  // namespace

std::vector<int> allowed_cpus() {
    std::vector<int> out;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; ++c) {
            if (CPU_ISSET(c, &set)) out.push_back(c);
        }
    }
    return out;
}

std::vector<int> big_cores(const std::vector<int>& cpus,
                           const std::filesystem::path& sysfs_cpu_dir) {
    if (auto by_capacity = above_lowest(cpus, sysfs_cpu_dir, "cpu_capacity")) return *by_capacity;
    if (auto by_freq = above_lowest(cpus, sysfs_cpu_dir, "cpufreq/cpuinfo_max_freq")) {
        return *by_freq;
    }
    return cpus;
}

std::string cpu_list_string(const std::vector<int>& cpus) {
    std::string out;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(cpus[i]);
        if (j > i) {
            out += '-';
            out += std::to_string(cpus[j]);
        }
        i = j + 1;
    }
    return out;
}

}  // namespace dwell::cpu
