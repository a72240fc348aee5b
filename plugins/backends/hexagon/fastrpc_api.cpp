#include "fastrpc_api.hpp"

#include "backend_plugin_kit.hpp"
#include "vendor_library.hpp"

namespace dwell::hexagon {

namespace {

using Loaded = plugin_kit::LoadedLibrary<FastRpcApi>;

template <typename F>
bool resolve(void* lib, const char* name, F& slot, std::string& why) {
    return plugin_kit::resolve_symbol(lib, name, slot, why, "FastRPC");
}

Loaded load(const std::string& library) {
    Loaded l;
    void* lib = plugin_kit::open_vendor_library(library, l.why);
    if (lib == nullptr) return l;
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
    return plugin_kit::load_once<FastRpcApi>(library, why, load);
}

}  // namespace dwell::hexagon
