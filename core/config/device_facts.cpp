#include "dwell/core/config/device_facts.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/config/manifest.hpp"
#include "dwell/core/platform/device_file.hpp"
#include "dwell/core/platform/system_memory.hpp"
#include "dwell/core/platform/text_file.hpp"

namespace dwell {

namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
    const char* ws = " \t\r\n";
    s.erase(0, s.find_first_not_of(ws));
    s.erase(s.find_last_not_of(ws) + 1);
    return s;
}

std::string first_line(const std::string& text) {
    return trim(text.substr(0, text.find('\n')));
}

std::string read_first_line(const fs::path& p) {
    return first_line(read_device_file_or_throw(p, kMaxDeviceValueBytes).value_or(""));
}

std::optional<int64_t> read_number(const fs::path& p) {
    const std::string line = read_first_line(p);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || end == line.data()) return std::nullopt;
    return v;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool listed(const std::vector<std::string>& list, const std::string& v) {
    const std::string lv = lower(v);
    return std::any_of(list.begin(), list.end(),
                       [&](const std::string& x) { return lower(x) == lv; });
}

// "key: value" of a /proc/cpuinfo line, or nothing.
std::optional<std::pair<std::string, std::string>> cpuinfo_field(const std::string& line) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) return std::nullopt;
    return std::make_pair(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
}

// The running device's properties: the getprop command's output, if this is
// Android (or HarmonyOS, whose getprop still answers the ro.* names).
std::string run_getprop() {
    for (const char* exe : {"/system/bin/getprop", "/bin/getprop"}) {
        std::error_code ec;
        if (!fs::exists(exe, ec)) continue;
        std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(exe, "r"), ::pclose);
        if (!pipe) return {};
        std::string out;
        std::array<char, 4096> buf{};
        for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe.get())) > 0;)
            out.append(buf.data(), n);
        return out;
    }
    return {};
}

// The cores above the lowest tier of a per-core value (all of them when
// every core has the same value). "Above the lowest tier" rather than "the
// top value": a 4+3+1 phone's big cores are the 3 and the 1.
std::vector<int> above_lowest_tier(const std::vector<CpuCore>& cores, uint64_t CpuCore::*value) {
    uint64_t low = UINT64_MAX, top = 0;
    for (const CpuCore& c : cores) {
        low = std::min(low, c.*value);
        top = std::max(top, c.*value);
    }
    // Within 10% of the lowest still counts as the little tier.
    const uint64_t cut = low + (top - low) / 10;
    std::vector<int> out;
    for (const CpuCore& c : cores)
        if (top == low || c.*value > cut) out.push_back(c.id);
    return out;
}

// Linux's NR_CPUS ceiling on arm64 and x86_64 builds.
constexpr int kMaxCores = 8192;

void read_cpus(const fs::path& root, DeviceFacts& f) {
    std::istringstream cpuinfo(
        read_device_file_or_throw(root / "proc/cpuinfo", kMaxDeviceListingBytes).value_or(""));
    CpuCore* current = nullptr;
    bool arm = false, x86 = false;
    for (std::string line; std::getline(cpuinfo, line);) {
        const auto field = cpuinfo_field(line);
        if (!field) continue;
        const auto& [key, value] = *field;
        if (key == "processor") {
            int id = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), id);
            // A core number the kernel never writes: the file is not a cpuinfo.
            if (ec != std::errc() || id < 0 || id >= kMaxCores) continue;
            // More entries than cores can exist: stop, so that a hostile file
            // cannot make thousands of sysfs reads below.
            if (f.cores.size() >= static_cast<size_t>(kMaxCores)) break;
            f.cores.push_back(CpuCore{id, {}, 0, 0});
            current = &f.cores.back();
        } else if (key == "CPU part" && current) {
            current->part = value;
        } else if (key == "Hardware" && f.hardware.empty()) {
            f.hardware = value;
        } else if (key == "CPU implementer" || key == "CPU architecture") {
            arm = true;
        } else if (key == "vendor_id") {
            x86 = true;
        }
    }
    for (CpuCore& c : f.cores) {
        const fs::path dir = root / "sys/devices/system/cpu" / ("cpu" + std::to_string(c.id));
        c.capacity = static_cast<uint64_t>(read_number(dir / "cpu_capacity").value_or(0));
        c.max_freq_khz =
            static_cast<uint64_t>(read_number(dir / "cpufreq/cpuinfo_max_freq").value_or(0));
    }
    if (root != "/" && (arm || x86)) f.arch = arm ? "aarch64" : "x86_64";
    if (f.cores.empty()) return;
    const bool have_capacity = std::all_of(f.cores.begin(), f.cores.end(),
                                           [](const CpuCore& c) { return c.capacity > 0; });
    const bool have_freq = std::all_of(f.cores.begin(), f.cores.end(),
                                       [](const CpuCore& c) { return c.max_freq_khz > 0; });
    f.big_cores = have_capacity ? above_lowest_tier(f.cores, &CpuCore::capacity)
                  : have_freq   ? above_lowest_tier(f.cores, &CpuCore::max_freq_khz)
                                : std::vector<int>{};
    // The biggest core's part names the CPU generation best.
    const CpuCore* biggest = &f.cores.back();
    for (const CpuCore& c : f.cores)
        if (std::make_pair(c.capacity, c.max_freq_khz) >
            std::make_pair(biggest->capacity, biggest->max_freq_khz))
            biggest = &c;
    f.cpu_part = biggest->part;
}

