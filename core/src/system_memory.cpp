#include "dwell/core/system_memory.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace dwell {

uint64_t available_memory_bytes(const std::filesystem::path& root) {
    std::ifstream in(root / "proc/meminfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("MemAvailable:", 0) != 0) continue;
        std::istringstream fields(line.substr(13));
        uint64_t kib = 0;
        if (fields >> kib) return kib * 1024;
    }
    return 0;
}

}  // namespace dwell
