#include "dwell/core/model/model.hpp"

#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/base/tensor_shape.hpp"
#include "dwell/core/kv/recurrent_state.hpp"
#include "dwell/core/runtime/runtime.hpp"

namespace dwell {

namespace fs = std::filesystem;

namespace {

std::string plugin_error(const dwell_model_plugin* api, dwell_model* handle) {
    const char* e = api->last_error ? api->last_error(handle) : nullptr;
    return e && *e ? e : "no message";
}

// A model object made by a plugin, destroyed by that plugin.
struct PluginModelDeleter {
    const dwell_model_plugin* api = nullptr;
    void operator()(dwell_model* m) const {
        if (m) api->destroy(m);
    }
};
using PluginModel = std::unique_ptr<dwell_model, PluginModelDeleter>;

// Offers the file to each plugin serving its architecture, in the runtime's
// order; the first to accept serves it. DWELL_ERR_UNSUPPORTED declines (the
// file is another variant of the architecture, e.g. mixture-of-experts
// "llama" files for the dense llama plugin); any other failure refuses the
// file itself and ends the search.
std::pair<std::shared_ptr<LoadedPlugin>, PluginModel> create_model_object(
    Runtime& runtime, const dwell_metadata& meta, const std::string& arch, const fs::path& path) {
    std::string declined;
    for (auto& plugin : runtime.model_plugins_for(arch, path)) {
        const dwell_model_plugin* api = plugin->model();
        char error[512] = {0};
        dwell_model* raw = nullptr;
        const dwell_status st =
            api->create(&meta, runtime.host_services(), &raw, error, sizeof error);
        error[sizeof error - 1] = '\0';
        PluginModel handle(st == DWELL_OK ? raw : nullptr, PluginModelDeleter{api});
        const std::string why = error[0] ? error : dwell_status_name(st);
        if (st == DWELL_OK && handle) {
            if (!declined.empty()) spdlog::debug("{}: declined by {}", path.string(), declined);
            return {plugin, std::move(handle)};
        }
        if (st != DWELL_ERR_UNSUPPORTED) {
            throw Error(st == DWELL_OK ? DWELL_ERR_INTERNAL : st,
                        path.string() + ": the " + plugin->name() +
                            " model plugin refused the model: " + why);
        }
        declined += (declined.empty() ? "" : "; ") + plugin->name() + ": " + why;
    }
    std::string dirs;
    for (const auto& d : runtime.loader().search_dirs())
        dirs += (dirs.empty() ? "" : ", ") + d.string();
    throw Error(DWELL_ERR_UNSUPPORTED,
                path.string() + ": every model plugin serving architecture '" + arch +
                    "' declined the model (" + declined + "); plugin folders searched: " + dirs);
}

std::string architecture_of(const dwell_metadata& meta, const fs::path& path) {
    const char* arch_text = nullptr;
    size_t arch_len = 0;
    if (!meta.get_string(meta.self, "general.architecture", &arch_text, &arch_len)) {
        throw Error(
            DWELL_ERR_CORRUPT,
            path.string() + ": metadata key general.architecture is missing or not a string");
    }
    return std::string(arch_text, arch_len);
}

// The tensors a model plugin declares, copied out of its callbacks.
struct DeclaredTensors {
    std::vector<dwell_tensor_decl> decls;
    std::vector<std::string> names;
    bool failed = false;
};

DeclaredTensors declared_tensors(const dwell_model_plugin* api, dwell_model* handle,
                                 const fs::path& path) {
    DeclaredTensors collected;
    // Called from plugin code: nothing may throw through it, and only the
    // fields the plugin's struct_size covers are read.
    auto collect = [](void* user, const dwell_tensor_decl* decl) noexcept {
        auto* c = static_cast<DeclaredTensors*>(user);
        if (!decl || !DWELL_HAS_FIELD(decl, dwell_tensor_decl, required) || !decl->name) {
            c->failed = true;
            return;
        }
        try {
            dwell_tensor_decl copy{};
            std::memcpy(&copy, decl, std::min<size_t>(decl->struct_size, sizeof copy));
            c->decls.push_back(copy);
            c->names.emplace_back(decl->name);
        } catch (...) {
            c->failed = true;
        }
    };
    if (api->declare_tensors(handle, collect, &collected) != DWELL_OK || collected.failed) {
        throw Error(DWELL_ERR_INTERNAL, path.string() +
                                            ": the model plugin could not list its tensors: " +
                                            plugin_error(api, handle));
    }
    return collected;
}

// The file's tensor must have the shape the plugin declared and a type
// this version runs.
void check_declared_tensor(const dwell_tensor_decl& decl, const SourceTensor& t,
                           const std::string& name, const fs::path& path) {
    const int32_t nd = std::clamp(decl.n_dims, 1, DWELL_MAX_DIMS);
    bool shape_ok = true;
    for (int d = 0; d < DWELL_MAX_DIMS; ++d) {
        const int64_t want = d < nd ? decl.ne[d] : 1;
        if (want != t.ne[d]) shape_ok = false;
    }
    if (!shape_ok) {
        throw Error(DWELL_ERR_CORRUPT, path.string() + ": tensor '" + name + "' has shape " +
                                           shape_str(t.n_dims, t.ne) +
                                           ", the model's metadata implies " +
                                           shape_str(nd, decl.ne));
    }
    if (t.dtype == DWELL_DTYPE_COUNT || dwell_dtype_block_bytes(t.dtype) == 0) {
        throw Error(DWELL_ERR_UNSUPPORTED,
                    path.string() + ": tensor '" + name + "' has type " + t.type_name +
                        ", which this dwell version cannot run (supported: f32, f16, "
                        "bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K)");
    }
}

// The descriptor backends see for a weight, dense rows of the file's
// layout. No data yet: mapped weights get it once resident, streamed ones
// per step from the streamer.
dwell_tensor weight_descriptor(const SourceTensor& t, bool streamed) {
    dwell_tensor w{};
    w.dtype = t.dtype;
    w.n_dims = t.n_dims;
    std::copy(t.ne, t.ne + DWELL_MAX_DIMS, w.ne);
    w.nb[0] = dwell_dtype_block_bytes(w.dtype);
    w.nb[1] = dwell_row_bytes(w.dtype, w.ne[0]);
    for (int d = 2; d < DWELL_MAX_DIMS; ++d)
        w.nb[d] = w.nb[d - 1] * static_cast<uint64_t>(w.ne[d - 1]);
    w.data = nullptr;
    // Backends never write weights; the mapping is read-only.
    if (streamed) w.flags = DWELL_TENSOR_VOLATILE;
    return w;
}

}  // namespace

Model::Model(std::unique_ptr<ModelSource> source, std::shared_ptr<LoadedPlugin> plugin)
    : source_(std::move(source)), plugin_(std::move(plugin)) {}

Model::~Model() {
    if (auto runtime = runtime_.lock()) {
        if (charged_bytes_ > 0) (*runtime)->uncharge(charged_bytes_, MemoryUse::Weights);
        (*runtime)->forget_model(id_);
        for (const auto& [name, t] : weights_) {
            if (t.data == nullptr) continue;
            uint64_t last = 0;
            for (int d = 1; d < DWELL_MAX_DIMS; ++d) {
                last += static_cast<uint64_t>(t.ne[d] - 1) * t.nb[d];
            }
            (*runtime)->release_weights(t.data, last + dwell_row_bytes(t.dtype, t.ne[0]));
        }
    }
    if (handle_) plugin_->model()->destroy(handle_);
}

std::shared_ptr<Model> Model::load(Runtime& runtime, const fs::path& path,
                                   const LoadProgress& progress) {
    const bool streamed =
        runtime.manifest().memory.weights != "mmap";  // load | stream: read by a WeightStreamer
    // Deferred either way: only the tensors the plugin declares are made
    // resident below, after their bytes are charged to the budget.
    std::unique_ptr<ModelSource> source = open_model_source(path, TensorData::Deferred);
    const dwell_metadata& meta = source->metadata();
    const std::string arch = architecture_of(meta, path);
    auto [plugin, handle] = create_model_object(runtime, meta, arch, path);
    std::shared_ptr<Model> model(new Model(std::move(source), plugin));  // private constructor
    model->handle_ = handle.release();                                   // destroyed by ~Model
    model->runtime_ = runtime.lifetime();
    model->id_ = runtime.next_model_id();
    model->architecture_ = arch;

    model->read_info(path);
    model->bind_weights(path, streamed);
    model->weights_in_place_ = !streamed;
    if (streamed) {
        model->start_streaming(runtime, path, progress);
    } else {
        model->map_weights(runtime, path);
    }
    model->read_tokenizer(path);
    spdlog::info("model {}: {} by the {} plugin ({}), {} layers, vocab {}, weights {}",
                 path.string(), model->architecture_, plugin->name(), plugin->path().string(),
                 model->info_.n_layer, model->info_.n_vocab, format_bytes(model->weight_bytes_));
    return model;
}

void Model::read_info(const fs::path& path) {
    const dwell_model_plugin* api = plugin_->model();
    // A plugin built against an older minor writes only the fields it
    // knows: the rest (ABI 1.6's state_elems) stay 0, "none".
    info_ = dwell_model_info{};
    info_.struct_size = sizeof(info_);
    if (api->get_info(handle_, &info_) != DWELL_OK) {
        throw Error(DWELL_ERR_INTERNAL, path.string() +
                                            ": the model plugin could not describe the model: " +
                                            plugin_error(api, handle_));
    }
    const auto& mi = info_;
    if (mi.n_vocab <= 0 || mi.n_vocab > (int64_t{1} << 24) || mi.n_layer <= 0 ||
        mi.n_layer > 4096 || mi.kv_width <= 0 || mi.kv_width > (int64_t{1} << 24) ||
        mi.n_ctx_train < 0) {
        throw Error(DWELL_ERR_CORRUPT, path.string() + ": the " + plugin_->name() +
                                           " model plugin describes an impossible model (vocab " +
                                           std::to_string(mi.n_vocab) + ", " +
                                           std::to_string(mi.n_layer) + " layers, KV width " +
                                           std::to_string(mi.kv_width) + ")");
    }
    for (int which = 0; which < 2; ++which) {
        const int64_t e = mi.state_elems[which];
        if (e < 0 || e > RecurrentState::kMaxElements) {
            throw Error(DWELL_ERR_CORRUPT, path.string() + ": the " + plugin_->name() +
                                               " model plugin declares a recurrent state " +
                                               std::to_string(which) + " of " + std::to_string(e) +
                                               " values per layer (allowed 0.." +
                                               std::to_string(RecurrentState::kMaxElements) +
                                               "): the file's hyper-parameters are corrupt");
        }
    }
}

// Binds every tensor the plugin declares to the file's tensor of that name,
// checking shape and type.
void Model::bind_weights(const fs::path& path, bool streamed) {
    const DeclaredTensors declared = declared_tensors(plugin_->model(), handle_, path);
    for (size_t i = 0; i < declared.decls.size(); ++i) {
        const auto& decl = declared.decls[i];
        const std::string& name = declared.names[i];
        const SourceTensor* t = source_->find_tensor(name);
        if (!t) {
            if (decl.required) {
                throw Error(DWELL_ERR_CORRUPT, path.string() + ": tensor '" + name +
                                                   "' needed by the " + plugin_->name() +
                                                   " model plugin is missing");
            }
            continue;
        }
        check_declared_tensor(decl, *t, name, path);
        auto [it, inserted] = weights_.emplace(name, weight_descriptor(*t, streamed));
        it->second.name = it->first.c_str();
        if (inserted) {
            weight_bytes_ += t->size;
            if (!streamed && t->stored.frame_sizes.empty()) mapped_weight_bytes_ += t->size;
        }
    }
}

void Model::start_streaming(Runtime& runtime, const fs::path& path, const LoadProgress& progress) {
    const Manifest::Memory& mem = runtime.manifest().memory;
    // The streamer's buffers come from the pool, so they are budgeted there.
    std::vector<std::string> names;
    for (const auto& [name, t] : weights_) names.push_back(name);
    WeightStreamOptions o;
    o.pin_all = mem.weights == "load";
    o.budget_bytes = mem.weight_budget_bytes;
    o.pin_layers = mem.pin_layers;
    o.pin_auto = mem.pin_auto;
    o.prefetch = mem.prefetch_layers;
    o.expert_margin = mem.expert_prefetch_margin;
    o.expert_readers = mem.expert_readers;
    o.progress = progress;
    streamer_ = std::make_unique<WeightStreamer>(*source_, names, o, runtime.pool());
    spdlog::info("{}: {}", path.string(), streamer_->describe());
}

void Model::map_weights(Runtime& runtime, const fs::path& path) {
    const Manifest::Memory& mem = runtime.manifest().memory;
    // Mapped weights count against the budget like every other byte, so a
    // model that cannot fit is refused here rather than killed later.
    runtime.pool().charge(weight_bytes_, MemoryUse::Weights, "the weights of " + path.string());
    charged_bytes_ = weight_bytes_;
    std::vector<std::string> names;
    names.reserve(weights_.size());
    for (const auto& [name, t] : weights_) names.push_back(name);
    // Decompressed weights take memory the mapped ones only may: checked
    // against what the system and the cgroup have left before any of it
    // is allocated.
    source_->make_resident(names, [&](uint64_t bytes) {
        const uint64_t available = runtime.available_memory();
        if (bytes > 0 && available != 0 && bytes > available) {
            throw Error(DWELL_ERR_OUT_OF_MEMORY,
                        path.string() + ": decompressing its weights needs " + format_bytes(bytes) +
                            " but " + format_bytes(available) +
                            " of memory is available: convert it without zstd "
                            "(dwell convert) or free memory");
        }
    });
    for (auto& [name, w] : weights_) {
        w.data = const_cast<uint8_t*>(source_->find_tensor(name)->data);
    }
    if (mem.mlock) lock_weights(mem.pin_layers);
}

void Model::read_tokenizer(const fs::path& path) {
    tokenizer_ = std::make_unique<Tokenizer>(source_->tokenizer());
    if (tokenizer_->n_vocab() != info_.n_vocab) {
        throw Error(DWELL_ERR_CORRUPT, path.string() + ": the vocabulary has " +
                                           std::to_string(tokenizer_->n_vocab()) +
                                           " tokens but the model's output has " +
                                           std::to_string(info_.n_vocab));
    }
}

// mlock of the mapped layers the manifest pins (all when it pins none), so
// the kernel never drops them under memory pressure.
void Model::lock_weights(const std::vector<int32_t>& layers) const {
    uint64_t locked = 0, failed = 0;
    int err = 0;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    for (const auto& [name, t] : weights_) {
        const bool pinned =
            layers.empty() || std::any_of(layers.begin(), layers.end(), [&](int32_t l) {
                return name.rfind("blk." + std::to_string(l) + ".", 0) == 0;
            });
        const SourceTensor* st = source_->find_tensor(name);
        if (!pinned || st == nullptr || st->data == nullptr) continue;
        const auto begin = reinterpret_cast<uintptr_t>(st->data) / page * page;
        const auto end = reinterpret_cast<uintptr_t>(st->data) + st->size;
        if (::mlock(reinterpret_cast<const void*>(begin), end - begin) == 0) {
            locked += st->size;
        } else {
            failed += st->size;
            err = errno;
        }
    }
    if (failed > 0) {
        spdlog::warn(
            "{}: mlock of {} of weights failed ({}); they stay pageable. Raise the "
            "locked-memory limit (ulimit -l) or pin fewer layers ([memory] pin_layers)",
            path().string(), format_bytes(failed), std::strerror(err));
    }
    if (locked > 0)
        spdlog::info("{}: {} of weights locked in memory", path().string(), format_bytes(locked));
}

void Model::check_file() const {
    if (std::string why = source_->file_problem(weights_in_place_); !why.empty())
        throw Error(DWELL_ERR_IO, why);
}

const dwell_tensor* Model::weight(std::string_view name) const {
    auto it = weights_.find(name);
    return it == weights_.end() ? nullptr : &it->second;
}

void Model::build_graph(GraphBuilder& builder, const dwell_batch& batch) const {
    const dwell_model_plugin* api = plugin_->model();
    std::lock_guard lock(build_mutex_);
    const dwell_status st = api->build_graph(handle_, builder.c_builder(), &batch);
    if (st != DWELL_OK) {
        std::string why = plugin_error(api, handle_);
        if (why == "no message")
            why = builder.last_error().empty() ? dwell_status_name(st) : builder.last_error();
        throw Error(st, path().string() + ": the " + plugin_->name() +
                            " model plugin failed to build the graph: " + why);
    }
}

}  // namespace dwell
