// The cpu backend plugin: the ABI glue around dwell_cpu_kernels.
//
// Every entry point catches all exceptions and turns them into a status plus
// a message (per context when there is one, per plugin otherwise), because
// nothing may unwind across the C ABI.
//
// State: the ABI has no plugin teardown call and requires the vtable and
// info strings to live until unload, so they sit in one function-local
// static, built on first query and immutable afterwards. The only mutable
// parts are error messages, kept where the ABI says callers read them.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <forward_list>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend_plugin_kit.hpp"
#include "dwell/backend.h"
#include "dwell/plugin.h"
#include "host/cpu_device_probe.hpp"
#include "host/cpu_topology.hpp"
#include "host/thread_pool.hpp"
#include "ops/op_dispatch.hpp"
#include "ops/packed_weights.hpp"
#include "simd/simd_dots.hpp"

// The opaque context type of backend.h, defined here.
struct dwell_backend_context {
    dwell_backend_context(unsigned threads, std::vector<int> cpus,
                          dwell::cpu::PackedWeights::CopiedFn copied, void* host)
        : full_threads(threads),
          full_cpus(std::move(cpus)),
          pool(std::make_unique<dwell::cpu::ThreadPool>(threads, full_cpus)),
          packed(copied, host) {}
    const unsigned full_threads;  // as created; reconfigure's thread_share is of these
    const std::vector<int> full_cpus;
    std::unique_ptr<dwell::cpu::ThreadPool> pool;
    dwell::cpu::PackedWeights packed;    // matmul weights in the kernels' layouts
    dwell::cpu::WeightReadCounts reads;  // since creation or the last weight_reads reset
    std::string last_error;
};

namespace dwell::cpu {
namespace {

constexpr const char* kPluginName = "cpu";
constexpr const char* kPluginVersion = "0.1.0";
constexpr const char* kDeviceName = "cpu0";
// Far above any real core count; catches typos like "threads = 40000".
constexpr unsigned kMaxThreads = 1024;

using plugin_kit::plugin_error;

// The cpu plugin's messages carry no prefix (the kit's fail_plugin adds one).
dwell_status fail_plugin(dwell_status status, std::string message) {
    plugin_error() = std::move(message);
    return status;
}

// Runs fn, turning any exception into a status and a message.
template <typename Fn>
dwell_status guarded(std::string& error, Fn fn) noexcept {
    try {
        return fn();
    } catch (const std::bad_alloc&) {
        error = "out of memory";
        return DWELL_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        try {
            error = e.what();
        } catch (...) {
        }
        return DWELL_ERR_INTERNAL;
    } catch (...) {
        error = "unknown exception";
        return DWELL_ERR_INTERNAL;
    }
}

dwell_status device_count(void*, uint32_t* count) {
    if (count == nullptr)
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "device_count: null count");
    *count = 1;
    return DWELL_OK;
}

const CpuIdentity& identity(void* self) {
    return *static_cast<const CpuIdentity*>(self);
}

dwell_status device_info(void* self, uint32_t index, dwell_device_info* info) {
    return guarded(plugin_error(), [&]() -> dwell_status {
        if (info == nullptr)
            return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "device_info: null info");
        if (index != 0) {
            return fail_plugin(DWELL_ERR_INVALID_ARGUMENT,
                               "device index " + std::to_string(index) +
                                   " is out of range: the cpu plugin has 1 device");
        }
        const CpuIdentity& id = identity(self);
        const MemoryInfo mem = probe_memory();
        // Write only what the caller's struct has room for, and tell it how
        // much of it we filled.
        if (DWELL_HAS_FIELD(info, dwell_device_info, name)) info->name = kDeviceName;
        if (DWELL_HAS_FIELD(info, dwell_device_info, description)) {
            info->description = id.model.c_str();
        }
        if (DWELL_HAS_FIELD(info, dwell_device_info, kind)) info->kind = DWELL_DEVICE_CPU;
        if (DWELL_HAS_FIELD(info, dwell_device_info, hardware_id)) {
            info->hardware_id = id.hardware_id.c_str();
        }
        if (DWELL_HAS_FIELD(info, dwell_device_info, memory_total)) info->memory_total = mem.total;
        if (DWELL_HAS_FIELD(info, dwell_device_info, memory_free)) {
            info->memory_free = mem.available;
        }
        if (DWELL_HAS_FIELD(info, dwell_device_info, buffer_kind)) {
            info->buffer_kind = DWELL_BUFFER_HOST;
        }
        if (DWELL_HAS_FIELD(info, dwell_device_info, available)) info->available = 1;
        if (DWELL_HAS_FIELD(info, dwell_device_info, unavailable_reason)) {
            info->unavailable_reason = "";
        }
        info->struct_size =
            std::min<uint32_t>(info->struct_size, static_cast<uint32_t>(sizeof(dwell_device_info)));
        return DWELL_OK;
    });
}

