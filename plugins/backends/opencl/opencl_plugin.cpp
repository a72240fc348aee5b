// The opencl backend plugin: runs graph nodes with the portable OpenCL C 1.2
// kernels (kernels_portable.cl) on the device the manifest names. The
// library is loaded at probe time; without it, or without a platform, the
// plugin reports one unavailable device saying why, and the manifest falls
// through to the next backend.
//
// Memory: dwell's tensors live in host memory (DWELL_BUFFER_HOST); each node
// wraps the ranges it touches in CL_MEM_USE_HOST_PTR buffers (zero-copy on
// devices sharing host memory, such as PoCL and Adreno's host-mapped
// buffers) and maps what it wrote before returning, so the next node — on
// this backend or another — reads coherent host memory.
//
// Thread-safety: probe calls from any thread; a context is used by one
// thread at a time (the host serialises). Ownership: contexts own their CL
// objects; the compiled program is cached on disk per device, driver and
// source.
// The parts: opencl_context.hpp (the state they share), program_cache.cpp
// (options, program build and its disk cache), node_runner.cpp (node checks
// and launches); this file probes devices and fills the vtable.
#include <dwell/backend.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend_plugin_kit.hpp"
#include "backend/weight_release.hpp"
#include "cl_api.hpp"
#include "node_runner.hpp"
#include "opencl_context.hpp"
#include "program_cache.hpp"

namespace dwell::opencl {
namespace {

constexpr char kPluginName[] = "opencl";
constexpr const char* kPluginVersion = "0.1.0";

constexpr auto fail_plugin = plugin_kit::fail_plugin<kPluginName>;

std::string device_string(const ClApi& cl, cl_device_id d, cl_device_info what) {
    size_t n = 0;
    if (cl.GetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
    std::string s(n, '\0');
    cl.GetDeviceInfo(d, what, n, s.data(), nullptr);
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

std::string platform_string(const ClApi& cl, cl_platform_id p, cl_platform_info what) {
    size_t n = 0;
    if (cl.GetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
    std::string s(n, '\0');
    cl.GetPlatformInfo(p, what, n, s.data(), nullptr);
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

struct Probe {
    const ClApi* cl = nullptr;
    std::vector<Device> devices;
};

Probe do_probe() {
    Probe p;
    std::string why;
    p.cl = load_cl_api(why);
    const auto unavailable = [&](std::string reason) {
        Device d;
        d.name = "opencl0";
        d.description = "no OpenCL device";
        d.hardware_id = "opencl:none";
        d.why = std::move(reason);
        p.devices.push_back(std::move(d));
    };
    if (p.cl == nullptr) {
        unavailable(why);
        return p;
    }
    cl_uint n_platforms = 0;
    cl_int err = p.cl->GetPlatformIDs(0, nullptr, &n_platforms);
    if (err != CL_SUCCESS || n_platforms == 0) {
        unavailable("no OpenCL platform (" + cl_error_name(err) +
                    "): install a driver, e.g. pocl-opencl-icd");
        return p;
    }
    std::vector<cl_platform_id> platforms(n_platforms);
    p.cl->GetPlatformIDs(n_platforms, platforms.data(), nullptr);
    for (cl_platform_id pl : platforms) {
        cl_uint n = 0;
        if (p.cl->GetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS) continue;
        std::vector<cl_device_id> ids(n);
        p.cl->GetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr);
        const std::string platform = platform_string(*p.cl, pl, CL_PLATFORM_NAME);
        for (cl_device_id id : ids) {
            Device d;
            d.id = id;
            d.name = "opencl" + std::to_string(p.devices.size());
            const std::string dev = device_string(*p.cl, id, CL_DEVICE_NAME);
            d.description = platform + ": " + dev;
            d.driver = device_string(*p.cl, id, CL_DRIVER_VERSION);
            d.hardware_id = "opencl:" + platform + ":" + dev;
            cl_device_type type = 0;
            p.cl->GetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
            d.kind = (type & CL_DEVICE_TYPE_CPU) ? DWELL_DEVICE_CPU : DWELL_DEVICE_GPU;
            cl_ulong mem = 0;
            p.cl->GetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
            d.memory = mem;
            cl_bool ok = CL_FALSE;
            p.cl->GetDeviceInfo(id, CL_DEVICE_AVAILABLE, sizeof ok, &ok, nullptr);
            d.available = ok == CL_TRUE;
            if (!d.available) d.why = "the driver reports the device unavailable";
            p.devices.push_back(std::move(d));
        }
    }
    if (p.devices.empty()) unavailable("the OpenCL platforms list no devices");
    return p;
}

Probe& probe() {
    static Probe p = do_probe();
    return p;
}

// ---------------------------------------------------------------------------
// The vtable

dwell_status device_count(void*, uint32_t* count) {
    if (count == nullptr) return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "null count");
    *count = static_cast<uint32_t>(probe().devices.size());
    return DWELL_OK;
}

dwell_status device_info(void*, uint32_t index, dwell_device_info* info) {
    const Probe& p = probe();
    if (info == nullptr) return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "null info");
    if (index >= p.devices.size()) {
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT,
                           "device index " + std::to_string(index) + " is out of range");
    }
    const Device& d = p.devices[index];
    plugin_kit::DeviceFacts f;
    f.name = d.name.c_str();
    f.description = d.description.c_str();
    f.kind = d.kind;
    f.hardware_id = d.hardware_id.c_str();
    f.memory_total = d.memory;
    f.buffer_kind = DWELL_BUFFER_HOST;
    f.unavailable_reason = d.available ? nullptr : d.why.c_str();
    return plugin_kit::describe_device(info, f);
}

dwell_status context_create(void*, uint32_t device, const dwell_option* options, size_t n_options,
                            const dwell_host_services* host, dwell_backend_context** out) {
    if (out == nullptr) return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "null output");
    const Probe& p = probe();
    if (device >= p.devices.size() || !p.devices[device].available) {
        return fail_plugin(DWELL_ERR_UNAVAILABLE,
                           device < p.devices.size() ? p.devices[device].why : "no such device");
    }
    const Device& d = p.devices[device];
    auto c = std::make_unique<dwell_backend_context>();
    c->cl = p.cl;
    c->device_name = d.description;
    cl_int err = CL_SUCCESS;
    c->context = p.cl->CreateContext(nullptr, 1, &d.id, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) {
        return fail_plugin(DWELL_ERR_UNAVAILABLE,
                           d.description + ": creating a context failed: " + cl_error_name(err));
    }
    c->queue = p.cl->CreateCommandQueue(c->context, d.id, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        return fail_plugin(DWELL_ERR_UNAVAILABLE,
                           d.description + ": creating a queue failed: " + cl_error_name(err));
    }
    Options opts;
    try {
        opts = parse_options(options, n_options);
    } catch (const std::exception& e) {
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, e.what());
    }
    c->device = d.id;
    c->host = host;
    c->adreno = opts.kernels == "adreno" ||
                (opts.kernels == "auto" && d.description.find("Adreno") != std::string::npos);
    try {
        c->program = build_program(*c, d, opts);
    } catch (const std::exception& e) {
        return fail_plugin(DWELL_ERR_UNAVAILABLE, d.description + ": " + e.what());
    }
    *out = c.release();
    return DWELL_OK;
}

