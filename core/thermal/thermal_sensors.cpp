#include "dwell/core/thermal/thermal_sensors.hpp"

#include <charconv>
#include <cmath>

#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/platform/device_file.hpp"

namespace dwell {

namespace fs = std::filesystem;

namespace {

// Read without blocking and bounded (a FIFO or /dev/zero in a captured
// tree); anything but a small regular file reads as unreadable.
std::optional<std::string> read_line(const fs::path& p) {
    const DeviceFileRead r = read_device_file(p, kMaxDeviceValueBytes);
    if (!r.ok() || r.text.empty()) return std::nullopt;
    std::string line = r.text.substr(0, r.text.find('\n'));
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    return line;
}

std::optional<double> read_number(const fs::path& p) {
    const auto line = read_line(p);
    if (!line) return std::nullopt;
    double v = 0;
    const auto [end, ec] = std::from_chars(line->data(), line->data() + line->size(), v);
    if (ec != std::errc() || end != line->data() + line->size()) return std::nullopt;
    return v;
}

}  // namespace

std::optional<double> parse_zone_temperature(const std::string& text) {
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end == text.data()) return std::nullopt;
    const double c = std::fabs(v) >= 1000 ? v / 1000.0 : v;
    if (!std::isfinite(c) || c < -40.0 || c > 150.0) return std::nullopt;
    return c;
}

ThermalSensors::ThermalSensors(const fs::path& root, const ThermalConfig& config) {
    std::error_code ec;
    std::vector<std::pair<std::string, fs::path>> zones;
    for (const auto& e : fs::directory_iterator(root / "sys/class/thermal", ec)) {
        if (e.path().filename().string().rfind("thermal_zone", 0) != 0) continue;
        if (const auto type = read_line(e.path() / "type")) zones.emplace_back(*type, e.path());
    }
    for (const std::string& want : config.zones) {
        bool found = false;
        for (const auto& [type, dir] : zones) {
            if (type == want) {
                zone_dirs_.push_back(dir);
                found = true;
            }
        }
        if (!found) missing_.push_back(want);
    }
    if (config.battery_power) {
        for (const auto& e : fs::directory_iterator(root / "sys/class/power_supply", ec)) {
            if (read_line(e.path() / "type") == std::optional<std::string>("Battery"))
                batteries_.push_back(e.path());
        }
    }
}

ThermalReading ThermalSensors::read() const {
    ThermalReading r;
    std::string problems;
    const auto note = [&](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
    if (!missing_.empty()) {
        std::string names;
        for (const auto& m : missing_) names += (names.empty() ? "" : ", ") + printable_name(m);
        note("no thermal zone of type " + names);
    }
    for (const fs::path& dir : zone_dirs_) {
        const auto text = read_line(dir / "temp");
        if (!text) {
            note(printable_name((dir / "temp").string(), 240) + " is unreadable");
            continue;
        }
        const auto c = parse_zone_temperature(*text);
        if (!c) {
            note(printable_name((dir / "temp").string(), 240) + " reads '" + printable_name(*text) +
                 "', not a temperature");
            continue;
        }
        if (!r.temp_c || *c > *r.temp_c) {
            r.temp_c = c;
            r.hottest_zone =
                printable_name(read_line(dir / "type").value_or(dir.filename().string()));
        }
    }
    if (zone_dirs_.empty() && missing_.empty())
        note("no thermal zones are named in [thermal] zones");
    for (const fs::path& b : batteries_) {
        const auto ua = read_number(b / "current_now");
        const auto uv = read_number(b / "voltage_now");
        if (ua && uv) r.power_w = std::fabs(*ua) * *uv / 1e12;
    }
    r.problem = problems;
    return r;
}

}  // namespace dwell