const char* last_error(void*) {
    return plugin_error().c_str();
}

// A decimal integer in [1, kMaxThreads], nothing else.
bool parse_threads(std::string_view text, unsigned* out) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value == 0 ||
        value > kMaxThreads) {
        return false;
    }
    *out = value;
    return true;
}

dwell_status context_create(void*, uint32_t device, const dwell_option* options, size_t n_options,
                            const dwell_host_services* host, dwell_backend_context** out) {
    return guarded(plugin_error(), [&]() -> dwell_status {
        if (out == nullptr)
            return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "context_create: null out");
        *out = nullptr;
        if (device != 0) {
            return fail_plugin(DWELL_ERR_INVALID_ARGUMENT,
                               "device index " + std::to_string(device) +
                                   " is out of range: the cpu plugin has 1 device");
        }
        if (n_options > 0 && options == nullptr) {
            return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "context_create: null options");
        }
        unsigned threads = 0;  // 0: one per chosen core
        bool big_only = false;
        for (size_t i = 0; i < n_options; ++i) {
            const std::string_view key = options[i].key ? options[i].key : "";
            const std::string_view value = options[i].value ? options[i].value : "";
            if (key == "threads") {
                if (!parse_threads(value, &threads)) {
                    return fail_plugin(DWELL_ERR_INVALID_ARGUMENT,
                                       "cpu backend option 'threads' must be an integer in [1, " +
                                           std::to_string(kMaxThreads) + "], got '" +
                                           std::string(value) + "'");
                }
            } else if (key == "affinity") {
                if (value != "any" && value != "big") {
                    return fail_plugin(DWELL_ERR_INVALID_ARGUMENT,
                                       "cpu backend option 'affinity' must be \"any\" or "
                                       "\"big\", got '" +
                                           std::string(value) + "'");
                }
                big_only = value == "big";
            } else {
                return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "unknown cpu backend option '" +
                                                                   std::string(key) +
                                                                   "' (known: threads, affinity)");
            }
        }
        // "big": workers pinned to the fastest cores, one thread per core
        // unless told otherwise; "any": the scheduler places them.
        std::vector<int> cpus;
        if (big_only) cpus = big_cores(allowed_cpus());
        if (threads == 0) {
            threads =
                cpus.empty() ? ThreadPool::default_threads() : static_cast<unsigned>(cpus.size());
        }
        // Repacked weights need not stay resident twice: the host may drop
        // the mapped originals (ABI 1.1 hosts).
        dwell::cpu::PackedWeights::CopiedFn copied = nullptr;
        void* host_self = nullptr;
        if (host != nullptr && DWELL_HAS_FIELD(host, dwell_host_services, weights_copied)) {
            copied = host->weights_copied;
            host_self = host->host;
        }
        auto ctx = std::make_unique<dwell_backend_context>(threads, cpus, copied, host_self);
        if (host != nullptr && DWELL_HAS_FIELD(host, dwell_host_services, log) &&
            host->log != nullptr) {
            std::string line = std::string(kDeviceName) + ": " + std::to_string(threads) +
                               (threads == 1 ? " thread" : " threads");
            if (!cpus.empty()) line += " pinned to big cores " + cpu_list_string(cpus);
            line.append(", ").append(simd_level_name(dot_kernels().level)).append(" kernels");
            host->log(host->host, DWELL_LOG_INFO, kPluginName, line.c_str());
        }
        *out = ctx.release();
        return DWELL_OK;
    });
}

