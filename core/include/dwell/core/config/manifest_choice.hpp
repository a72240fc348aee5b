// Which manifest fits this device: every manifest in the manifest folders
// is checked against the device facts; the most specific match wins, and
// with none the generic manifest (generic-*.toml whose rules fit, else the
// first generic one) is used, saying so.
//
// Thread-safety: pure function of its arguments and the files it reads.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/config/device_facts.hpp"
#include "dwell/core/config/manifest.hpp"

namespace dwell {

struct ManifestCandidate {
    std::filesystem::path file;
    std::string name;      // [device] name
    bool generic = false;  // generic-*.toml: a fallback
    bool matches = false;
    int specificity = 0;
    std::string why;  // explain_match(), or the load error
};

struct ManifestChoice {
    Manifest manifest;
    std::string reason;  // one line: why this manifest
    std::vector<ManifestCandidate> candidates;
    bool fell_back = false;  // no device-specific manifest matched
};

// Throws only if no manifest folder has any usable manifest and
// `builtin` fails to parse.
DWELL_CORE_API ManifestChoice choose_manifest(const DeviceFacts& facts,
                                              const std::vector<std::filesystem::path>& dirs,
                                              std::string_view builtin);

}  // namespace dwell
