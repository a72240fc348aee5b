// Finds, loads and version-checks plugin shared libraries (Boost.DLL).
//
// Search order: the manifest's [plugins] search_paths, then the folders in
// DWELL_PLUGIN_PATH (colon-separated), then <exe>/../lib/dwell. A plugin
// named "cpu" is the file libdwell-cpu.so in the first folder that has it.
// A library that fails to load is reported with the loader's own error text
// and the path tried; an ABI mismatch names both versions.
//
// Integrity, checked before any code of the file runs:
// - only files whose real path (symbolic links resolved) lies directly in
//   one of the search folders are loaded;
// - only a regular file is opened for checking (O_NONBLOCK: a FIFO never
//   blocks the host), and it must be a complete shared object for this
//   machine: ELF magic, class, byte order and machine of this build, and
//   every loadable segment and the section table inside the file, so a
//   half-copied library is refused instead of faulting (SIGBUS) when it
//   is mapped;
// - a folder or file that another user could write is refused, naming the
//   chmod that fixes it: world-writable always (a sticky bit does not stop
//   anyone adding a file), group-writable unless the group is our own
//   effective group (the user-private-group setup of umask 002), since
//   every member of a shared group could swap the plugin;
// - as OpenSSH's StrictModes does, the plugin, its folder and every folder
//   above it must be owned by us or root (on Android also the system user,
//   which owns an app's library folders), and no folder above may be
//   writable by others without the sticky bit (which keeps others from
//   renaming what they do not own, as in /tmp);
// - a plugin pinned in the manifest ([plugins] sha256, by plugin name, i.e.
//   "cpu" for libdwell-cpu.so) is hashed from an open descriptor and loaded
//   through that same descriptor (/proc/self/fd/N, kept open while the
//   plugin is loaded), so the bytes run are the bytes hashed even if the
//   file is replaced in between; a mismatch is refused naming both hashes.
//   (Unpinned files load by path: with the checks above, only we or root
//   could replace them.)
//
// Thread-safety: a PluginLoader is used from one thread (startup). A
// LoadedPlugin is immutable and shared; the library stays mapped as long as
// any shared_ptr to it lives, so a backend in use is never unloaded.
#pragma once

#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/backend.h"
#include "dwell/core/base/export.hpp"
#include "dwell/model.h"
#include "dwell/plugin.h"

namespace dwell {

class DWELL_CORE_API LoadedPlugin {
public:
    // `pinned_fd`: the open descriptor the library was loaded through
    // (closed with the plugin), or -1.
    LoadedPlugin(boost::dll::shared_library library, std::filesystem::path path,
                 const dwell_plugin_info& info, int pinned_fd = -1);
    ~LoadedPlugin();
    LoadedPlugin(const LoadedPlugin&) = delete;
    LoadedPlugin& operator=(const LoadedPlugin&) = delete;

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
    int pinned_fd_ = -1;  // keeps /proc/self/fd/N naming the loaded file
};

struct PluginFailure {
    std::filesystem::path path;
    std::string reason;  // one line
};

class DWELL_CORE_API PluginLoader {
public:
    // `manifest_dirs` come first; DWELL_PLUGIN_PATH and <exe>/../lib/dwell
    // follow. `sha256_pins`: plugin name -> 64 lowercase hex digits.
    PluginLoader(const std::vector<std::filesystem::path>& manifest_dirs,
                 const dwell_host_services* host,
                 std::map<std::string, std::string> sha256_pins = {});

    const std::vector<std::filesystem::path>& search_dirs() const { return dirs_; }

    // Loads one file from a search folder; throws dwell::Error with a
    // one-line reason (outside the folders, writable by others, pin
    // mismatch, not a dwell plugin, ABI mismatch, ...).
    std::shared_ptr<LoadedPlugin> load_file(const std::filesystem::path& path);

    // The plugin called `name` from the first folder that has it; nullptr if
    // none, with every path tried and why it failed appended to `failures`.
    // A file refused before the one that loads is logged as a warning.
    std::shared_ptr<LoadedPlugin> find(std::string_view name, std::vector<PluginFailure>& failures);

    // Every libdwell-*.so in the search folders, loaded (first of a name
    // wins); each file refused is also logged as one warning.
    struct Discovery {
        std::vector<std::shared_ptr<LoadedPlugin>> plugins;
        std::vector<PluginFailure> failures;
    };
    Discovery discover_all();

    static std::string file_name_for(std::string_view plugin_name);

private:
    // Throws unless `canonical` lies directly in a search folder.
    void check_in_search_dirs(const std::filesystem::path& path,
                              const std::filesystem::path& canonical) const;

    std::vector<std::filesystem::path> dirs_;
    const dwell_host_services* host_;
    std::map<std::string, std::string> pins_;
    std::map<std::filesystem::path, std::shared_ptr<LoadedPlugin>> loaded_;  // by canonical path
    // Refused files already warned about: one warning per file, however
    // often a folder is searched.
    std::set<std::filesystem::path> warned_;
    void warn_refused(const PluginFailure& f);
};

}  // namespace dwell