void read_thermal_zones(const fs::path& root, DeviceFacts& f) {
    std::error_code ec;
    const fs::path dir = root / "sys/class/thermal";
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("thermal_zone", 0) != 0) continue;
        ThermalZone z;
        if (std::from_chars(name.data() + 12, name.data() + name.size(), z.index).ec != std::errc())
            continue;
        z.type = read_first_line(e.path() / "type");
        z.millicelsius = read_number(e.path() / "temp");
        f.thermal_zones.push_back(std::move(z));
    }
    std::sort(f.thermal_zones.begin(), f.thermal_zones.end(),
              [](const ThermalZone& a, const ThermalZone& b) { return a.index < b.index; });
}

uint64_t read_mem_total(const fs::path& root) {
    const std::optional<std::string> text =
        read_device_file_or_throw(root / "proc/meminfo", kMaxDeviceListingBytes);
    return text ? meminfo_field_bytes(*text, "MemTotal:") : 0;
}

std::string prop(const std::map<std::string, std::string>& p, const char* key) {
    const auto it = p.find(key);
    return it == p.end() ? std::string() : it->second;
}

// One [device.match] rule: its name, the manifest's list, the fact, the
// weight it adds to the specificity.
struct Rule {
    const char* name;
    const std::vector<std::string>* list;
    std::string fact;
    int weight;
};

std::vector<Rule> rules_of(const ManifestDeviceMatch& r, const DeviceFacts& f) {
    return {{"soc_model", &r.soc_model, f.soc_model, 4},
            {"soc_id", &r.soc_id, f.soc_id, 4},
            {"soc_machine", &r.soc_machine, f.soc_machine, 4},
            {"platform", &r.platform, f.platform, 4},
            {"product", &r.product, f.product, 8},
            {"hardware", &r.hardware, f.hardware, 2},
            {"soc_manufacturer", &r.soc_manufacturer, f.soc_manufacturer, 1},
            {"cpu_part", &r.cpu_part, f.cpu_part, 2},
            {"arch", &r.arch, f.arch, 1}};
}

bool any_core_listed(const std::vector<std::string>& list, const DeviceFacts& f) {
    if (listed(list, f.cpu_part)) return true;
    return std::any_of(f.cores.begin(), f.cores.end(),
                       [&](const CpuCore& c) { return !c.part.empty() && listed(list, c.part); });
}

bool rule_holds(const Rule& rule, const DeviceFacts& f) {
    if (rule.list->empty()) return true;
    if (std::string(rule.name) == "cpu_part") return any_core_listed(*rule.list, f);
    return !rule.fact.empty() && listed(*rule.list, rule.fact);
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
    return out;
}

}  // namespace

std::string cpu_ranges(const std::vector<int>& ids) {
    std::string out;
    for (size_t i = 0; i < ids.size();) {
        size_t j = i;
        while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(ids[i]);
        if (j > i) out += '-' + std::to_string(ids[j]);
        i = j + 1;
    }
    return out;
}

std::map<std::string, std::string> parse_properties(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        line = trim(line);
        if (line.size() > 4 && line.front() == '[') {
            // [key]: [value]
            const auto close = line.find("]: [");
            if (close == std::string::npos || line.back() != ']') continue;
            out[line.substr(1, close - 1)] = line.substr(close + 4, line.size() - close - 5);
        } else if (const auto eq = line.find(" = "); eq != std::string::npos) {
            out[trim(line.substr(0, eq))] = trim(line.substr(eq + 3));
        }
    }
    return out;
}

