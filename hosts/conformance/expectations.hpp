// A plugin's conformance.toml: the cases it declines by design (glob
// patterns over case names, each with its reason), per-op tolerance
// overrides, and backend options for the run. The file is outside input:
// every key is checked, and a mistake is one line naming the file, line and
// key.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dwell::conformance {

struct Decline {
    std::vector<std::string> patterns;  // fnmatch(3) globs over case names
    std::string reason;
    int line = 0;
};

struct Expectations {
    std::filesystem::path source;  // empty: no file, every case must pass
    std::vector<Decline> declines;
    std::map<std::string, double> tolerance;     // by op name (dwell_op_name)
    std::map<std::string, std::string> options;  // backend options
    // The first decline entry one of whose patterns matches name, or null.
    const Decline* decline_for(const std::string& name) const;
};

// Throws std::runtime_error with one line "file:line:column: what is wrong"
// on a malformed file, an unknown key, an op name that is not one, or a
// pattern that matches none of case_names (a typo would silently expect
// nothing).
Expectations load_expectations(const std::filesystem::path& file,
                               const std::vector<std::string>& case_names);

}  // namespace dwell::conformance
