// The nnrt backend plugin: HarmonyOS Neural Network Runtime.
//
// Probe: libneural_network_core.so and libneural_network_runtime.so are
// loaded with dlopen (from $DWELL_NNRT_LIB_DIR when set, for test doubles,
// else the loader's search, as on a device); absent, the one placeholder
// device is unavailable with the reason and the manifest falls through.
// Present, every NNRt device (OH_NNDevice_GetAllDevicesID) is a dwell
// device named as NNRt names it, accelerators first, so a manifest without
// `device` gets the first accelerator, else the first device.
//
// What it takes: MATMUL with weights of any dtype the SDK decodes — the
// projections of each layer (QKV, output, FFN) and the vocabulary one; the
// rest (norms, RoPE, attention and the KV cache, SwiGLU) stays on the next
// backend, a hybrid CPU+NPU split. Each graph_compute becomes one NNRt
// model per split (nnrt_network.hpp), compiled once per shape — m = 1 for
// decode and m = `prefill_chunk` for everything longer, run as padded
// chunks — and kept, keyed by the split's structure and weight identity;
// compiled models are also cached on disk (OH_NNCompilation_SetCache)
// under `cache_dir`. A failed NNRt call returns a status whose message
// names the call and its return code; the scheduler runs that step on the
// next backend, and the next step tries again.
//
// Options ([[backend]] options = { ... }):
//   weights       auto | fp16 | int8   how weights are stored on the device.
//                 auto (default): float32 weights stay float32, any other
//                 dtype becomes fp16; int8: symmetric per output channel.
//   device        substring of the NNRt device name this entry must use.
//   performance   none | low | medium | high | extreme  (default high)
//   priority      none | low | medium | high             (default medium)
//   float16       on | off: OH_NNCompilation_EnableFloat16 (default off)
//   prefill_chunk rows of the fixed prefill shape (default 32)
//   cache_dir     folder for compiled models; "none" disables (default
//                 $XDG_CACHE_HOME/dwell/nnrt or ~/.cache/dwell/nnrt)
//
// Thread-safety: probe calls from any thread; a context is used by one
// thread at a time (the host serialises them). Ownership: a context owns
// its converted weights and compiled networks and frees them on destruction.
#include <dwell/backend.h>
#include <dwell/quant.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "backend/backend_plugin_kit.hpp"
#include "backend/vendor_library.hpp"
#include "backend/weight_release.hpp"
#include "nnrt_api.hpp"
#include "nnrt_network.hpp"

namespace dwell::nnrt {
namespace {

constexpr char kPluginName[] = "nnrt";
constexpr uint32_t kCacheVersion = 1;  // bump when the lowering changes

constexpr auto fail_plugin = plugin_kit::fail_plugin<kPluginName>;
using plugin_kit::f32_contiguous;
using plugin_kit::tensor;

struct Device {
    size_t id = 0;
    std::string name;
    OH_NN_DeviceType type = OH_NN_OTHERS;
    std::string hardware_id;
    std::string description;
};

struct Probe {
    const NnrtApi* api = nullptr;
    std::string why;
    std::vector<Device> devices;
};

Probe make_probe(const std::string& dir) {
    Probe r;
    r.api = load_nnrt(dir, r.why);
    if (r.api == nullptr) return r;
    const size_t* ids = nullptr;
    uint32_t count = 0;
    const OH_NN_ReturnCode rc = r.api->OH_NNDevice_GetAllDevicesID(&ids, &count);
    if (rc != OH_NN_SUCCESS) {
        r.why = "OH_NNDevice_GetAllDevicesID failed with " + return_code_name(rc);
        r.api = nullptr;
        return r;
    }
    for (uint32_t i = 0; i < count && ids != nullptr; ++i) {
        Device d;
        d.id = ids[i];
        const char* name = nullptr;
        if (r.api->OH_NNDevice_GetName(d.id, &name) != OH_NN_SUCCESS || name == nullptr) continue;
        d.name = name;
        if (r.api->OH_NNDevice_GetType(d.id, &d.type) != OH_NN_SUCCESS) continue;
        d.hardware_id = "nnrt:" + d.name;
        static const char* const kinds[] = {"other", "CPU", "GPU", "accelerator"};
        d.description = std::string("NNRt ") +
                        (d.type >= 0 && d.type <= 3 ? kinds[d.type] : "device") + " " + d.name;
        r.devices.push_back(d);
    }
    // Accelerators first: the default choice is the first of them.
    std::stable_sort(r.devices.begin(), r.devices.end(), [](const Device& a, const Device& b) {
        return (a.type == OH_NN_ACCELERATOR) > (b.type == OH_NN_ACCELERATOR);
    });
    if (r.devices.empty()) {
        r.why = "NNRt reports no device";
        r.api = nullptr;
    }
    return r;
}

// The probe for the library folder in effect ($DWELL_NNRT_LIB_DIR, or the
// loader's search): made once per folder, so a process that changes the
// variable (tests) sees the libraries it names.
const Probe& probe() {
    return plugin_kit::probe_per_value<Probe>("DWELL_NNRT_LIB_DIR", make_probe);
}

enum class WeightMode { Auto, Fp16, Int8 };

struct Options {
    WeightMode weights = WeightMode::Auto;
    std::string device;
    CompileOptions compile;
    int32_t prefill_chunk = 32;
};

std::string default_cache_dir() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x)
        return std::string(x) + "/dwell/nnrt";
    if (const char* h = std::getenv("HOME"); h != nullptr && *h)
        return std::string(h) + "/.cache/dwell/nnrt";
    return "";
}

