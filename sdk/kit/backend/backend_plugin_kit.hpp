// Pieces every out-of-process-library backend plugin (opencl, hexagon, apu,
// nnrt) needs and would otherwise write again: resolving a vendor library's
// symbols, answering dwell_plugin_query and device_info, the plugin-wide and
// per-context last errors, the vtable's context entries, graph access
// (tensor, f32_contiguous, tensor_bytes), the supports_op wrapper, refusing
// a graph_compute with an unsupported node, reading options, and the set of
// tensors a graph writes. Header-only; sees only the SDK headers. Part of
// the SDK's backend kit: dwell_add_plugin(... KIT backend) compiles it into
// each plugin, so nothing here crosses the ABI.
//
// Thread-safety: every function is reentrant; the plugin-wide error is per
// thread. Ownership: nothing is kept; destroy_context takes back the
// context context_create handed out.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dwell/backend.h"

namespace dwell::plugin_kit {

// slot = dlsym(lib, name); on failure `why` says which library lacks what.
template <typename F>
bool resolve_symbol(void* lib, const char* name, F& slot, std::string& why,
                    const std::string& library) {
    slot = reinterpret_cast<F>(::dlsym(lib, name));
    if (slot == nullptr) why = "the " + library + " library lacks " + name;
    return slot != nullptr;
}

// resolve_symbol bound to one library and its `why`: a loader's chain
//   l.ok = resolve("fn_a", api.fn_a) && resolve("fn_b", api.fn_b) && ...;
// stops at the first missing symbol, which `why` then names.
class SymbolResolver {
public:
    SymbolResolver(void* lib, std::string library, std::string& why)
        : lib_(lib), library_(std::move(library)), why_(why) {}
    template <typename F>
    bool operator()(const char* name, F& slot) const {
        return resolve_symbol(lib_, name, slot, why_, library_);
    }

private:
    void* lib_;
    std::string library_;
    std::string& why_;
};

// Fills `info` for a backend plugin; refuses a host of another ABI major.
inline dwell_status describe_backend(const dwell_host_services* host, dwell_plugin_info* info,
                                     const char* name, const char* version, const char* description,
                                     const dwell_backend_plugin* vtable, const char* refusal) {
    if (info == nullptr || !DWELL_HAS_FIELD(info, dwell_plugin_info, abi_minor))
        return DWELL_ERR_INVALID_ARGUMENT;
    info->abi_major = DWELL_ABI_MAJOR;
    info->abi_minor = DWELL_ABI_MINOR;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, name)) info->name = name;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, version)) info->version = version;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, description)) info->description = description;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, kind)) info->kind = DWELL_PLUGIN_BACKEND;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, model)) info->model = nullptr;
    if (DWELL_HAS_FIELD(info, dwell_plugin_info, error)) info->error = nullptr;
    info->struct_size =
        std::min<uint32_t>(info->struct_size, static_cast<uint32_t>(sizeof(dwell_plugin_info)));
    if (host == nullptr || !DWELL_HAS_FIELD(host, dwell_host_services, abi_minor) ||
        host->abi_major != DWELL_ABI_MAJOR || !DWELL_HAS_FIELD(info, dwell_plugin_info, backend)) {
        if (DWELL_HAS_FIELD(info, dwell_plugin_info, error)) info->error = refusal;
        return DWELL_ERR_ABI_MISMATCH;
    }
    info->backend = vtable;
    return DWELL_OK;
}

// What device_info reports for one device.
struct DeviceFacts {
    const char* name = nullptr;
    const char* description = nullptr;
    dwell_device_kind kind = DWELL_DEVICE_NPU;
    const char* hardware_id = nullptr;
    uint64_t memory_total = 0;  // 0: unknown (memory_free is always 0)
    dwell_buffer_kind buffer_kind = DWELL_BUFFER_HOST;
    const char* unavailable_reason = nullptr;  // null: available
};

