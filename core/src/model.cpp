#include "dwell/core/model.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <vector>

#include "dwell/core/error.hpp"
#include "dwell/core/format_bytes.hpp"
#include "dwell/core/runtime.hpp"

namespace dwell {

namespace fs = std::filesystem;

namespace {

std::string shape_str(int32_t n_dims, const int64_t* ne) {
    std::string s = "[";
    for (int i = 0; i < n_dims; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

}  // namespace

Model::Model(GgufFile file, std::shared_ptr<LoadedPlugin> plugin)
    : file_(std::move(file)), plugin_(std::move(plugin)) {}

Model::~Model() {
    if (handle_) plugin_->model()->destroy(handle_);
}

std::shared_ptr<Model> Model::load(Runtime& runtime, const fs::path& path) {
    GgufFile file = GgufFile::open(path);
    auto arch = file.get_string("general.architecture");
    if (!arch) {
        throw Error(
            DWELL_ERR_CORRUPT,
            path.string() + ": metadata key general.architecture is missing or not a string");
    }
    auto plugin = runtime.model_plugin_for(std::string(*arch), path);
    std::shared_ptr<Model> model(new Model(std::move(file), plugin));  // private constructor
    model->architecture_ = std::string(*arch);
    const dwell_model_plugin* api = plugin->model();

    dwell_metadata meta = gguf_metadata(model->file_);
    char error[512] = {0};
    const dwell_status st =
        api->create(&meta, runtime.host_services(), &model->handle_, error, sizeof error);
    if (st != DWELL_OK || !model->handle_) {
        throw Error(
            st == DWELL_OK ? DWELL_ERR_INTERNAL : st,
            path.string() + ": the " + plugin->name() +
                " model plugin refused the model: " + (error[0] ? error : dwell_status_name(st)));
    }
    model->info_.struct_size = sizeof(model->info_);
    if (api->get_info(model->handle_, &model->info_) != DWELL_OK) {
        throw Error(DWELL_ERR_INTERNAL, path.string() +
                                            ": the model plugin could not describe the model: " +
                                            api->last_error(model->handle_));
    }

    // Bind every declared tensor to the file's data, checking shape and type.
    struct Collected {
        std::vector<dwell_tensor_decl> decls;
        std::vector<std::string> names;
    } collected;
    auto collect = [](void* user, const dwell_tensor_decl* decl) {
        auto* c = static_cast<Collected*>(user);
        if (!decl || !decl->name) return;
        c->decls.push_back(*decl);
        c->names.emplace_back(decl->name);
    };
    if (api->declare_tensors(model->handle_, collect, &collected) != DWELL_OK) {
        throw Error(DWELL_ERR_INTERNAL, path.string() +
                                            ": the model plugin could not list its tensors: " +
                                            api->last_error(model->handle_));
    }
    for (size_t i = 0; i < collected.decls.size(); ++i) {
        const auto& decl = collected.decls[i];
        const std::string& name = collected.names[i];
        const auto* t = model->file_.find_tensor(name);
        if (!t) {
            if (decl.required) {
                throw Error(DWELL_ERR_CORRUPT, path.string() + ": tensor '" + name +
                                                   "' needed by the " + plugin->name() +
                                                   " model plugin is missing");
            }
            continue;
        }
        const int32_t nd = std::clamp(decl.n_dims, 1, DWELL_MAX_DIMS);
        bool shape_ok = true;
        for (int d = 0; d < DWELL_MAX_DIMS; ++d) {
            const int64_t want = d < nd ? decl.ne[d] : 1;
            if (want != t->ne[d]) shape_ok = false;
        }
        if (!shape_ok) {
            throw Error(DWELL_ERR_CORRUPT, path.string() + ": tensor '" + name + "' has shape " +
                                               shape_str(t->n_dims, t->ne) +
                                               ", the model's metadata implies " +
                                               shape_str(nd, decl.ne));
        }
        if (t->dtype == DWELL_DTYPE_COUNT || dwell_dtype_block_bytes(t->dtype) == 0) {
            throw Error(DWELL_ERR_UNSUPPORTED,
                        path.string() + ": tensor '" + name + "' has type " +
                            ggml_type_name(t->ggml_type) +
                            ", which this dwell version cannot run (supported: f32, f16, "
                            "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K)");
        }
        dwell_tensor w{};
        w.dtype = t->dtype;
        w.n_dims = t->n_dims;
        std::copy(t->ne, t->ne + DWELL_MAX_DIMS, w.ne);
        w.nb[0] = dwell_dtype_block_bytes(w.dtype);
        w.nb[1] = dwell_row_bytes(w.dtype, w.ne[0]);
        for (int d = 2; d < DWELL_MAX_DIMS; ++d)
            w.nb[d] = w.nb[d - 1] * static_cast<uint64_t>(w.ne[d - 1]);
        // Backends never write weights; the mapping is read-only.
        w.data = const_cast<uint8_t*>(t->data);
        auto [it, inserted] = model->weights_.emplace(name, w);
        it->second.name = it->first.c_str();
        if (inserted) model->weight_bytes_ += t->size;
    }

    model->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(model->file_));
    if (model->tokenizer_->n_vocab() != model->info_.n_vocab) {
        throw Error(DWELL_ERR_CORRUPT, path.string() + ": the vocabulary has " +
                                           std::to_string(model->tokenizer_->n_vocab()) +
                                           " tokens but the model's output has " +
                                           std::to_string(model->info_.n_vocab));
    }
    spdlog::info("model {}: {} by the {} plugin ({}), {} layers, vocab {}, weights {}",
                 path.string(), model->architecture_, plugin->name(), plugin->path().string(),
                 model->info_.n_layer, model->info_.n_vocab, format_bytes(model->weight_bytes_));
    return model;
}

const dwell_tensor* Model::weight(std::string_view name) const {
    auto it = weights_.find(name);
    return it == weights_.end() ? nullptr : &it->second;
}

void Model::build_graph(GraphBuilder& builder, const dwell_batch& batch) const {
    const dwell_model_plugin* api = plugin_->model();
    const dwell_status st = api->build_graph(handle_, builder.c_builder(), &batch);
    if (st != DWELL_OK) {
        const char* e = api->last_error(handle_);
        throw Error(st, "the " + plugin_->name() + " model plugin failed to build the graph: " +
                            (e && *e ? e
                                     : (builder.last_error().empty() ? dwell_status_name(st)
                                                                     : builder.last_error())));
    }
}

}  // namespace dwell