// One option; "" when fine, else the one-line complaint.
std::string parse_option(Options& o, const std::string& key, const std::string& value) {
    const auto pick = [&](const std::vector<std::string>& names, auto& slot, auto base) {
        for (size_t i = 0; i < names.size(); ++i) {
            if (names[i] == value) {
                slot = static_cast<std::remove_reference_t<decltype(slot)>>(base + i);
                return std::string();
            }
        }
        std::string known;
        for (const auto& n : names) known += (known.empty() ? "" : "|") + n;
        return "option '" + key + "' must be " + known + ", got '" + value + "'";
    };
    if (key == "weights") {
        return pick({"auto", "fp16", "int8"}, o.weights, 0);
    } else if (key == "device") {
        o.device = value;
    } else if (key == "performance") {
        return pick({"none", "low", "medium", "high", "extreme"}, o.compile.performance, 0);
    } else if (key == "priority") {
        return pick({"none", "low", "medium", "high"}, o.compile.priority, 0);
    } else if (key == "float16") {
        if (value != "on" && value != "off")
            return "option 'float16' must be on|off, got '" + value + "'";
        o.compile.float16 = value == "on";
    } else if (key == "prefill_chunk") {
        o.prefill_chunk = std::atoi(value.c_str());
        if (o.prefill_chunk < 1 || o.prefill_chunk > 4096)
            return "option 'prefill_chunk' must be an integer in 1..4096, got '" + value + "'";
    } else if (key == "cache_dir") {
        o.compile.cache_dir = value == "none" ? "" : value;
    } else if (!plugin_kit::is_host_option(key)) {
        return "unknown nnrt backend option '" + key +
               "' (known: weights, device, performance, priority, float16, prefill_chunk, "
               "cache_dir)";
    }
    return "";
}

}  // namespace
}  // namespace dwell::nnrt

struct dwell_backend_context {
    const dwell::nnrt::NnrtApi* api = nullptr;
    dwell::nnrt::Device device;
    dwell::nnrt::Options options;
    const dwell_host_services* host = nullptr;
    std::string last_error;
    // Weights converted once, by source address, dtype, shape and target type.
    using WeightKey = std::tuple<const void*, int32_t, int64_t, int64_t, int32_t>;
    std::map<WeightKey, std::shared_ptr<const dwell::nnrt::ConvertedWeight>> weights;
    // Compiled networks by structure, shape and weight identity.
    std::map<std::string, std::unique_ptr<dwell::nnrt::Network>> networks;

    void log(int level, const std::string& message) const {
        if (host != nullptr && host->log != nullptr)
            host->log(host->host, level, "nnrt", message.c_str());
    }
};

