#include "dwell/core/system_memory.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace dwell {

namespace {

uint64_t meminfo_bytes(const std::filesystem::path& root, const std::string& key) {
    std::ifstream in(root / "proc/meminfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(key, 0) != 0) continue;
        std::istringstream fields(line.substr(key.size()));
        uint64_t kib = 0;
        if (fields >> kib) return kib * 1024;
    }
    return 0;
}

}  // namespace

uint64_t available_memory_bytes(const std::filesystem::path& root) {
    return meminfo_bytes(root, "MemAvailable:");
}

uint64_t physical_memory_bytes(const std::filesystem::path& root) {
    return meminfo_bytes(root, "MemTotal:");
}

}  // namespace dwell