const char* context_last_error(dwell_backend_context* ctx) {
    return ctx != nullptr ? ctx->last_error.c_str() : "null cpu backend context";
}

int32_t supports_op(dwell_backend_context*, const dwell_graph* graph, int32_t node) {
    try {
        return check_node(graph, node, /*need_data=*/false) ? 0 : 1;
    } catch (...) {
        return 0;
    }
}

void release_weights(dwell_backend_context* ctx, const void* data, size_t bytes) {
    if (ctx != nullptr && data != nullptr) ctx->packed.release(data, bytes);
}

// ABI 1.3: the thermal governor's "thread_share". A new pool of the wanted
// size (on the first of the chosen cores) replaces the old one; changes are
// rare (the governor has hysteresis), so rebuilding beats a pool that can
// idle some workers.
dwell_status reconfigure(dwell_backend_context* ctx, const dwell_option* options, size_t n) {
    if (ctx == nullptr) return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "reconfigure: null context");
    return guarded(ctx->last_error, [&]() -> dwell_status {
        for (size_t i = 0; i < n; ++i) {
            const std::string key = options[i].key ? options[i].key : "";
            const std::string value = options[i].value ? options[i].value : "";
            if (key != "thread_share") {
                ctx->last_error =
                    "cpu backend: cannot reconfigure '" + key + "' (known: thread_share)";
                return DWELL_ERR_UNSUPPORTED;
            }
            char* end = nullptr;
            const double share = std::strtod(value.c_str(), &end);
            if (end == value.c_str() || *end != 0 || !(share > 0 && share <= 1)) {
                ctx->last_error =
                    "cpu backend: thread_share must be in (0, 1], got '" + value + "'";
                return DWELL_ERR_INVALID_ARGUMENT;
            }
            const auto threads = std::max(
                1u,
                static_cast<unsigned>(std::lround(share * static_cast<double>(ctx->full_threads))));
            if (threads == ctx->pool->size()) continue;
            std::vector<int> cpus = ctx->full_cpus;
            if (cpus.size() > threads) cpus.resize(threads);
            // The new pool first: if its threads cannot start, the old one stays.
            auto pool = std::make_unique<ThreadPool>(threads, std::move(cpus));
            ctx->pool = std::move(pool);
        }
        return DWELL_OK;
    });
}

dwell_status graph_compute(dwell_backend_context* ctx, const dwell_graph* graph,
                           const int32_t* node_ids, size_t n_ids) {
    if (ctx == nullptr) {
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "graph_compute: null context");
    }
    return guarded(ctx->last_error, [&]() -> dwell_status {
        const CpuAffinityScope on_pool_cores(ctx->pool->cpus());
        OpVerdict problem =
            compute_nodes(graph, node_ids, n_ids, *ctx->pool, &ctx->packed, &ctx->reads);
        if (!problem) return DWELL_OK;
        ctx->last_error = std::move(problem->message);
        return problem->status;
    });
}

dwell_status weight_reads(dwell_backend_context* ctx, dwell_weight_reads* out, int32_t reset) {
    if (ctx == nullptr || out == nullptr || !DWELL_HAS_FIELD(out, dwell_weight_reads, matmuls))
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "weight_reads: null context or output");
    const WeightReadCounts& r = ctx->reads;
    out->bytes_read = r.bytes_read;
    out->bytes_dense = r.bytes_dense;
    out->inputs = r.inputs;
    out->inputs_zero = r.inputs_zero;
    out->matmuls = r.matmuls;
    if (reset) ctx->reads = WeightReadCounts{};
    return DWELL_OK;
}

struct PluginState {
    CpuIdentity identity = probe_cpu_identity();
    dwell_backend_plugin vtable{};
    // Refusal messages handed out in dwell_plugin_info::error; they must
    // outlive the query, and list nodes never move. One per distinct host
    // version, so the list stays tiny.
    std::mutex errors_mutex;
    std::forward_list<std::string> errors;
    // Which SIMD level runs, for dwell_plugin_info::description.
    std::string description = simd_description(dot_kernels().level, detect_cpu_features());
    std::once_flag simd_warning;  // a bad DWELL_CPU_SIMD is told once per process