namespace dwell::nnrt {
namespace {

// Why NNRt cannot take node `id`, or "" when it can.
std::string check_node(const dwell_graph* g, int32_t id) {
    const dwell_node* n = dwell_graph_node(g, id);
    if (n == nullptr) return "no such node";
    if (n->op != DWELL_OP_MATMUL)
        return std::string(dwell_op_name(n->op)) +
               " is not lowered to NNRt (only matmul projections are)";
    const dwell_tensor* w = dwell_graph_tensor(g, n->inputs[0]);
    const dwell_tensor* x = dwell_graph_tensor(g, n->inputs[1]);
    const dwell_tensor* out = dwell_graph_tensor(g, n->output);
    if (w == nullptr || x == nullptr || out == nullptr) return "malformed matmul";
    if (!dwell_has_decoder(w->dtype))
        return std::string("weights ") + dwell_dtype_name(w->dtype) + " have no decoder";
    if (!dwell_tensor_is_contiguous(w) || w->ne[2] != 1 || w->ne[3] != 1)
        return "weights must be one contiguous matrix";
    if ((dwell_graph_tensor_flags(g, n->inputs[0]) & DWELL_TENSOR_VOLATILE) != 0)
        return "streamed weights cannot be compiled into an NNRt model";
    if (w->ne[0] > INT32_MAX || w->ne[1] > INT32_MAX) return "weights too large";
    if (!f32_contiguous(*x) || !f32_contiguous(*out)) return "x and out must be contiguous F32";
    if (x->ne[0] != w->ne[0] || out->ne[0] != w->ne[1] ||
        dwell_tensor_nrows(out) != dwell_tensor_nrows(x))
        return "matmul shapes do not agree";
    return "";
}

// The storage type of a weight for the context's mode.
OH_NN_DataType weight_type(WeightMode mode, dwell_dtype source) {
    if (mode == WeightMode::Int8) return OH_NN_INT8;
    if (mode == WeightMode::Fp16) return OH_NN_FLOAT16;
    return source == DWELL_F32 ? OH_NN_FLOAT32 : OH_NN_FLOAT16;
}

std::shared_ptr<const ConvertedWeight> converted(dwell_backend_context& c, const dwell_tensor& w,
                                                 OH_NN_DataType type) {
    const dwell_backend_context::WeightKey key{w.data, w.dtype, w.ne[0], w.ne[1], type};
    auto it = c.weights.find(key);
    if (it == c.weights.end())
        it = c.weights.emplace(key, std::make_shared<ConvertedWeight>(convert_weight(w, type)))
                 .first;
    return it->second;
}

// A run of nodes with the same number of rows, lowered and executed as one
// model (or several padded chunks of it).
void run_split(dwell_backend_context& c, const dwell_graph* g, const std::vector<int32_t>& ids) {
    const int64_t rows = dwell_tensor_nrows(&tensor(g, dwell_graph_node(g, ids[0])->inputs[1]));
    const int32_t m = rows == 1 ? 1 : c.options.prefill_chunk;

    // Weight storage: float32 activations only when every weight stays
    // float32; otherwise everything in fp16 (or int8 weights with fp16
    // activations), so one model has one activation type.
    OH_NN_DataType act = OH_NN_FLOAT32;
    for (int32_t id : ids) {
        const dwell_tensor& w = tensor(g, dwell_graph_node(g, id)->inputs[0]);
        if (weight_type(c.options.weights, w.dtype) != OH_NN_FLOAT32) act = OH_NN_FLOAT16;
    }
    NetworkSpec spec;
    spec.m = m;
    spec.activations = act;
    std::string key = std::to_string(m) + ":" + std::to_string(act);
    std::vector<const float*> inputs;
    std::map<int32_t, int32_t> input_of;  // graph tensor -> model input
    std::map<int32_t, int32_t> node_of;   // graph tensor -> node of this split writing it
    for (size_t j = 0; j < ids.size(); ++j) {
        const dwell_node& n = *dwell_graph_node(g, ids[j]);
        const dwell_tensor& w = tensor(g, n.inputs[0]);
        const dwell_tensor& x = tensor(g, n.inputs[1]);
        OH_NN_DataType wt = weight_type(c.options.weights, w.dtype);
        if (wt == OH_NN_FLOAT32 && act == OH_NN_FLOAT16) wt = OH_NN_FLOAT16;
        NetworkSpec::Node node;
        node.weight = converted(c, w, wt);
        if (auto p = node_of.find(n.inputs[1]); p != node_of.end()) {
            node.source = -p->second - 1;
        } else {
            auto [it, added] =
                input_of.emplace(n.inputs[1], static_cast<int32_t>(spec.input_k.size()));
            if (added) {
                spec.input_k.push_back(static_cast<int32_t>(x.ne[0]));
                inputs.push_back(static_cast<const float*>(x.data));
            }
            node.source = it->second;
        }
        char part[96];
        std::snprintf(part, sizeof part, "|%p:%d:%lldx%lld:%d:%d", w.data, w.dtype,
                      static_cast<long long>(w.ne[0]), static_cast<long long>(w.ne[1]), wt,
                      node.source);
        key += part;
        spec.nodes.push_back(std::move(node));
        node_of[n.output] = static_cast<int32_t>(j);
    }

    auto& net = c.networks[key];
    if (!net) {
        const auto t0 = std::chrono::steady_clock::now();
        try {
            net = std::make_unique<Network>(*c.api, std::move(spec), c.options.compile);
        } catch (...) {
            c.networks.erase(key);  // the next step tries again
            throw;
        }
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        c.log(DWELL_LOG_INFO, "compiled " + std::to_string(ids.size()) +
                                  " projection(s) as one NNRt model for m = " + std::to_string(m) +
                                  " on " + c.device.name + " (" +
                                  (act == OH_NN_FLOAT32 ? "f32" : "f16") + " activations, " +
                                  std::to_string(static_cast<int>(ms)) + " ms)");
    }

    // Outputs are staged and written back only once every chunk ran, so a
    // failure leaves the host's tensors as they were for the next backend.
    std::vector<std::vector<float>> staged(ids.size());
    for (size_t j = 0; j < ids.size(); ++j)
        staged[j].resize(static_cast<size_t>(rows) *
                         static_cast<size_t>(net->spec().nodes[j].weight->n));
    std::vector<const float*> in(inputs.size());
    std::vector<float*> out(ids.size());
    for (int64_t r0 = 0; r0 < rows; r0 += m) {
        const int32_t n_rows = static_cast<int32_t>(std::min<int64_t>(m, rows - r0));
        for (size_t i = 0; i < inputs.size(); ++i) in[i] = inputs[i] + r0 * net->spec().input_k[i];
        for (size_t j = 0; j < ids.size(); ++j)
            out[j] = staged[j].data() + r0 * net->spec().nodes[j].weight->n;
        net->run(in, n_rows, out);
    }
    for (size_t j = 0; j < ids.size(); ++j) {
        const dwell_tensor& o = tensor(g, dwell_graph_node(g, ids[j])->output);
        std::memcpy(o.data, staged[j].data(), staged[j].size() * sizeof(float));
    }
}

// ---------------------------------------------------------------------------
// The vtable

dwell_status device_count(void*, uint32_t* count) {
    if (count == nullptr) return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "null count");
    const Probe& p = probe();
    // Without the libraries: one placeholder device that says why.
    *count = p.api == nullptr ? 1 : static_cast<uint32_t>(p.devices.size());
    return DWELL_OK;
}

dwell_status device_info(void*, uint32_t index, dwell_device_info* info) {
    const Probe& p = probe();
    const uint32_t count = p.api == nullptr ? 1 : static_cast<uint32_t>(p.devices.size());
    if (info == nullptr || index >= count)
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "no such device");
    const Device* d = p.api == nullptr ? nullptr : &p.devices[index];
    const dwell_device_kind kind = d == nullptr           ? DWELL_DEVICE_NPU
                                   : d->type == OH_NN_CPU ? DWELL_DEVICE_CPU
                                   : d->type == OH_NN_GPU ? DWELL_DEVICE_GPU
                                                          : DWELL_DEVICE_NPU;
    plugin_kit::DeviceFacts f;
    f.name = d != nullptr ? d->name.c_str() : "npu0";
    f.description = d != nullptr ? d->description.c_str() : "HarmonyOS Neural Network Runtime";
    f.kind = kind;
    f.hardware_id = d != nullptr ? d->hardware_id.c_str() : "nnrt";
    f.buffer_kind = DWELL_BUFFER_DEVICE;
    f.unavailable_reason = d != nullptr ? nullptr : p.why.c_str();
    return plugin_kit::describe_device(info, f);
}