DeviceFacts DeviceFacts::probe(const DeviceProbeOptions& options) {
    fs::path root = options.root;
    if (const char* env = std::getenv("DWELL_SYSFS_ROOT"); env && *env && root == "/") root = env;
    DeviceFacts f;
    utsname u{};
    if (uname(&u) == 0) f.arch = u.machine;

    std::string props_text;
    // Read whole, so bounded: a getprop dump is tens of KiB. An absent file
    // reads as no properties, as before; a FIFO or a device is refused
    // without blocking.
    constexpr uint64_t kMaxGetpropBytes = uint64_t{4} << 20;
    const auto read_props = [](const fs::path& file, std::string_view what) {
        DeviceFileRead r = read_device_file(file, kMaxGetpropBytes);
        switch (r.status) {
            case DeviceFileRead::Status::ok:
                return std::move(r.text);
            case DeviceFileRead::Status::absent:
                return std::string();
            case DeviceFileRead::Status::too_large:
                // A regular file: read_text_file says how large against the limit.
                return read_text_file(file, what, kMaxGetpropBytes);
            case DeviceFileRead::Status::unreadable:
            case DeviceFileRead::Status::not_regular:
                break;
        }
        throw Error(DWELL_ERR_IO, r.problem + " (" + std::string(what) + ")");
    };
    if (options.getprop_file) {
        props_text = read_props(*options.getprop_file, "the getprop file (--getprop)");
    } else if (root != "/") {
        props_text = read_props(root / "getprop.txt", "the getprop file");
    } else {
        props_text = run_getprop();
    }
    f.properties = parse_properties(props_text);
    const auto& p = f.properties;
    f.soc_model = prop(p, "ro.soc.model");
    f.soc_manufacturer = prop(p, "ro.soc.manufacturer");
    f.platform = prop(p, "ro.board.platform");
    f.product = prop(p, "ro.product.model");
    if (f.product.empty()) f.product = prop(p, "const.product.model");  // HarmonyOS
    f.hardware = prop(p, "ro.hardware");

    read_cpus(root, f);  // fills hardware from cpuinfo when no property gave it
    f.soc_id = read_first_line(root / "sys/devices/soc0/soc_id");
    f.soc_machine = read_first_line(root / "sys/devices/soc0/machine");
    f.soc_family = read_first_line(root / "sys/devices/soc0/family");
    f.memory_bytes = read_mem_total(root);
    read_thermal_zones(root, f);
    if (const char* env = std::getenv("DWELL_SOC_MODEL"); env && *env) f.soc_model = env;
    return f;
}

std::string DeviceFacts::summary() const {
    // Every fact is outside input (getprop, cpuinfo, the environment) and
    // this line goes to the terminal and the log.
    const auto shown = [](const std::string& s) { return printable_name(s, kShownFactChars); };
    std::string soc = !soc_model.empty()     ? soc_model
                      : !soc_machine.empty() ? soc_machine
                                             : hardware;
    std::vector<std::string> details;
    if (!soc_manufacturer.empty()) details.push_back(shown(soc_manufacturer));
    if (!platform.empty()) details.push_back("platform " + shown(platform));
    if (!soc_id.empty()) details.push_back("soc_id " + shown(soc_id));
    std::string out = soc.empty() ? "unknown SoC" : shown(soc);
    if (!details.empty()) out += " (" + join(details) + ")";
    if (!product.empty()) out += ", " + shown(product);
    out += ", " + shown(arch);
    if (!cores.empty()) {
        out += ", " + std::to_string(cores.size()) + " cores";
        if (!big_cores.empty() && big_cores.size() < cores.size())
            out += " (big " + cpu_ranges(big_cores) + ")";
    }
    if (memory_bytes) out += ", " + format_bytes(memory_bytes);
    return out;
}

bool manifest_matches(const Manifest& m, const DeviceFacts& f) {
    const auto rules = rules_of(m.match, f);
    if (std::all_of(rules.begin(), rules.end(), [](const Rule& r) { return r.list->empty(); }))
        return false;
    return std::all_of(rules.begin(), rules.end(), [&](const Rule& r) { return rule_holds(r, f); });
}

int manifest_specificity(const Manifest& m) {
    int s = 0;
    for (const Rule& r : rules_of(m.match, DeviceFacts{}))
        if (!r.list->empty()) s += r.weight;
    return s;
}

std::string explain_match(const Manifest& m, const DeviceFacts& f) {
    std::vector<std::string> held, failed;
    for (const Rule& r : rules_of(m.match, f)) {
        if (r.list->empty()) continue;
        const std::string fact = printable_name(r.fact, kShownFactChars);
        if (rule_holds(r, f)) {
            held.push_back(std::string(r.name) + " " + fact + " is listed");
        } else {
            std::vector<std::string> list;
            for (const std::string& v : *r.list) list.push_back(printable_name(v, kShownFactChars));
            failed.push_back(std::string(r.name) + ": this device has " +
                             (r.fact.empty() ? "none" : fact) + ", the manifest lists " +
                             join(list));
        }
    }
    if (held.empty() && failed.empty()) return "no match rules (chosen only by name)";
    return failed.empty() ? join(held, "; ") : join(failed, "; ");
}

}  // namespace dwell