// Fills the fields of `info` (non-null) its struct_size has room for.
inline dwell_status describe_device(dwell_device_info* info, const DeviceFacts& f) {
    if (DWELL_HAS_FIELD(info, dwell_device_info, name)) info->name = f.name;
    if (DWELL_HAS_FIELD(info, dwell_device_info, description)) info->description = f.description;
    if (DWELL_HAS_FIELD(info, dwell_device_info, kind)) info->kind = f.kind;
    if (DWELL_HAS_FIELD(info, dwell_device_info, hardware_id)) info->hardware_id = f.hardware_id;
    if (DWELL_HAS_FIELD(info, dwell_device_info, memory_total)) info->memory_total = f.memory_total;
    if (DWELL_HAS_FIELD(info, dwell_device_info, memory_free)) info->memory_free = 0;
    if (DWELL_HAS_FIELD(info, dwell_device_info, buffer_kind)) info->buffer_kind = f.buffer_kind;
    if (DWELL_HAS_FIELD(info, dwell_device_info, available))
        info->available = f.unavailable_reason == nullptr;
    if (DWELL_HAS_FIELD(info, dwell_device_info, unavailable_reason))
        info->unavailable_reason = f.unavailable_reason;
    info->struct_size =
        std::min<uint32_t>(info->struct_size, static_cast<uint32_t>(sizeof(dwell_device_info)));
    return DWELL_OK;
}

// A last_error answer: the message, or "no message" when there is none.
inline const char* message_or_none(const std::string& message) {
    return message.empty() ? "no message" : message.c_str();
}

// The plugin-wide last error: what the vtable's last_error answers after a
// failed call that has no context (device_count, device_info,
// context_create). Per thread: probe calls may come from any thread, so
// each sees the message of its own last failing call and none can free a
// string another is reading. One per plugin (the kit is compiled into each,
// with hidden symbols).
inline std::string& plugin_error() {
    thread_local std::string message;
    return message;
}

// Sets the plugin-wide last error to "<Plugin> plugin: <message>" and
// returns `st`. A plugin binds its name once:
//   constexpr char kPluginName[] = "apu";
//   constexpr auto fail_plugin = plugin_kit::fail_plugin<kPluginName>;
template <const char* Plugin>
dwell_status fail_plugin(dwell_status st, std::string message) {
    plugin_error() = std::string(Plugin) + " plugin: " + std::move(message);
    return st;
}

// The vtable's device_count for a plugin with one device (device_info then
// says whether it is available).
template <const char* Plugin>
dwell_status one_device(void*, uint32_t* count) {
    if (count == nullptr) return fail_plugin<Plugin>(DWELL_ERR_INVALID_ARGUMENT, "null count");
    *count = 1;
    return DWELL_OK;
}

// The vtable's last_error over plugin_error().
inline const char* plugin_last_error(void*) {
    return message_or_none(plugin_error());
}

// The vtable's context_last_error for a context with a `last_error` string.
template <typename Context>
const char* context_last_error(Context* c) {
    return c == nullptr ? "no message" : message_or_none(c->last_error);
}

// The vtable's context_destroy: owns again what context_create released to
// the host.
template <typename Context>
void destroy_context(Context* c) {
    std::unique_ptr<Context> owned(c);
}

// The entries a host-memory backend fills; the context's destroy and last
// error come from the templates above, the optional ones stay null unless
// given.
struct BackendEntries {
    dwell_status (*device_count)(void*, uint32_t*);
    dwell_status (*device_info)(void*, uint32_t, dwell_device_info*);
    const char* (*last_error)(void*);
    dwell_status (*context_create)(void*, uint32_t, const dwell_option*, size_t,
                                   const dwell_host_services*, dwell_backend_context**);
    int32_t (*supports_op)(dwell_backend_context*, const dwell_graph*, int32_t);
    dwell_status (*graph_compute)(dwell_backend_context*, const dwell_graph*, const int32_t*,
                                  size_t);
    void (*release_weights)(dwell_backend_context*, const void*, size_t) = nullptr;
};