dwell_status context_create(void*, uint32_t device, const dwell_option* options, size_t n_options,
                            const dwell_host_services* host, dwell_backend_context** out) {
    const Probe& p = probe();
    if (p.api == nullptr) return fail_plugin(DWELL_ERR_UNAVAILABLE, p.why);
    if (out == nullptr || device >= p.devices.size())
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "no such device");
    auto c = std::make_unique<dwell_backend_context>();
    c->api = p.api;
    c->host = host;
    c->device = p.devices[device];
    c->options.compile.cache_dir = default_cache_dir();
    for (size_t i = 0; i < n_options; ++i) {
        const auto [key, value] = plugin_kit::option_text(options[i]);
        const std::string why = parse_option(c->options, key, value);
        if (!why.empty()) return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, why);
    }
    if (!c->options.device.empty() && c->device.name.find(c->options.device) == std::string::npos) {
        // The host chose the device by index before options were known, and
        // labels the backend with its name: a mismatch is refused, not hidden.
        std::string names;
        for (const Device& d : p.devices) names += (names.empty() ? "" : ", ") + d.name;
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT,
                           "option device = '" + c->options.device + "' does not match " +
                               c->device.name + " (NNRt devices: " + names +
                               "; name one with the entry's device = \"...\")");
    }
    c->options.compile.device_id = c->device.id;
    c->options.compile.cache_version = kCacheVersion;
    c->log(DWELL_LOG_INFO,
           "using NNRt device " + c->device.name + " (" + c->device.description + ")" +
               (c->options.compile.cache_dir.empty()
                    ? std::string(", no compiled-model cache")
                    : ", compiled models cached in " + c->options.compile.cache_dir));
    *out = c.release();
    return DWELL_OK;
}