int32_t supports_op(dwell_backend_context* c, const dwell_graph* g, int32_t node) {
    return plugin_kit::supports_via(c, g, node, check);
}

dwell_status graph_compute(dwell_backend_context* c, const dwell_graph* g, const int32_t* ids,
                           size_t n_ids) {
    if (c == nullptr || g == nullptr || (n_ids > 0 && ids == nullptr)) {
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "graph_compute: null argument");
    }
    const std::vector<bool> written = plugin_kit::written_tensors(g);
    for (size_t i = 0; i < n_ids; ++i) {
        const std::string why = check(g, ids[i]);
        if (!why.empty()) {
            c->last_error = "node " + std::to_string(ids[i]) + ": " + why;
            return DWELL_ERR_UNSUPPORTED;
        }
        try {
            run_node(*c, g, ids[i], written);
        } catch (const std::bad_alloc&) {
            c->last_error = "out of host memory";
            return DWELL_ERR_OUT_OF_MEMORY;
        } catch (const std::exception& e) {
            c->last_error = "node " + std::to_string(ids[i]) + " (" +
                            dwell_op_name(dwell_graph_node(g, ids[i])->op) + ") on " +
                            c->device_name + ": " + e.what();
            return DWELL_ERR_INTERNAL;
        }
    }
    return DWELL_OK;
}

void release_weights(dwell_backend_context* c, const void* data, size_t bytes) {
    if (c == nullptr || data == nullptr) return;
    plugin_kit::erase_weights_in(c->prepared, plugin_kit::HostRange(data, bytes),
                                 [&](auto& kv) { c->drop(kv.second); });
}

dwell_status op_times(dwell_backend_context* c, dwell_op_time* out, size_t* n, int32_t reset) {
    if (c == nullptr || n == nullptr || (*n > 0 && out == nullptr)) {
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "op_times: null argument");
    }
    size_t i = 0;
    for (const auto& [op, t] : c->times) {
        if (i < *n) out[i] = dwell_op_time{op, 0, t.first, t.second};
        ++i;
    }
    *n = i;
    if (reset) c->times.clear();
    return DWELL_OK;
}

dwell_backend_plugin make_vtable() {
    dwell_backend_plugin v{};
    v.struct_size = sizeof v;
    v.device_count = device_count;
    v.device_info = device_info;
    v.last_error = plugin_kit::plugin_last_error;
    v.context_create = context_create;
    v.context_destroy = plugin_kit::destroy_context<dwell_backend_context>;
    v.context_last_error = plugin_kit::context_last_error<dwell_backend_context>;
    v.supports_op = supports_op;
    v.graph_compute = graph_compute;
    v.op_times = op_times;
    v.release_weights = release_weights;
    return v;
}

dwell_status query(const dwell_host_services* host, dwell_plugin_info* info) {
    static const dwell_backend_plugin vtable = make_vtable();
    return plugin_kit::describe_backend(host, info, kPluginName, kPluginVersion,
                                        "OpenCL backend: portable and Adreno-tuned kernels",
                                        &vtable,
                                        "opencl plugin: the host's ABI major version differs");
}

}  // namespace
}  // namespace dwell::opencl

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    try {
        return dwell::opencl::query(host, info);
    } catch (...) {
        return DWELL_ERR_INTERNAL;
    }
}
