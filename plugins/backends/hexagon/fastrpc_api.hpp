// The FastRPC calls the hexagon plugin makes, declared here from Qualcomm's
// public FastRPC documentation (the CPU-side API is BSD-licensed; no header
// of theirs is copied), and loaded from libcdsprpc.so with dlopen at probe
// time, so a device without the library reports "unavailable" and nothing
// links against it.
//
// Thread-safety: load once (guarded by the plugin); the table is then
// read-only. Ownership: the library stays loaded for the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dwell::hexagon {

using remote_handle64 = uint64_t;

struct remote_buf {
    void* pv;
    size_t nLen;
};

union remote_arg {
    remote_buf buf;
    uint32_t h;
    uint64_t h64;
};

// Scalars word of remote_handle64_invoke: method index, counts of input and
// output buffers.
constexpr uint32_t remote_scalars(uint32_t method, uint32_t n_in, uint32_t n_out) {
    return ((method & 0x1fu) << 24) | ((n_in & 0xffu) << 16) | ((n_out & 0xffu) << 8);
}

constexpr int kCdspDomain = 3;         // the compute DSP
constexpr int kRpcmemHeapSystem = 25;  // RPCMEM_HEAP_ID_SYSTEM
constexpr uint32_t kRpcmemDefaultFlags = 1;
constexpr int kFastrpcMapFd = 2;           // FASTRPC_MAP_FD
constexpr uint32_t kDspRpcGetDspInfo = 2;  // remote_handle_control: DSPRPC_GET_DSP_INFO
constexpr uint32_t kAttributeArchVer = 6;  // remote_dsp_attributes: ARCH_VER

struct remote_dsp_capability {
    uint32_t domain;
    uint32_t attribute_ID;
    uint32_t capability;
};

struct FastRpcApi {
    int (*remote_handle64_open)(const char* uri, remote_handle64* h) = nullptr;
    int (*remote_handle64_invoke)(remote_handle64 h, uint32_t scalars, remote_arg* args) = nullptr;
    int (*remote_handle64_close)(remote_handle64 h) = nullptr;
    int (*remote_handle_control)(uint32_t req, void* data, uint32_t len) = nullptr;
    void* (*rpcmem_alloc)(int heap, uint32_t flags, int size) = nullptr;
    void (*rpcmem_free)(void* p) = nullptr;
    int (*rpcmem_to_fd)(void* p) = nullptr;
    int (*fastrpc_mmap)(int domain, int fd, void* addr, int offset, size_t len,
                        int flags) = nullptr;
    int (*fastrpc_munmap)(int domain, int fd, void* addr, size_t len) = nullptr;
};

// The loaded table from `library` (default "libcdsprpc.so"), or null with
// `why` set ("libcdsprpc.so not found: ...").
const FastRpcApi* load_fastrpc(const std::string& library, std::string& why);

}  // namespace dwell::hexagon