    PluginState() {
        vtable.struct_size = sizeof(vtable);
        vtable.self = &identity;
        vtable.device_count = device_count;
        vtable.device_info = device_info;
        vtable.last_error = last_error;
        vtable.context_create = context_create;
        // Joining the pool's threads cannot throw.
        vtable.context_destroy = plugin_kit::destroy_context<dwell_backend_context>;
        vtable.context_last_error = context_last_error;
        vtable.supports_op = supports_op;
        vtable.graph_compute = graph_compute;
        vtable.release_weights = release_weights;
        vtable.reconfigure = reconfigure;
        vtable.weight_reads = weight_reads;
    }

    const char* keep_error(std::string message) {
        std::lock_guard lock(errors_mutex);
        for (const std::string& e : errors) {
            if (e == message) return e.c_str();
        }
        errors.push_front(std::move(message));
        return errors.front().c_str();
    }
};

PluginState& plugin_state() {
    static PluginState state;
    return state;
}

dwell_status query(const dwell_host_services* host, dwell_plugin_info* info) {
    if (info == nullptr || !DWELL_HAS_FIELD(info, dwell_plugin_info, abi_minor)) {
        return DWELL_ERR_INVALID_ARGUMENT;
    }
    // The ABI version goes out even on refusal, so the host can name it.
    info->abi_major = DWELL_ABI_MAJOR;
    info->abi_minor = DWELL_ABI_MINOR;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, name)) info->name = kPluginName;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, version)) info->version = kPluginVersion;
    PluginState& state = plugin_state();
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, description)) {
        info->description = state.description.c_str();
    }
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, kind)) info->kind = DWELL_PLUGIN_BACKEND;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, backend)) info->backend = nullptr;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, model)) info->model = nullptr;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, error)) info->error = nullptr;
    info->struct_size =
        std::min<uint32_t>(info->struct_size, static_cast<uint32_t>(sizeof(dwell_plugin_info)));

    auto refuse = [&](dwell_status status, std::string message) {
        if (DWELL_HAS_FIELD(info, dwell_plugin_info, error)) {
            info->error = state.keep_error(std::move(message));
        }
        return status;
    };
    if (host == nullptr || !DWELL_HAS_FIELD(host, dwell_host_services, abi_minor)) {
        return refuse(DWELL_ERR_INVALID_ARGUMENT, "cpu plugin: no usable host services");
    }
    if (host->abi_major != DWELL_ABI_MAJOR) {
        return refuse(DWELL_ERR_ABI_MISMATCH,
                      "cpu plugin: host ABI " + std::to_string(host->abi_major) + "." +
                          std::to_string(host->abi_minor) + " is incompatible with plugin ABI " +
                          std::to_string(DWELL_ABI_MAJOR) + "." + std::to_string(DWELL_ABI_MINOR) +
                          " (major versions differ)");
    }
    if (!DWELL_HAS_FIELD(info, dwell_plugin_info, backend)) {
        return refuse(DWELL_ERR_ABI_MISMATCH, "cpu plugin: plugin info struct too small");
    }
    if (DWELL_HAS_FIELD(host, dwell_host_services, log) && host->log != nullptr) {
        std::call_once(state.simd_warning, [&] {
            const std::string warning =
                simd_env_warning(std::getenv("DWELL_CPU_SIMD"), detect_cpu_features());
            if (!warning.empty())
                host->log(host->host, DWELL_LOG_WARN, kPluginName, warning.c_str());
        });
    }
    info->backend = &state.vtable;
    return DWELL_OK;
}

}  // namespace
}  // namespace dwell::cpu

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    try {
        return dwell::cpu::query(host, info);
    } catch (const std::bad_alloc&) {
        return DWELL_ERR_OUT_OF_MEMORY;
    } catch (...) {
        return DWELL_ERR_INTERNAL;
    }
}