template <class Context>
dwell_backend_plugin make_vtable(const BackendEntries& e) {
    dwell_backend_plugin v{};
    v.struct_size = sizeof v;
    v.device_count = e.device_count;
    v.device_info = e.device_info;
    v.last_error = e.last_error;
    v.context_create = e.context_create;
    v.context_destroy = destroy_context<Context>;
    v.context_last_error = context_last_error<Context>;
    v.supports_op = e.supports_op;
    v.graph_compute = e.graph_compute;
    v.release_weights = e.release_weights;
    return v;
}

// graph_compute's first step: when check(id) (why node `id` cannot run, or
// "") refuses one of ids[0..n), c.last_error says "node <id>: <why>" and
// the result is true: nothing has run.
template <typename Context, typename Check>
bool refuse_unsupported(Context& c, const int32_t* ids, size_t n, Check check) {
    for (size_t i = 0; i < n; ++i) {
        const std::string why = check(ids[i]);
        if (!why.empty()) {
            c.last_error = "node " + std::to_string(ids[i]) + ": " + why;
            return true;
        }
    }
    return false;
}

// Tensor `id` of `g`, for code that has already checked it exists (nodes
// past check(), their inputs and outputs).
inline const dwell_tensor& tensor(const dwell_graph* g, int32_t id) {
    return *dwell_graph_tensor(g, id);
}

inline bool f32_contiguous(const dwell_tensor& t) {
    return t.dtype == DWELL_F32 && dwell_tensor_is_contiguous(&t);
}

// The bytes of a contiguous tensor's rows (what a weight copy or upload takes).
inline uint64_t tensor_bytes(const dwell_tensor& t) {
    return static_cast<uint64_t>(dwell_tensor_nrows(&t)) * dwell_row_bytes(t.dtype, t.ne[0]);
}

// An option's key and value, a missing one as "".
inline std::pair<std::string, std::string> option_text(const dwell_option& o) {
    return {o.key ? o.key : "", o.value ? o.value : ""};
}

// Host-wide CPU settings the runtime passes to every backend: not a
// plugin's to refuse.
inline bool is_host_option(const std::string& key) {
    return key == "threads" || key == "affinity";
}

// supports_op over a check that returns why a node cannot run ("" if it
// can); the reason goes to the context's last_error.
template <typename Context, typename Check>
int32_t supports_via(Context* c, const dwell_graph* g, int32_t node, Check check) {
    try {
        const std::string why = check(g, node);
        if (why.empty()) return 1;
        if (c != nullptr) c->last_error = why;
        return 0;
    } catch (...) {
        return 0;
    }
}

// Tensors some node of the graph writes (outputs, the caches ATTENTION
// fills, the state SHORT_CONV and GATED_DELTA_NET advance): never weights, so never copied
// once and kept.
inline std::vector<bool> written_tensors(const dwell_graph* g) {
    std::vector<bool> w(static_cast<size_t>(std::max(g->n_tensors, 0)), false);
    const auto mark = [&](int32_t t) {
        if (t >= 0 && t < g->n_tensors) w[static_cast<size_t>(t)] = true;
    };
    for (int32_t i = 0; i < g->n_nodes; ++i) {
        const dwell_node* n = dwell_graph_node(g, i);
        if (n == nullptr) continue;
        mark(n->output);
        if (n->op == DWELL_OP_ATTENTION && n->n_inputs > 4) {
            mark(n->inputs[3]);
            const dwell_tensor* in4 = dwell_graph_tensor(g, n->inputs[4]);
            if (in4 != nullptr && in4->dtype != DWELL_I32) mark(n->inputs[4]);
        }
#if DWELL_ABI_MINOR >= 7
        mark(dwell_node_state_tensor(n));
#elif DWELL_ABI_MINOR >= 6
        if (n->op == DWELL_OP_SHORT_CONV && n->n_inputs == 3) mark(n->inputs[2]);
#endif
    }
    return w;
}

}  // namespace dwell::plugin_kit
