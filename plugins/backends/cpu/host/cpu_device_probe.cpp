#include "host/cpu_device_probe.hpp"

#include <sys/utsname.h>

#include <fstream>
#include <sstream>

namespace dwell::cpu {

namespace {

std::string_view trim(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return {};
    const auto last = s.find_last_not_of(" \t\r");
    return s.substr(first, last - first + 1);
}

// The value of the first "key : value" line whose key is `key`, or "".
std::string_view field(std::string_view text, std::string_view key) {
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view line = text.substr(start, end - start);
        const size_t colon = line.find(':');
        if (colon != std::string_view::npos && trim(line.substr(0, colon)) == key) {
            return trim(line.substr(colon + 1));
        }
        start = end + 1;
    }
    return {};
}

uint64_t kib_field(std::string_view text, std::string_view key) {
    const std::string_view v = field(text, key);
    uint64_t n = 0;
    size_t i = 0;
    for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i) n = n * 10 + (v[i] - '0');
    if (i == 0) return 0;
    return v.substr(i).find("kB") != std::string_view::npos ? n * 1024 : n;
}

std::string read_file(const char* path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

std::string cpu_model_from_cpuinfo(std::string_view cpuinfo) {
    for (std::string_view key : {"model name", "Hardware", "Processor"}) {
        const std::string_view v = field(cpuinfo, key);
        if (!v.empty()) return std::string(v);
    }
    const std::string_view implementer = field(cpuinfo, "CPU implementer");
    if (!implementer.empty()) {
        std::string model = "CPU implementer " + std::string(implementer);
        const std::string_view part = field(cpuinfo, "CPU part");
        if (!part.empty()) model += " part " + std::string(part);
        return model;
    }
    return "unknown CPU";
}

MemoryInfo memory_from_meminfo(std::string_view meminfo) {
    MemoryInfo m;
    m.total = kib_field(meminfo, "MemTotal");
    m.available = kib_field(meminfo, "MemAvailable");
    if (m.available == 0) m.available = kib_field(meminfo, "MemFree");
    return m;
}

CpuIdentity probe_cpu_identity() {
    CpuIdentity id;
    id.model = cpu_model_from_cpuinfo(read_file("/proc/cpuinfo"));
    struct utsname u {};
    const std::string arch = uname(&u) == 0 ? u.machine : "unknown";
    id.hardware_id = "cpu:" + arch + ":" + id.model;
    return id;
}

MemoryInfo probe_memory() {
    return memory_from_meminfo(read_file("/proc/meminfo"));
}

}  // namespace dwell::cpu
