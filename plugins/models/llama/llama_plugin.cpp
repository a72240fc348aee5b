// Entry point of the llama model-architecture plugin. Serves GGUF files
// whose general.architecture is "llama" (Llama 1/2/3, TinyLlama, the
// llama2.c models and other models that use the same layout).
#include <cstddef>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "dwell/model.h"
#include "dwell/plugin.h"
#include "llama_graph.hpp"
#include "llama_hparams.hpp"

struct dwell_model {
    dwell::llama::HParams hparams;
    std::string last_error;
};

namespace {

constexpr const char* kArchitectures[] = {"llama"};

void write_error(char* buf, size_t size, const char* msg) {
    if (buf && size) std::snprintf(buf, size, "%s", msg);
}

template <typename F>
dwell_status guarded(dwell_model* m, F&& f) {
    try {
        f();
        return DWELL_OK;
    } catch (const std::exception& e) {
        if (m) m->last_error = e.what();
        return DWELL_ERR_INVALID_ARGUMENT;
    } catch (...) {
        if (m) m->last_error = "unknown error";
        return DWELL_ERR_INTERNAL;
    }
}

dwell_status create(const dwell_metadata* meta, const dwell_host_services*, dwell_model** out,
                    char* error, size_t error_size) {
    if (!meta || !out) {
        write_error(error, error_size, "create: null argument");
        return DWELL_ERR_INVALID_ARGUMENT;
    }
    try {
        auto model = std::make_unique<dwell_model>();
        model->hparams = dwell::llama::read_hparams(*meta);
        *out = model.release();  // ownership passes to the host until destroy()
        return DWELL_OK;
    } catch (const std::exception& e) {
        write_error(error, error_size, e.what());
        return DWELL_ERR_CORRUPT;
    }
}

void destroy(dwell_model* model) {
    std::unique_ptr<dwell_model> owned(model);
}

const char* last_error(dwell_model* model) {
    return model ? model->last_error.c_str() : "";
}

dwell_status get_info(dwell_model* model, dwell_model_info* info) {
    return guarded(model, [&] {
        const auto& h = model->hparams;
        info->n_vocab = h.n_vocab;
        info->n_ctx_train = h.n_ctx_train;
        info->n_layer = h.n_layer;
        info->kv_width = h.kv_width();
    });
}

dwell_status declare_tensors(dwell_model* model, void (*declare)(void*, const dwell_tensor_decl*),
                             void* user) {
    return guarded(model, [&] {
        for (const auto& t : dwell::llama::tensor_list(model->hparams)) {
            dwell_tensor_decl d{};
            d.struct_size = sizeof(d);
            d.name = t.name.c_str();
            d.n_dims = static_cast<int32_t>(t.ne.size());
            for (size_t i = 0; i < t.ne.size() && i < DWELL_MAX_DIMS; ++i) d.ne[i] = t.ne[i];
            d.required = t.required ? 1 : 0;
            declare(user, &d);
        }
    });
}

dwell_status build_graph(dwell_model* model, const dwell_graph_builder* builder,
                         const dwell_batch* batch) {
    if (!model || !builder || !batch) return DWELL_ERR_INVALID_ARGUMENT;
    return guarded(model, [&] { dwell::llama::build_forward(model->hparams, *builder, *batch); });
}

const dwell_model_plugin kModelPlugin = {
    sizeof(dwell_model_plugin),
    kArchitectures,
    1,
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
    mine.struct_size = sizeof(mine);
    mine.abi_major = DWELL_ABI_MAJOR;  // reported even on refusal, so the host can name it
    mine.abi_minor = DWELL_ABI_MINOR;
    mine.name = "llama";
    mine.version = "0.1.0";
    mine.description = "Llama-family transformer (GQA, RoPE, RMSNorm, SwiGLU)";
    mine.kind = DWELL_PLUGIN_MODEL;
    mine.model = &kModelPlugin;
    if (!host || host->abi_major != DWELL_ABI_MAJOR) {
        mine.error = "the host speaks another major version of the dwell ABI than this plugin (1)";
        dwell_plugin_info_copy(info, &mine);
        return DWELL_ERR_ABI_MISMATCH;
    }
    dwell_plugin_info_copy(info, &mine);
    return DWELL_OK;
}
