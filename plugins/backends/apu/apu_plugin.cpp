// The apu backend plugin: MediaTek's APU through the NeuronAdapter library.
//
// Probe: the library is loaded with dlopen, trying
// libneuronusdk_adapter.mtk.so, libneuron_adapter_mgvi.so, then
// libneuron_adapter.so ($DWELL_APU_NEURON_LIB, a full path, replaces the
// search: tests point it at the double). Absent, the device is unavailable
// with the names tried and the manifest falls through.
//
// Placement: the APU takes the matmuls whose weights it can bake into a
// compiled network (every dtype with a reference decoder; not streamed
// weights): the QKV, output, FFN and vocabulary projections. Attention and
// the KV cache, norms, RoPE and the rest stay on the cpu backend — a
// hybrid CPU+NPU split the host logs with the placement.
//
// graph_compute lowers each run of nodes with the same row count to one
// NeuronModel (apu_network.hpp), compiled once per (structure, shapes,
// weights) for 1 row (decode) or `prefill_chunk` rows (longer inputs run
// chunk by chunk, the last padded), with the manifest's preference and
// priority, and cached on disk under `cache_dir` with a token derived from
// the network's description and its weights' digests. Any failed Neuron
// call returns a status whose message names the call and its result code;
// the scheduler then runs the step on the next backend with a warning.
//
// Thread-safety: probe calls from any thread; a context is used by one
// thread at a time. Ownership: a context owns its converted weights and
// compiled networks and frees them on release_weights or destruction.
#include <dwell/backend.h>
#include <dwell/quant.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "apu_network.hpp"
#include "apu_options.hpp"
#include "apu_weights.hpp"
#include "backend/backend_plugin_kit.hpp"
#include "backend/vendor_library.hpp"
#include "backend/weight_release.hpp"
#include "fingerprint.hpp"
#include "neuron_adapter_api.hpp"
#include "neuron_objects.hpp"

namespace dwell::apu {
namespace {

constexpr char kPluginName[] = "apu";
constexpr auto fail_plugin = plugin_kit::fail_plugin<kPluginName>;
using plugin_kit::f32_contiguous;
using plugin_kit::tensor;
using plugin_kit::tensor_bytes;

struct Probe {
    const NeuronAdapterApi* api = nullptr;
    std::string why;
    std::string description;
};

Probe make_probe(const std::vector<std::string>& names) {
    Probe r;
    std::string loaded;
    r.api = load_first_neuron_adapter(names, loaded, r.why);
    if (r.api == nullptr) return r;  // the host says "unavailable: <why>"
    NeuronRuntimeVersion v{};
    r.description = "MediaTek APU via NeuronAdapter";
    // Appends, not operator+ chains: GCC 12 warns falsely (-Wrestrict) on those.
    if (r.api->Neuron_getVersion(&v) == NEURON_NO_ERROR) {
        const int parts[] = {v.major, v.minor, v.patch};
        for (int i = 0; i < 3; ++i)
            r.description.append(i == 0 ? " " : ".").append(std::to_string(parts[i]));
    }
    r.description.append(" (").append(loaded).append(")");
    return r;
}

// The probe for the library names in effect: one per value of
// $DWELL_APU_NEURON_LIB seen, so a process (a test binary) may change it.
const Probe& probe() {
    return plugin_kit::probe_per_value<Probe>("DWELL_APU_NEURON_LIB", [](const std::string& lib) {
        return make_probe(lib.empty() ? default_library_names() : std::vector<std::string>{lib});
    });
}

// Weights are identified by address, size and dtype within a process.
using WeightKey = std::tuple<const void*, size_t, int32_t>;

}  // namespace
}  // namespace dwell::apu

struct dwell_backend_context {
    const dwell::apu::NeuronAdapterApi* api = nullptr;
    const dwell_host_services* host = nullptr;
    dwell::apu::ApuOptions options;
    std::string last_error;
    std::map<dwell::apu::WeightKey, std::shared_ptr<const dwell::apu::ConvertedWeight>> weights;
    // Declared after the weights: destroyed first.
    std::map<std::string, std::unique_ptr<dwell::apu::ApuNetwork>> networks;
};

