// The dwell_model_plugin table and dwell_plugin_query, implemented once
// around a ModelFamily: a plugin supplies a factory that reads the file's
// metadata and returns its family object, and everything at the ABI
// (status codes, one-line messages, the opaque dwell_model, tensor
// declarations, struct_size handling) is done here.
//
// Thread-safety: as the ABI says, one model object is used by one thread at
// a time; the family object must not change after construction.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <vector>

#include "dwell/model.h"
#include "dwell/plugin.h"
#include "model/graph_builder.hpp"
#include "model/metadata_reader.hpp"
#include "model/tensor_spec.hpp"

namespace dwell::model_kit {

// One loaded model of a family: immutable hyper-parameters plus the forward
// pass. Methods throw std::runtime_error with a one-line reason.
class ModelFamily {
public:
    virtual ~ModelFamily() = default;
    virtual dwell_model_info info() const = 0;
    // Every tensor the forward pass reads, with its shape.
    virtual std::vector<TensorSpec> tensors() const = 0;
    // Builds the forward graph for one batch (see the conventions in model.h).
    virtual void build_graph(const Builder& b, const dwell_batch& batch) const = 0;
};

// Thrown by a factory for a file that is not this plugin's variant of the
// architecture (e.g. a mixture-of-experts "llama" file for the dense llama
// plugin): create() then returns DWELL_ERR_UNSUPPORTED with the message, so
// the host can try another plugin serving the same architecture. Any other
// exception refuses the file as corrupt.
class Decline : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

using FamilyFactory = std::unique_ptr<ModelFamily> (*)(const MetadataReader& meta);

struct PluginDescription {
    const char* name;                  // the plugin's name, e.g. "qwen2"
    const char* version;               // e.g. "0.1.0"
    const char* description;           // one line
    const char* const* architectures;  // general.architecture values served
    size_t n_architectures;
    FamilyFactory make;
};

namespace detail {

using CreateFn = dwell_status (*)(const dwell_metadata*, const dwell_host_services*, dwell_model**,
                                  char*, size_t);
dwell_status create_model(FamilyFactory make, const dwell_metadata* meta, dwell_model** out,
                          char* error, size_t error_size);
dwell_model_plugin model_table(const PluginDescription& p, CreateFn create);
dwell_status answer_query(const dwell_host_services* host, dwell_plugin_info* info,
                          const PluginDescription& p, const dwell_model_plugin& table);

}  // namespace detail

// The whole of a plugin's dwell_plugin_query: return answer_query<kPlugin>(host, info);
template <const PluginDescription& P>
dwell_status answer_query(const dwell_host_services* host, dwell_plugin_info* info) {
    static const dwell_model_plugin table =
        detail::model_table(P, [](const dwell_metadata* meta, const dwell_host_services*,
                                  dwell_model** out, char* error, size_t error_size) {
            return detail::create_model(P.make, meta, out, error, error_size);
        });
    return detail::answer_query(host, info, P, table);
}

}  // namespace dwell::model_kit
