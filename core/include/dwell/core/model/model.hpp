// A loaded model: its file (a GGUF file or a dwell pack), its tokenizer,
// the model-architecture plugin that serves its general.architecture, and
// its weights bound as tensors the backends read in place (no copy for
// host-memory backends).
//
// Thread-safety: immutable after load(); build_graph may be called from
// several sessions at once (calls into the plugin are serialised).
// Ownership: shared by the sessions that use it; holds its plugin loaded.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/backend/plugin_loader.hpp"
#include "dwell/core/base/export.hpp"
#include "dwell/core/graph/graph_builder.hpp"
#include "dwell/core/model/load_progress.hpp"
#include "dwell/core/model/model_source.hpp"
#include "dwell/core/model/weight_streamer.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/model.h"

namespace dwell {

class Runtime;

class DWELL_CORE_API Model {
public:
    // Throws dwell::Error with one line naming the file and the fault.
    // `progress` hears how far reading pinned weights has come (stream mode).
    static std::shared_ptr<Model> load(Runtime& runtime, const std::filesystem::path& path,
                                       const LoadProgress& progress = {});
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const std::filesystem::path& path() const { return source_->path(); }
    const ModelSource& source() const { return *source_; }
    const Tokenizer& tokenizer() const { return *tokenizer_; }
    const dwell_model_info& info() const { return info_; }
    const std::string& architecture() const { return architecture_; }
    const LoadedPlugin& plugin() const { return *plugin_; }
    uint64_t weight_bytes() const { return weight_bytes_; }
    // The part of weight_bytes() used in place from the file mapping (not
    // decompressed): page cache the system counts as available.
    uint64_t mapped_weight_bytes() const { return mapped_weight_bytes_; }
    // Unique among the models of its runtime.
    uint64_t id() const { return id_; }

    const dwell_tensor* weight(std::string_view name) const;
    // The reader of streamed weights ([memory] weights = "load" or
    // "stream"); null when the weights are mapped.
    WeightStreamer* streamer() const { return streamer_.get(); }
    // Runs the plugin's build_graph; throws with the plugin's message.
    void build_graph(GraphBuilder& builder, const dwell_batch& batch) const;
    // Throws DWELL_ERR_IO in one line naming the file when the file its
    // weights are read from in place ([memory] weights = "mmap") changed on
    // disk, or when a read of its mapping faulted (mapped_file.hpp). Called
    // before and after every step; loaded weights do not depend on the file.
    void check_file() const;

private:
    Model(std::unique_ptr<ModelSource> source, std::shared_ptr<LoadedPlugin> plugin);
    // load()'s steps, in order; each throws with one line naming `path`.
    void read_info(const std::filesystem::path& path);
    void bind_weights(const std::filesystem::path& path, bool streamed);
    void start_streaming(Runtime& runtime, const std::filesystem::path& path,
                         const LoadProgress& progress);
    void map_weights(Runtime& runtime, const std::filesystem::path& path);
    void read_tokenizer(const std::filesystem::path& path);
    void lock_weights(const std::vector<int32_t>& layers) const;

    std::unique_ptr<ModelSource> source_;
    std::unique_ptr<WeightStreamer> streamer_;  // borrows source_: declared after it
    std::shared_ptr<LoadedPlugin> plugin_;
    std::unique_ptr<Tokenizer> tokenizer_;
    dwell_model* handle_ = nullptr;
    dwell_model_info info_{};
    std::string architecture_;
    std::map<std::string, dwell_tensor, std::less<>> weights_;
    uint64_t weight_bytes_ = 0;
    uint64_t mapped_weight_bytes_ = 0;
    uint64_t charged_bytes_ = 0;
    uint64_t id_ = 0;                 // weight bytes counted in the runtime's memory budget
    bool weights_in_place_ = false;   // "mmap": backends read the file's mapping
    mutable std::mutex build_mutex_;  // the plugin's model object is single-threaded
    // The runtime it was loaded with, told on destruction that the weights
    // are gone (backends drop their copies); expired if the runtime went first.
    std::weak_ptr<const Runtime*> runtime_;
};

}  // namespace dwell
