#include "dwell/core/backend/host_services.hpp"

#include <spdlog/spdlog.h>

#include "dwell/core/platform/mapped_pages.hpp"

namespace dwell {
namespace {

void host_log(void* /*host*/, int level, const char* plugin, const char* message) {
    const char* who = plugin ? plugin : "plugin";
    const char* msg = message ? message : "";
    switch (level) {
        case DWELL_LOG_DEBUG:
            spdlog::debug("[{}] {}", who, msg);
            break;
        case DWELL_LOG_INFO:
            spdlog::info("[{}] {}", who, msg);
            break;
        case DWELL_LOG_WARN:
            spdlog::warn("[{}] {}", who, msg);
            break;
        default:
            spdlog::error("[{}] {}", who, msg);
            break;
    }
}

void* host_page_alloc(void* host, size_t bytes) {
    return static_cast<MemoryPool*>(host)->allocate_raw(bytes, "a plugin allocation");
}

void host_page_free(void* host, void* ptr) {
    static_cast<MemoryPool*>(host)->free_raw(ptr);
}

void host_weights_copied(void*, const void* data, size_t bytes) {
    const size_t dropped = drop_file_backed_pages(data, bytes);
    if (dropped > 0) spdlog::trace("dropped {} resident bytes of copied weights", dropped);
}

}  // namespace

dwell_host_services host_services_for(MemoryPool& pool) {
    dwell_host_services s{};
    s.struct_size = sizeof(s);
    s.abi_major = DWELL_ABI_MAJOR;
    s.abi_minor = DWELL_ABI_MINOR;
    s.host = &pool;
    s.log = host_log;
    s.page_alloc = host_page_alloc;
    s.page_free = host_page_free;
    s.weights_copied = host_weights_copied;
    return s;
}

}  // namespace dwell
