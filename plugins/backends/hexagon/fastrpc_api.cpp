#include "fastrpc_api.hpp"

#include "backend/backend_plugin_kit.hpp"
#include "backend/vendor_library.hpp"

namespace dwell::hexagon {

namespace {

plugin_kit::LoadedLibrary<FastRpcApi> load(const std::string& library) {
    return plugin_kit::load_vendor_library<FastRpcApi>(
        library, "FastRPC", [](const auto& resolve, FastRpcApi& a) {
            return resolve("remote_handle64_open", a.remote_handle64_open) &&
                   resolve("remote_handle64_invoke", a.remote_handle64_invoke) &&
                   resolve("remote_handle64_close", a.remote_handle64_close) &&
                   resolve("remote_handle_control", a.remote_handle_control) &&
                   resolve("rpcmem_alloc", a.rpcmem_alloc) &&
                   resolve("rpcmem_free", a.rpcmem_free) &&
                   resolve("rpcmem_to_fd", a.rpcmem_to_fd) &&
                   resolve("fastrpc_mmap", a.fastrpc_mmap) &&
                   resolve("fastrpc_munmap", a.fastrpc_munmap);
        });
}

}  // namespace

const FastRpcApi* load_fastrpc(const std::string& library, std::string& why) {
    return plugin_kit::load_once<FastRpcApi>(library, why, load);
}

}  // namespace dwell::hexagon