namespace dwell::apu {
namespace {

// Why the APU cannot take node `id`, or "" when it can. `written` (the
// graph's written tensors) is computed here unless the caller has it.
std::string check(const dwell_graph* g, int32_t id, const std::vector<bool>* written = nullptr) {
    const dwell_node* n = dwell_graph_node(g, id);
    if (n == nullptr) return "no such node";
    if (n->op != DWELL_OP_MATMUL)
        return std::string(dwell_op_name(n->op)) +
               " stays on the cpu (the apu runs the matmul projections only)";
    if (n->n_inputs < 2) return "matmul without weights and x";
    const dwell_tensor* w = dwell_graph_tensor(g, n->inputs[0]);
    const dwell_tensor* x = dwell_graph_tensor(g, n->inputs[1]);
    const dwell_tensor* out = dwell_graph_tensor(g, n->output);
    if (w == nullptr || x == nullptr || out == nullptr) return "matmul with a missing tensor";
    if (!dwell_has_decoder(w->dtype))
        return std::string("weights ") + dwell_dtype_name(w->dtype) + " have no decoder";
    if (!dwell_tensor_is_contiguous(w) || w->ne[2] * w->ne[3] != 1)
        return "weights must be one contiguous [K, N] matrix";
    if ((dwell_graph_tensor_flags(g, n->inputs[0]) & DWELL_TENSOR_VOLATILE) != 0)
        return "streamed weights cannot be baked into a compiled network";
    if (w->ne[0] > (1 << 20) || w->ne[1] > (1 << 20)) return "weights larger than 2^20 per side";
    if (!f32_contiguous(*x) || x->ne[0] != w->ne[0]) return "x must be contiguous F32 [K, M]";
    if (!f32_contiguous(*out) || out->ne[0] != w->ne[1] ||
        dwell_tensor_nrows(out) != dwell_tensor_nrows(x))
        return "the output must be contiguous F32 [N, M]";
    const bool computed = written != nullptr
                              ? (*written)[static_cast<size_t>(n->inputs[0])]
                              : plugin_kit::written_tensors(g)[static_cast<size_t>(n->inputs[0])];
    if (computed) return "weights computed by the graph cannot be baked into a compiled network";
    return "";
}

void log_debug(const dwell_backend_context& c, const std::string& line) {
    if (c.host != nullptr && DWELL_HAS_FIELD(c.host, dwell_host_services, log) &&
        c.host->log != nullptr)
        c.host->log(c.host->host, DWELL_LOG_DEBUG, kPluginName, line.c_str());
}

std::shared_ptr<const ConvertedWeight> weight_for(dwell_backend_context& c, const dwell_tensor& w) {
    const WeightKey key{w.data, static_cast<size_t>(tensor_bytes(w)), w.dtype};
    auto it = c.weights.find(key);
    if (it != c.weights.end()) return it->second;
    auto cw = convert_weight(w, c.options.weights);
    if (!cw->borrowed && c.host != nullptr &&
        DWELL_HAS_FIELD(c.host, dwell_host_services, weights_copied) &&
        c.host->weights_copied != nullptr)
        c.host->weights_copied(c.host->host, w.data, static_cast<size_t>(tensor_bytes(w)));
    c.weights.emplace(key, cw);
    return cw;
}

// Runs nodes ids[0..n), which all have `rows` rows, as one network.
void run_group(dwell_backend_context& c, const dwell_graph* g, const int32_t* ids, size_t n,
               int64_t rows) {
    const uint32_t bucket = rows == 1 ? 1 : c.options.prefill_chunk;
    NetworkPlan plan;
    plan.rows = bucket;
    std::vector<int32_t> inputs;  // tensor ids of the external inputs
    std::map<int32_t, int32_t> produced;
    // The network's identity within this process (weights by address) and
    // across processes (weights by digest), for the two caches.
    std::string key =
        "rows=" + std::to_string(bucket) + ";weights=" + weight_mode_name(c.options.weights);
    std::string portable = "dwell-apu-network-v1;" + key;
    std::vector<const void*> sources;
    for (size_t i = 0; i < n; ++i) {
        const dwell_node& node = *dwell_graph_node(g, ids[i]);
        const dwell_tensor& w = tensor(g, node.inputs[0]);
        NetworkPlan::Matmul op;
        op.weight = weight_for(c, w);
        const auto from = produced.find(node.inputs[1]);
        if (from != produced.end()) {
            op.from_op = from->second;
        } else {
            const auto at = std::find(inputs.begin(), inputs.end(), node.inputs[1]);
            op.input = static_cast<int32_t>(at - inputs.begin());
            if (at == inputs.end()) {
                inputs.push_back(node.inputs[1]);
                plan.input_k.push_back(static_cast<uint32_t>(w.ne[0]));
            }
        }
        produced[node.output] = static_cast<int32_t>(i);
        const std::string shape = ";fc " + std::to_string(w.ne[0]) + "x" + std::to_string(w.ne[1]) +
                                  " " + dwell_dtype_name(w.dtype) +
                                  " x=" + std::to_string(op.from_op) + "/" +
                                  std::to_string(op.input);
        char address[32];
        std::snprintf(address, sizeof address, " @%p", w.data);
        key += shape + address;
        portable += shape + " digest=" + std::to_string(op.weight->digest);
        sources.push_back(w.data);
        plan.ops.push_back(op);
    }

    auto& slot = c.networks[key];
    if (!slot) {
        CompileSettings s;
        s.preference = c.options.preference;
        s.priority = c.options.priority;
        s.cache_dir = c.options.cache_dir;
        s.token = cache_token(portable);
        try {
            slot = std::make_unique<ApuNetwork>(*c.api, plan, s);
        } catch (...) {
            c.networks.erase(key);  // compiled again next time
            throw;
        }
        for (const void* p : sources) slot->note_source(p);
        log_debug(c, "compiled a network of " + std::to_string(n) + " FULLY_CONNECTED for nodes " +
                         std::to_string(ids[0]) + "-" + std::to_string(ids[n - 1]) + " (" +
                         std::to_string(bucket) + " row(s), weights " +
                         weight_mode_name(c.options.weights) + ")");
    }
    ApuNetwork& net = *slot;

    // Longer inputs run chunk by chunk; outputs are held back until every
    // chunk has read its inputs, in case the host reuses memory in place.
    const int64_t chunks = (rows + bucket - 1) / bucket;
    std::vector<std::vector<float>> staged(chunks > 1 ? n : 0);
    for (size_t j = 0; j < staged.size(); ++j)
        staged[j].resize(static_cast<size_t>(rows) * plan.ops[j].weight->n);
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
        const int64_t r0 = chunk * bucket;
        const int64_t r = std::min<int64_t>(bucket, rows - r0);
        for (size_t i = 0; i < inputs.size(); ++i) {
            const size_t k = plan.input_k[i];
            const auto* x = static_cast<const float*>(tensor(g, inputs[i]).data);
            float* dst = net.input(i);
            std::memcpy(dst, x + r0 * static_cast<int64_t>(k), static_cast<size_t>(r) * k * 4);
            std::fill(dst + static_cast<size_t>(r) * k, dst + size_t{bucket} * k, 0.0f);
        }
        net.run();
        for (size_t j = 0; j < n; ++j) {
            const size_t cols = plan.ops[j].weight->n;
            float* dst =
                chunks > 1
                    ? staged[j].data()
                    : static_cast<float*>(tensor(g, dwell_graph_node(g, ids[j])->output).data);
            std::memcpy(dst + r0 * static_cast<int64_t>(cols), net.output(j),
                        static_cast<size_t>(r) * cols * 4);
        }
    }
    for (size_t j = 0; j < staged.size(); ++j)
        std::memcpy(tensor(g, dwell_graph_node(g, ids[j])->output).data, staged[j].data(),
                    staged[j].size() * 4);
}

// ---------------------------------------------------------------------------
// The vtable

dwell_status device_info(void*, uint32_t index, dwell_device_info* info) {
    if (info == nullptr || index != 0)
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "no such device");
    const Probe& p = probe();
    plugin_kit::DeviceFacts f;
    f.name = "apu0";
    f.description = p.api != nullptr ? p.description.c_str() : "MediaTek APU";
    f.kind = DWELL_DEVICE_NPU;
    f.hardware_id = "mediatek:apu";
    f.buffer_kind = DWELL_BUFFER_DMABUF;
    f.unavailable_reason = p.api != nullptr ? nullptr : p.why.c_str();
    return plugin_kit::describe_device(info, f);
}

