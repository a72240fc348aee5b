// Entry point of the sample-llama model-architecture plugin: the one
// exported C symbol (dwell_plugin_query) and the dwell_model_plugin table
// the host calls through.
//
// Rules every model plugin follows, shown here:
//  - no C++ exception crosses the C boundary: each entry point catches and
//    turns the failure into a status plus a one-line message;
//  - the plugin owns its dwell_model objects; the host owns the metadata
//    and builder tables, valid only during the call they are passed to;
//  - the host serialises calls on one dwell_model, so a model needs no lock.
#include <cstddef>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "dwell/model.h"
#include "dwell/plugin.h"
#include "sample_graph.hpp"
#include "sample_hparams.hpp"

// The opaque handle of model.h, defined by the plugin.
struct dwell_model {
    sample_llama::HParams hparams;
    std::string last_error;  // what last_error() returns after a failed call
};

namespace {

constexpr const char* kPluginName = "sample-llama";
constexpr const char* kArchitectures[] = {sample_llama::kArchitecture};

// Runs `body`; an exception becomes a status and the model's last error.
template <typename Body>
dwell_status guarded(dwell_model* model, Body&& body) {
    if (!model) return DWELL_ERR_INVALID_ARGUMENT;
    try {
        body();
        return DWELL_OK;
    } catch (const std::exception& e) {
        model->last_error = e.what();
        return DWELL_ERR_INVALID_ARGUMENT;
    } catch (...) {
        model->last_error = "unexpected failure in the sample-llama plugin";
        return DWELL_ERR_INTERNAL;
    }
}

dwell_status create(const dwell_metadata* meta, const dwell_host_services* host, dwell_model** out,
                    char* error, size_t error_size) {
    // No model exists yet to hold a message: create writes it into the
    // host's buffer, and the host prefixes it with the file's path.
    const auto fail = [&](dwell_status status, const char* message) {
        if (error && error_size) std::snprintf(error, error_size, "%s", message);
        return status;
    };
    if (!meta || !out) return fail(DWELL_ERR_INVALID_ARGUMENT, "create: null argument");
    try {
        auto model = std::make_unique<dwell_model>();
        model->hparams = sample_llama::read_hparams(*meta);
        if (host && host->log) {
            const auto& h = model->hparams;
            const std::string line =
                std::to_string(h.n_layer) + " layers, " + std::to_string(h.n_head) + " heads (" +
                std::to_string(h.n_head_kv) + " K/V), embedding " + std::to_string(h.n_embd);
            host->log(host->host, DWELL_LOG_DEBUG, kPluginName, line.c_str());
        }
        *out = model.release();  // the host owns it until it calls destroy()
        return DWELL_OK;
    } catch (const std::exception& e) {
        return fail(DWELL_ERR_CORRUPT, e.what());
    } catch (...) {
        return fail(DWELL_ERR_INTERNAL, "unexpected failure in the sample-llama plugin");
    }
}

void destroy(dwell_model* model) {
    const std::unique_ptr<dwell_model> owned(model);
}

const char* last_error(dwell_model* model) {
    return model ? model->last_error.c_str() : "";
}

dwell_status get_info(dwell_model* model, dwell_model_info* info) {
    return guarded(model, [&] {
        // Write only the fields the host's struct has room for.
        const auto& h = model->hparams;
        if (DWELL_HAS_FIELD(info, dwell_model_info, n_vocab)) info->n_vocab = h.n_vocab;
        if (DWELL_HAS_FIELD(info, dwell_model_info, n_ctx_train)) info->n_ctx_train = h.n_ctx_train;
        if (DWELL_HAS_FIELD(info, dwell_model_info, n_layer)) info->n_layer = h.n_layer;
        if (DWELL_HAS_FIELD(info, dwell_model_info, kv_width)) info->kv_width = h.kv_width();
    });
}

dwell_status declare_tensors(dwell_model* model,
                             void (*declare)(void* user, const dwell_tensor_decl* decl),
                             void* user) {
    return guarded(model, [&] {
        for (const auto& spec : sample_llama::tensor_specs(model->hparams)) {
            dwell_tensor_decl d{};
            d.struct_size = sizeof d;  // tells the host which fields are filled in
            d.name = spec.name.c_str();
            d.n_dims = static_cast<int32_t>(spec.ne.size());
            for (size_t i = 0; i < spec.ne.size() && i < DWELL_MAX_DIMS; ++i) d.ne[i] = spec.ne[i];
            d.required = spec.required ? 1 : 0;
            declare(user, &d);  // the host copies what it needs before returning
        }
    });
}

dwell_status build_graph(dwell_model* model, const dwell_graph_builder* builder,
                         const dwell_batch* batch) {
    if (!builder || !batch) return DWELL_ERR_INVALID_ARGUMENT;
    return guarded(model, [&] { sample_llama::build_forward(model->hparams, *builder, *batch); });
}

const dwell_model_plugin kModelPlugin = {
    sizeof(dwell_model_plugin),
    kArchitectures,
    sizeof kArchitectures / sizeof kArchitectures[0],
    create,
    destroy,
    last_error,
    get_info,
    declare_tensors,
    build_graph,
};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    if (!info || info->struct_size < offsetof(dwell_plugin_info, kind))
        return DWELL_ERR_INVALID_ARGUMENT;
    dwell_plugin_info mine{};
    mine.struct_size = sizeof mine;
    // The version of the headers this file was compiled against. Reported
    // even when refusing, so the host can name both versions in its error.
    mine.abi_major = DWELL_ABI_MAJOR;
    mine.abi_minor = DWELL_ABI_MINOR;
    mine.name = kPluginName;
    mine.version = "0.1.0";
    mine.description = "sample Llama-style decoder (RMSNorm, GQA attention, RoPE, SwiGLU)";
    mine.kind = DWELL_PLUGIN_MODEL;
    mine.model = &kModelPlugin;
    if (!host || host->abi_major != DWELL_ABI_MAJOR) {
        mine.error = "sample-llama was built for another major version of the dwell ABI";
        dwell_plugin_info_copy(info, &mine);
        return DWELL_ERR_ABI_MISMATCH;
    }
    dwell_plugin_info_copy(info, &mine);  // writes no more than the host's struct holds
    return DWELL_OK;
}