int32_t supports_op(dwell_backend_context* c, const dwell_graph* g, int32_t node) {
    return plugin_kit::supports_via(c, g, node, check_node);
}

dwell_status graph_compute(dwell_backend_context* c, const dwell_graph* g, const int32_t* ids,
                           size_t n_ids) {
    if (c == nullptr || g == nullptr || (n_ids > 0 && ids == nullptr))
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "graph_compute: null argument");
    try {
        if (plugin_kit::refuse_unsupported(*c, ids, n_ids,
                                           [&](int32_t id) { return check_node(g, id); }))
            return DWELL_ERR_UNSUPPORTED;
        // Runs of nodes with the same number of rows share one model.
        std::vector<int32_t> run;
        int64_t rows = -1;
        for (size_t i = 0; i <= n_ids; ++i) {
            const int64_t r =
                i < n_ids ? dwell_tensor_nrows(&tensor(g, dwell_graph_node(g, ids[i])->inputs[1]))
                          : -1;
            if (!run.empty() && r != rows) {
                run_split(*c, g, run);
                run.clear();
            }
            if (i < n_ids) run.push_back(ids[i]);
            rows = r;
        }
        return DWELL_OK;
    } catch (const NnrtError& e) {
        c->last_error = std::string("NNRt on ") + c->device.name + ": " + e.what();
        return DWELL_ERR_INTERNAL;
    } catch (const std::bad_alloc&) {
        c->last_error = "out of host memory";
        return DWELL_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        c->last_error = e.what();
        return DWELL_ERR_INTERNAL;
    }
}

// Drops converted weights and the networks built from them.
void release_weights(dwell_backend_context* c, const void* data, size_t bytes) {
    if (c == nullptr || data == nullptr) return;
    std::vector<std::shared_ptr<const ConvertedWeight>> dropped;
    plugin_kit::erase_weights_in(c->weights, plugin_kit::HostRange(data, bytes),
                                 [&](const auto& kv) { dropped.push_back(kv.second); });
    if (dropped.empty()) return;
    for (auto it = c->networks.begin(); it != c->networks.end();) {
        bool uses = false;
        for (const auto& n : it->second->spec().nodes)
            uses |= std::find(dropped.begin(), dropped.end(), n.weight) != dropped.end();
        it = uses ? c->networks.erase(it) : std::next(it);
    }
}

dwell_backend_plugin make_vtable() {
    return plugin_kit::make_vtable<dwell_backend_context>(
        {device_count, device_info, plugin_kit::plugin_last_error, context_create, supports_op,
         graph_compute, release_weights});
}

}  // namespace
}  // namespace dwell::nnrt

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    static const dwell_backend_plugin vtable = dwell::nnrt::make_vtable();
    return dwell::plugin_kit::describe_backend(host, info, dwell::nnrt::kPluginName, "0.1.0",
                                               "HarmonyOS Neural Network Runtime backend", &vtable,
                                               "nnrt plugin: the host's ABI major version differs");
}
