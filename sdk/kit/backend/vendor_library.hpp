// Loading a vendor library at probe time, shared by the backends that reach
// their hardware through one (hexagon's libcdsprpc, apu's NeuronAdapter,
// nnrt's NNRt pair): dlopen with a message that names what was missing, one
// load per library (or folder) for the process, and one probe per value of
// the environment variable that points a process (a test) elsewhere.
//
// Thread-safety: load_once and probe_per_value lock their own cache and may
// be called from any thread. Ownership: what they return lives until the
// process ends (libraries are never dlclosed: a vendor library that may
// have started threads is not safe to unload).
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backend/backend_plugin_kit.hpp"

namespace dwell::plugin_kit {

// dlopen(path); on failure `why` is "<path> not found[: <dlerror>]", the
// wording manifests' fall-through reasons (and tests) rely on.
inline void* open_vendor_library(const std::string& path, std::string& why) {
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char* e = ::dlerror();
        why = path + " not found" + (e ? std::string(": ") + e : "");
    }
    return lib;
}

// A vendor API table as a load left it: `ok` when every symbol resolved,
// else `why` says what failed.
template <typename Api>
struct LoadedLibrary {
    Api api;
    bool ok = false;
    std::string why;
};

// The library at `path` opened and its API table filled by
// resolve_all(resolve, api), a chain of resolve("symbol", api.slot) calls
// (SymbolResolver, naming the library `library` in its message). A library
// lacking a symbol stays loaded: see above.
template <typename Api, typename ResolveAll>
LoadedLibrary<Api> load_vendor_library(const std::string& path, const char* library,
                                       ResolveAll resolve_all) {
    LoadedLibrary<Api> l;
    void* lib = open_vendor_library(path, l.why);
    if (lib == nullptr) return l;
    l.ok = resolve_all(SymbolResolver(lib, library, l.why), l.api);
    return l;
}

// The API loaded from `key` (a path or a folder) by `load`, once per key for
// the process (the plugin registry is the only mutable global the project
// allows; this cache is its kin). Null with `why` set when the load failed.
// Each instantiation (each plugin's Api and loader) has its own cache.
template <typename Api, typename Load>
const Api* load_once(const std::string& key, std::string& why, Load load) {
    static std::mutex mutex;
    static std::map<std::string, std::unique_ptr<LoadedLibrary<Api>>> loaded;
    std::lock_guard lock(mutex);
    auto& slot = loaded[key];
    if (!slot) slot = std::make_unique<LoadedLibrary<Api>>(load(key));
    why = slot->why;
    return slot->ok ? &slot->api : nullptr;
}

// The probe for the current value of environment variable `variable` (""
// when unset or empty), made by `make(value)` once per value seen, so a
// process that changes the variable (a test binary) probes what it names.
template <typename Probe, typename Make>
const Probe& probe_per_value(const char* variable, Make make) {
    static std::mutex mutex;
    static std::map<std::string, std::unique_ptr<const Probe>> probes;
    const char* env = std::getenv(variable);
    const std::string value = env != nullptr ? env : "";
    std::lock_guard lock(mutex);
    auto& slot = probes[value];
    if (!slot) slot = std::make_unique<const Probe>(make(value));
    return *slot;
}

}  // namespace dwell::plugin_kit