dwell_status context_create(void*, uint32_t device, const dwell_option* options, size_t n_options,
                            const dwell_host_services* host, dwell_backend_context** out) {
    if (out == nullptr || device != 0)
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "no such device");
    const Probe& p = probe();
    if (p.api == nullptr) return fail_plugin(DWELL_ERR_UNAVAILABLE, p.why);
    auto c = std::make_unique<dwell_backend_context>();
    c->api = p.api;
    c->host = host;
    try {
        c->options = parse_options(options, n_options);
    } catch (const ApuError& e) {
        return fail_plugin(e.status(), e.what());
    }
    *out = c.release();
    return DWELL_OK;
}

int32_t supports_op(dwell_backend_context* c, const dwell_graph* g, int32_t node) {
    return plugin_kit::supports_via(
        c, g, node, [](const dwell_graph* gr, int32_t id) { return check(gr, id); });
}

dwell_status graph_compute(dwell_backend_context* c, const dwell_graph* g, const int32_t* ids,
                           size_t n_ids) {
    if (c == nullptr || g == nullptr || (n_ids > 0 && ids == nullptr))
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "graph_compute: null argument");
    try {
        const std::vector<bool> written = plugin_kit::written_tensors(g);
        if (plugin_kit::refuse_unsupported(*c, ids, n_ids,
                                           [&](int32_t id) { return check(g, id, &written); }))
            return DWELL_ERR_UNSUPPORTED;
        // Consecutive nodes with the same row count form one network (the
        // vocabulary projection may see fewer rows than the layers).
        for (size_t start = 0; start < n_ids;) {
            const auto rows_of = [&](size_t i) {
                return dwell_tensor_nrows(&tensor(g, dwell_graph_node(g, ids[i])->inputs[1]));
            };
            const int64_t rows = rows_of(start);
            size_t end = start + 1;
            while (end < n_ids && rows_of(end) == rows) ++end;
            if (rows > 0) run_group(*c, g, ids + start, end - start, rows);
            start = end;
        }
        return DWELL_OK;
    } catch (const ApuError& e) {
        c->last_error = e.what();
        return e.status();
    } catch (const std::bad_alloc&) {
        c->last_error = "out of memory while preparing an APU network";
        return DWELL_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        c->last_error = e.what();
        return DWELL_ERR_INTERNAL;
    }
}

void release_weights(dwell_backend_context* c, const void* data, size_t bytes) {
    if (c == nullptr || data == nullptr) return;
    const plugin_kit::HostRange range(data, bytes);
    std::erase_if(c->networks, [&](const auto& kv) {
        return kv.second->uses_host_range(range.begin(), range.end());
    });
    plugin_kit::erase_weights_in(c->weights, range, [](const auto&) {});
}

dwell_backend_plugin make_vtable() {
    return plugin_kit::make_vtable<dwell_backend_context>(
        {plugin_kit::one_device<kPluginName>, device_info, plugin_kit::plugin_last_error,
         context_create, supports_op, graph_compute, release_weights});
}

}  // namespace
}  // namespace dwell::apu

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    static const dwell_backend_plugin vtable = dwell::apu::make_vtable();
    return dwell::plugin_kit::describe_backend(host, info, dwell::apu::kPluginName, "0.1.0",
                                               "MediaTek APU backend over NeuronAdapter", &vtable,
                                               "apu plugin: the host's ABI major version differs");
}
