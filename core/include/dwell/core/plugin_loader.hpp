// Finds, loads and version-checks plugin shared libraries (Boost.DLL).
//
// Search order: the manifest's [plugins] search_paths, then the folders in
// DWELL_PLUGIN_PATH (colon-separated), then <exe>/../lib/dwell. A plugin
// named "cpu" is the file libdwell-cpu.so in the first folder that has it.
// A library that fails to load is reported with the loader's own error text
// and the path tried; an ABI mismatch names both versions.
//
// Thread-safety: a PluginLoader is used from one thread (startup). A
// LoadedPlugin is immutable and shared; the library stays mapped as long as
// any shared_ptr to it lives, so a backend in use is never unloaded.
#pragma once

#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/backend.h"
#include "dwell/model.h"
#include "dwell/plugin.h"

namespace dwell {

class LoadedPlugin {
public:
    LoadedPlugin(boost::dll::shared_library library, std::filesystem::path path,
                 const dwell_plugin_info& info);

    const std::filesystem::path& path() const { return path_; }
    const dwell_plugin_info& info() const { return info_; }
    std::string name() const { return info_.name ? info_.name : "?"; }
    std::string version() const { return info_.version ? info_.version : "?"; }
    std::string abi_version() const;
    const dwell_backend_plugin* backend() const;  // nullptr unless a backend plugin
    const dwell_model_plugin* model() const;      // nullptr unless a model plugin

private:
    boost::dll::shared_library library_;  // keeps the code mapped
    std::filesystem::path path_;
    dwell_plugin_info info_;
};

struct PluginFailure {
    std::filesystem::path path;
    std::string reason;  // one line
};

class PluginLoader {
public:
    // `manifest_dirs` come first; DWELL_PLUGIN_PATH and <exe>/../lib/dwell follow.
    PluginLoader(const std::vector<std::filesystem::path>& manifest_dirs,
                 const dwell_host_services* host);

    const std::vector<std::filesystem::path>& search_dirs() const { return dirs_; }

    // Loads one file; throws dwell::Error with a one-line reason.
    std::shared_ptr<LoadedPlugin> load_file(const std::filesystem::path& path);

    // The plugin called `name` from the first folder that has it; nullptr if
    // none, with every path tried and why it failed appended to `failures`.
    std::shared_ptr<LoadedPlugin> find(std::string_view name, std::vector<PluginFailure>& failures);

    // Every libdwell-*.so in the search folders, loaded (first of a name wins).
    struct Discovery {
        std::vector<std::shared_ptr<LoadedPlugin>> plugins;
        std::vector<PluginFailure> failures;
    };
    Discovery discover_all();

    static std::string file_name_for(std::string_view plugin_name);

private:
    std::vector<std::filesystem::path> dirs_;
    const dwell_host_services* host_;
    std::map<std::filesystem::path, std::shared_ptr<LoadedPlugin>> loaded_;  // by canonical path
};

}  // namespace dwell
