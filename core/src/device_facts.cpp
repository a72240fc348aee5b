#include "dwell/core/device_facts.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "dwell/core/manifest.hpp"

namespace dwell {

namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
    const char* ws = " \t\r\n";
    s.erase(0, s.find_first_not_of(ws));
    s.erase(s.find_last_not_of(ws) + 1);
    return s;
}

std::string read_first_line(const fs::path& p) {
    std::ifstream in(p);
    std::string line;
    if (in) std::getline(in, line);
    return trim(line);
}

bool contains(const std::vector<std::string>& list, const std::string& v) {
    return std::find(list.begin(), list.end(), v) != list.end();
}

}  // namespace

DeviceFacts DeviceFacts::probe(const fs::path& root_in) {
    fs::path root = root_in;
    if (const char* env = std::getenv("DWELL_SYSFS_ROOT"); env && *env) root = env;
    DeviceFacts f;
    utsname u{};
    if (uname(&u) == 0) f.arch = u.machine;
    std::ifstream cpuinfo(root / "proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);) {
        if (line.rfind("CPU part", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) f.cpu_part = trim(line.substr(colon + 1));
        }
    }
    f.soc_id = read_first_line(root / "sys/devices/soc0/soc_id");
    if (const char* env = std::getenv("DWELL_SOC_MODEL"); env && *env) f.soc_model = env;
    return f;
}

bool manifest_matches(const Manifest& m, const DeviceFacts& f) {
    const auto& r = m.match;
    if (r.arch.empty() && r.cpu_part.empty() && r.soc_id.empty() && r.soc_model.empty())
        return false;
    if (!r.arch.empty() && !contains(r.arch, f.arch)) return false;
    if (!r.cpu_part.empty() && !contains(r.cpu_part, f.cpu_part)) return false;
    if (!r.soc_id.empty() && !contains(r.soc_id, f.soc_id)) return false;
    if (!r.soc_model.empty() && !contains(r.soc_model, f.soc_model)) return false;
    return true;
}

int manifest_specificity(const Manifest& m) {
    const auto& r = m.match;
    return !r.arch.empty() + 2 * !r.cpu_part.empty() + 4 * !r.soc_id.empty() +
           4 * !r.soc_model.empty();
}

}  // namespace dwell
