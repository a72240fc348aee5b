// What this device is, for choosing a manifest and for reports: the SoC
// (Android properties, /sys/devices/soc0, /proc/cpuinfo), the cores and
// which of them are big (cpu_capacity, else cpuinfo_max_freq), memory, and
// the thermal zones. Everything is read under a relocatable root, so the
// same code runs on phones and, in tests, against captured device trees.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dwell/core/base/export.hpp"

namespace dwell {

struct Manifest;

// Facts are outside input: summary(), explain_match() and reports show them
// through printable_name() (dwell/core/printable_name.hpp), at most this long.
inline constexpr size_t kShownFactChars = 120;

struct CpuCore {
    int id = 0;
    std::string part;           // "CPU part" of /proc/cpuinfo ("0xd82"), if given
    uint64_t capacity = 0;      // cpuN/cpu_capacity, 0 if absent
    uint64_t max_freq_khz = 0;  // cpuN/cpufreq/cpuinfo_max_freq, 0 if absent
};

struct ThermalZone {
    int index = 0;     // thermal_zoneN
    std::string type;  // its "type": what the manifest names
    std::optional<int64_t> millicelsius;
};

struct DeviceProbeOptions {
    // "/" on the device itself; a captured tree (proc/, sys/, getprop.txt)
    // in tests. DWELL_SYSFS_ROOT overrides the default.
    std::filesystem::path root = "/";
    // Output of `getprop` ("[key]: [value]" lines; "key = value" as printed
    // by HarmonyOS's `param get` also reads). Default: <root>/getprop.txt
    // under a captured tree; on the device, the getprop command if present.
    std::optional<std::filesystem::path> getprop_file;
};

struct DWELL_CORE_API DeviceFacts {
    std::string arch;  // "x86_64", "aarch64"
    // The SoC: ro.soc.model / ro.soc.manufacturer (DWELL_SOC_MODEL overrides
    // the model), ro.board.platform, ro.hardware (else cpuinfo "Hardware"),
    // /sys/devices/soc0/{soc_id,machine,family}.
    std::string soc_model, soc_manufacturer, platform, hardware;
    std::string soc_id, soc_machine, soc_family;
    std::string product;   // ro.product.model, if any
    std::string cpu_part;  // the part of the biggest core ("0xd82"), if any
    std::vector<CpuCore> cores;
    std::vector<int> big_cores;  // cores above the lowest capacity (or frequency) tier
    uint64_t memory_bytes = 0;   // MemTotal
    std::vector<ThermalZone> thermal_zones;
    std::map<std::string, std::string> properties;  // every property read

    // Every file is read without blocking and with a size limit; throws
    // dwell::Error naming the file when one under the root is not a regular
    // file (a FIFO, a device) or is far larger than such a file can be.
    static DeviceFacts probe(const DeviceProbeOptions& options = {});
    static DeviceFacts probe(const std::filesystem::path& root) {
        DeviceProbeOptions o;
        o.root = root;
        return probe(o);
    }

    // "SM8650 (QTI, platform pineapple, soc_id 557), aarch64, 8 cores (big 3-7)",
    // control characters escaped.
    std::string summary() const;
};

// True when every non-empty match list of the manifest contains the fact
// (compared without regard to case; cpu_part lists match any core's part).
// A manifest with no match rules matches nothing (it is chosen only by name).
bool manifest_matches(const Manifest& manifest, const DeviceFacts& facts);
// How many rules matched: more specific manifests win.
int manifest_specificity(const Manifest& manifest);
// Why the manifest does or does not fit: "soc_model SM8650 is listed;
// platform pineapple is listed" or "soc_model: this device has MT6989, the
// manifest lists SM8650".
DWELL_CORE_API std::string explain_match(const Manifest& manifest, const DeviceFacts& facts);

// "0-3,6": CPU ids as ranges (ids ascending).
DWELL_CORE_API std::string cpu_ranges(const std::vector<int>& ids);

// Parses getprop / param output into key -> value.
std::map<std::string, std::string> parse_properties(const std::string& text);

}  // namespace dwell
