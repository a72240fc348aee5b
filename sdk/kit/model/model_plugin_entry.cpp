#include "model/model_plugin_entry.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

// The opaque handle the host holds: the family object and the last error
// message, which must outlive the call that set it.
struct dwell_model {
    std::unique_ptr<dwell::model_kit::ModelFamily> family;
    std::string last_error;
};

#define DWELL_MODEL_KIT_STR_(x) #x
#define DWELL_MODEL_KIT_STR(x) DWELL_MODEL_KIT_STR_(x)

namespace dwell::model_kit::detail {

namespace {

void write_error(char* buf, size_t size, const char* msg) {
    if (buf && size) std::snprintf(buf, size, "%s", msg);
}

template <typename F>
dwell_status guarded(dwell_model* m, F&& f) {
    if (!m) return DWELL_ERR_INVALID_ARGUMENT;
    try {
        f(*m->family);
        return DWELL_OK;
    } catch (const std::bad_alloc&) {
        m->last_error = "out of memory";
        return DWELL_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        m->last_error = e.what();
        return DWELL_ERR_INVALID_ARGUMENT;
    } catch (...) {
        m->last_error = "unknown error";
        return DWELL_ERR_INTERNAL;
    }
}

void destroy(dwell_model* model) {
    std::unique_ptr<dwell_model> owned(model);
}

const char* last_error(dwell_model* model) {
    return model ? model->last_error.c_str() : "";
}

dwell_status get_info(dwell_model* model, dwell_model_info* info) {
    if (!info || !DWELL_HAS_FIELD(info, dwell_model_info, kv_width))
        return DWELL_ERR_INVALID_ARGUMENT;
    return guarded(model, [&](const ModelFamily& f) {
        dwell_model_info mine = f.info();
        const uint32_t keep = info->struct_size;
        std::copy_n(reinterpret_cast<const char*>(&mine) + sizeof(uint32_t),
                    std::min<size_t>(keep, sizeof mine) - sizeof(uint32_t),
                    reinterpret_cast<char*>(info) + sizeof(uint32_t));
    });
}

dwell_status declare_tensors(dwell_model* model, void (*declare)(void*, const dwell_tensor_decl*),
                             void* user) {
    if (!declare) return DWELL_ERR_INVALID_ARGUMENT;
    return guarded(model, [&](const ModelFamily& f) {
        for (const auto& t : f.tensors()) {
            if (t.ne.empty() || t.ne.size() > DWELL_MAX_DIMS)
                throw std::runtime_error("tensor " + t.name + " has an impossible rank");
            dwell_tensor_decl d{};
            d.struct_size = sizeof(d);
            d.name = t.name.c_str();
            d.n_dims = static_cast<int32_t>(t.ne.size());
            std::copy(t.ne.begin(), t.ne.end(), d.ne);
            d.required = t.required ? 1 : 0;
            declare(user, &d);
        }
    });
}

dwell_status build_graph(dwell_model* model, const dwell_graph_builder* builder,
                         const dwell_batch* batch) {
    if (!builder || !batch) return DWELL_ERR_INVALID_ARGUMENT;
    return guarded(model, [&](const ModelFamily& f) {
        if (batch->n_tokens <= 0 || batch->n_outputs <= 0 || batch->n_outputs > batch->n_tokens)
            throw std::runtime_error("batch needs 1 <= n_outputs <= n_tokens");
        f.build_graph(Builder(*builder), *batch);
    });
}

}  // namespace

dwell_status create_model(FamilyFactory make, const dwell_metadata* meta, dwell_model** out,
                          char* error, size_t error_size) {
    if (!meta || !out) {
        write_error(error, error_size, "create: null argument");
        return DWELL_ERR_INVALID_ARGUMENT;
    }
    try {
        auto model = std::make_unique<dwell_model>();
        model->family = make(MetadataReader(*meta));
        if (!model->family) throw std::runtime_error("the plugin made no model");
        *out = model.release();  // ownership passes to the host until destroy()
        return DWELL_OK;
    } catch (const Decline& e) {
        write_error(error, error_size, e.what());
        return DWELL_ERR_UNSUPPORTED;
    } catch (const std::bad_alloc&) {
        write_error(error, error_size, "out of memory reading the model's metadata");
        return DWELL_ERR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        write_error(error, error_size, e.what());
        return DWELL_ERR_CORRUPT;
    } catch (...) {
        write_error(error, error_size, "unknown error reading the model's metadata");
        return DWELL_ERR_INTERNAL;
    }
}

dwell_model_plugin model_table(const PluginDescription& p, CreateFn create) {
    dwell_model_plugin t{};
    t.struct_size = sizeof(t);
    t.architectures = p.architectures;
    t.n_architectures = p.n_architectures;
    t.create = create;
    t.destroy = destroy;
    t.last_error = last_error;
    t.get_info = get_info;
    t.declare_tensors = declare_tensors;
    t.build_graph = build_graph;
    return t;
}

dwell_status answer_query(const dwell_host_services* host, dwell_plugin_info* info,
                          const PluginDescription& p, const dwell_model_plugin& table) {
    if (!info || info->struct_size < offsetof(dwell_plugin_info, kind))
        return DWELL_ERR_INVALID_ARGUMENT;
    dwell_plugin_info mine{};
    mine.struct_size = sizeof(mine);
    mine.abi_major = DWELL_ABI_MAJOR;  // reported even on refusal, so the host can name it
    mine.abi_minor = DWELL_ABI_MINOR;
    mine.name = p.name;
    mine.version = p.version;
    mine.description = p.description;
    mine.kind = DWELL_PLUGIN_MODEL;
    mine.model = &table;
    if (!host || host->abi_major != DWELL_ABI_MAJOR) {
        mine.error =
            "the host speaks another major version of the dwell ABI than this plugin "
            "(" DWELL_MODEL_KIT_STR(DWELL_ABI_MAJOR) ")";
        dwell_plugin_info_copy(info, &mine);
        return DWELL_ERR_ABI_MISMATCH;
    }
    dwell_plugin_info_copy(info, &mine);
    return DWELL_OK;
}

}  // namespace dwell::model_kit::detail
