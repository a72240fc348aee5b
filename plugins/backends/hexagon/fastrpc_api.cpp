#include "fastrpc_api.hpp"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>

#include "backend_plugin_kit.hpp"

namespace dwell::hexagon {

namespace {

struct Loaded {
    FastRpcApi api;
    bool ok = false;
    std::string why;
};

template <typename F>
bool resolve(void* lib, const char* name, F& slot, std::string& why) {
    return plugin_kit::resolve_symbol(lib, name, slot, why, "FastRPC");
}

Loaded load(const std::string& library) {
    Loaded l;
    void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char* e = ::dlerror();
        l.why = library + " not found" + (e ? std::string(": ") + e : "");
        return l;
    }
    FastRpcApi& a = l.api;
    std::string& w = l.why;
    l.ok = resolve(lib, "remote_handle64_open", a.remote_handle64_open, w) &&
           resolve(lib, "remote_handle64_invoke", a.remote_handle64_invoke, w) &&
           resolve(lib, "remote_handle64_close", a.remote_handle64_close, w) &&
           resolve(lib, "remote_handle_control", a.remote_handle_control, w) &&
           resolve(lib, "rpcmem_alloc", a.rpcmem_alloc, w) &&
           resolve(lib, "rpcmem_free", a.rpcmem_free, w) &&
           resolve(lib, "rpcmem_to_fd", a.rpcmem_to_fd, w) &&
           resolve(lib, "fastrpc_mmap", a.fastrpc_mmap, w) &&
           resolve(lib, "fastrpc_munmap", a.fastrpc_munmap, w);
    return l;
}

}  // namespace

const FastRpcApi* load_fastrpc(const std::string& library, std::string& why) {
    // One load per library path for the process (the plugin registry is
    // the only mutable global the project allows; this cache is its kin).
    static std::mutex mutex;
    static std::map<std::string, std::unique_ptr<Loaded>> loaded;
    std::lock_guard lock(mutex);
    auto& slot = loaded[library];
    if (!slot) slot = std::make_unique<Loaded>(load(library));
    why = slot->why;
    return slot->ok ? &slot->api : nullptr;
}

}  // namespace dwell::hexagon
