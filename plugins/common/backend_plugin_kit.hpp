// Pieces every out-of-process-library backend plugin (opencl, hexagon)
// needs and would otherwise write again: resolving a vendor library's
// symbols, answering dwell_plugin_query, the supports_op wrapper, and the
// set of tensors a graph writes. Header-only; sees only the SDK headers.
//
// Thread-safety: every function is reentrant. Ownership: nothing is kept.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <string>
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

// Tensors some node of the graph writes (outputs, and the caches ATTENTION
// fills): never weights, so never copied once and kept.
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
    }
    return w;
}

}  // namespace dwell::plugin_kit
