#include "dwell/core/platform/system_memory.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>
#include <string>
#include <vector>

#include "dwell/core/platform/device_file.hpp"

namespace dwell {

namespace fs = std::filesystem;

namespace {

// Never throws: a broken file here is memory unknown (0), which callers
// handle; DeviceFacts::probe is where a broken tree is reported.
std::string read_quietly(const fs::path& file, uint64_t max_bytes) {
    DeviceFileRead r = read_device_file(file, max_bytes);
    return r.ok() ? std::move(r.text) : std::string();
}

uint64_t meminfo_bytes(const fs::path& root, std::string_view key) {
    return meminfo_field_bytes(read_quietly(root / "proc/meminfo", kMaxDeviceListingBytes), key);
}

// v1 reports "no limit" as a huge page-rounded number (2^63 - 4096 on
// 4 KiB pages); anything this large is no limit on any real device.
constexpr uint64_t kNoLimit = uint64_t{1} << 62;

// The first line of a cgroup file as a byte count; nullopt when absent,
// "max" (v2: no limit) or not a number.
std::optional<uint64_t> read_bytes(const fs::path& file) {
    const std::string text = read_quietly(file, kMaxDeviceValueBytes);
    if (text.empty()) return std::nullopt;
    std::string line = text.substr(0, text.find('\n'));
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || end != line.data() + line.size()) return std::nullopt;
    return v;
}

struct Hierarchy {
    fs::path mount;  // under root
    fs::path group;  // the process's cgroup, relative to the mount
    const char* limit_file;
    const char* usage_file;
};

// The memory hierarchies /proc/self/cgroup names: the v2 line ("0::/path")
// and the v1 line whose controllers include "memory".
std::vector<Hierarchy> memory_hierarchies(const fs::path& root) {
    std::vector<Hierarchy> out;
    std::istringstream in(read_quietly(root / "proc/self/cgroup", kMaxDeviceListingBytes));
    for (std::string line; std::getline(in, line);) {
        const size_t a = line.find(':');
        const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1);
        // The group's path comes from the kernel, but is treated like any
        // other input: it must stay inside the mount.
        const fs::path group = fs::path(line.substr(b + 1)).relative_path().lexically_normal();
        if (!group.empty() && *group.begin() == "..") continue;
        if (controllers.empty() && line.compare(0, a, "0") == 0) {
            out.push_back({root / "sys/fs/cgroup", group, "memory.max", "memory.current"});
            continue;
        }
        std::istringstream list(controllers);
        for (std::string c; std::getline(list, c, ',');) {
            if (c != "memory") continue;
            for (const char* mount : {"sys/fs/cgroup/memory", "dev/memcg"}) {
                out.push_back(
                    {root / mount, group, "memory.limit_in_bytes", "memory.usage_in_bytes"});
            }
        }
    }
    return out;
}

// Calls f(limit, usage) for each level, from the process's cgroup up to the
// mount, that sets a limit.
template <class F>
void for_each_limit(const fs::path& root, F f) {
    for (const Hierarchy& h : memory_hierarchies(root)) {
        fs::path group = h.group;
        while (true) {
            const fs::path dir = group.empty() || group == "." ? h.mount : h.mount / group;
            const std::optional<uint64_t> limit = read_bytes(dir / h.limit_file);
            if (limit && *limit < kNoLimit) f(*limit, read_bytes(dir / h.usage_file).value_or(0));
            if (group.empty() || group == "." || !group.has_parent_path()) break;
            group = group.parent_path();
        }
    }
}

}  // namespace

uint64_t meminfo_field_bytes(std::string_view meminfo, std::string_view key) {
    size_t at = 0;
    while (at < meminfo.size()) {
        const size_t eol = std::min(meminfo.find('\n', at), meminfo.size());
        const std::string_view line = meminfo.substr(at, eol - at);
        at = eol + 1;
        if (line.substr(0, key.size()) != key) continue;
        const char* p = line.data() + key.size();
        const char* end = line.data() + line.size();
        while (p < end && (*p == ' ' || *p == '\t')) ++p;
        uint64_t kib = 0;
        const auto [stop, ec] = std::from_chars(p, end, kib);
        if (ec != std::errc() || stop == p || kib > UINT64_MAX / 1024) return 0;
        return kib * 1024;
    }
    return 0;
}

std::optional<uint64_t> cgroup_memory_left_bytes(const fs::path& root) {
    std::optional<uint64_t> left;
    for_each_limit(root, [&](uint64_t limit, uint64_t usage) {
        const uint64_t here = limit > usage ? limit - usage : 0;
        left = std::min(left.value_or(here), here);
    });
    return left;
}

std::optional<uint64_t> cgroup_memory_limit_bytes(const fs::path& root) {
    std::optional<uint64_t> tightest;
    for_each_limit(root, [&](uint64_t limit, uint64_t) {
        tightest = std::min(tightest.value_or(limit), limit);
    });
    return tightest;
}

uint64_t available_memory_bytes(const fs::path& root) {
    const uint64_t meminfo = meminfo_bytes(root, "MemAvailable:");
    const std::optional<uint64_t> cgroup = cgroup_memory_left_bytes(root);
    if (!cgroup) return meminfo;
    // A cgroup with nothing left is 0, which callers read as "unknown"; one
    // byte keeps it a refusal.
    const uint64_t left = std::max<uint64_t>(*cgroup, 1);
    return meminfo ? std::min(meminfo, left) : left;
}

uint64_t physical_memory_bytes(const fs::path& root) {
    const uint64_t total = meminfo_bytes(root, "MemTotal:");
    const std::optional<uint64_t> cgroup = cgroup_memory_limit_bytes(root);
    if (!cgroup || *cgroup == 0) return total;
    return total ? std::min(total, *cgroup) : *cgroup;
}

}  // namespace dwell
