// The governor's sensors under a relocatable sysfs root: thermal zones
// matched by their `type` (/sys/class/thermal/thermal_zone*/{type,temp}),
// the hottest of them counting, and optionally the battery's discharge
// power (/sys/class/power_supply/*/{current_now,voltage_now}). A missing
// zone, an unreadable file or a nonsense value is reported in the reading,
// never thrown.
//
// Thread-safety: read() may be called from one thread at a time.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "dwell/core/thermal/thermal_policy.hpp"

namespace dwell {

class ThermalSensors {
public:
    ThermalSensors(const std::filesystem::path& root, const ThermalConfig& config);
    ThermalReading read() const;

    // The zone folders found for the configured types, and the types not found.
    const std::vector<std::filesystem::path>& zone_dirs() const { return zone_dirs_; }
    const std::vector<std::string>& missing_zones() const { return missing_; }

private:
    std::vector<std::filesystem::path> zone_dirs_;
    std::vector<std::string> missing_;
    std::vector<std::filesystem::path> batteries_;
};

// A temperature file's value in degrees Celsius: millidegrees (the kernel's
// unit) when its magnitude is 1000 or more, else degrees (some vendor
// drivers); nothing when it is not a number or outside [-40, 150] C.
std::optional<double> parse_zone_temperature(const std::string& text);

}  // namespace dwell
