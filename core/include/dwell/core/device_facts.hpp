// What this device is, for choosing a manifest: CPU architecture, CPU part,
// SoC id and model. Read under a relocatable root (tests point it at a fake
// tree) so the same code runs on phones and in CI.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <filesystem>
#include <string>

namespace dwell {

struct Manifest;

struct DeviceFacts {
    std::string arch;       // "x86_64", "aarch64"
    std::string cpu_part;   // "0xd47" from /proc/cpuinfo "CPU part", if any
    std::string soc_id;     // /sys/devices/soc0/soc_id, if any
    std::string soc_model;  // ro.soc.model (DWELL_SOC_MODEL overrides), if any

    // root: "/" normally; DWELL_SYSFS_ROOT overrides it when set.
    static DeviceFacts probe(const std::filesystem::path& root = "/");
};

// True when every non-empty match list of the manifest contains the fact.
// A manifest with no match rules matches nothing (it is chosen only by name).
bool manifest_matches(const Manifest& manifest, const DeviceFacts& facts);
// How many rules matched: more specific manifests win.
int manifest_specificity(const Manifest& manifest);

}  // namespace dwell
