// The host's graph builder: what a model plugin calls (through the C table
// from c_builder()) to describe one forward step. Every op's inputs are
// checked and its output shape inferred here, so backends receive only
// well-formed nodes.
//
// Thread-safety: none; one builder per graph being built.
// Ownership: borrows the Graph and the lookups for its own lifetime.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "dwell/core/graph/graph.hpp"
#include "dwell/model.h"

namespace dwell {

class GraphBuilder {
public:
    // Each lookup returns nullptr when the tensor does not exist.
    using WeightLookup = std::function<const dwell_tensor*(std::string_view name)>;
    using CacheLookup = std::function<const dwell_tensor*(int32_t layer, int32_t which)>;
    // A layer's carried state `which` (ABI 1.6): an F32 vector of the
    // model's state_elems[which] values, or nullptr when it has none.
    using StateLookup = std::function<const dwell_tensor*(int32_t layer, int32_t which)>;

    GraphBuilder(Graph& graph, WeightLookup weights, CacheLookup caches, StateLookup states = {});
    // The C table's self pointer is this object: it must not move or copy.
    GraphBuilder(const GraphBuilder&) = delete;
    GraphBuilder& operator=(const GraphBuilder&) = delete;

    // The C table for model plugins; valid while this builder lives.
    const dwell_graph_builder* c_builder() const { return &c_; }

    // The same operations in C++; they throw dwell::Error on bad input.
    int32_t input(std::string_view name, dwell_dtype dtype, std::span<const int64_t> ne);
    int32_t weight(std::string_view name);  // -1 when absent
    // Rows [first, first + n) of a 2-D weight, a view of its data; -1 when absent.
    int32_t weight_rows(std::string_view name, int64_t first, int64_t n);
    int32_t kv_cache(int32_t layer, int32_t which);
    // The layer's carried state `which` as an F32 tensor of shape `ne`, whose
    // element count must be the state's.
    int32_t recurrent_state(int32_t layer, int32_t which, std::span<const int64_t> ne);
    // A read-only F32 tensor holding a copy of `data` (ABI 1.8), kept by the
    // graph and treated as a weight; the same name again returns it.
    int32_t constant(std::string_view name, std::span<const int64_t> ne,
                     std::span<const float> data);
    int32_t op(dwell_op op, std::span<const int32_t> inputs, std::span<const int32_t> iparams = {},
               std::span<const float> fparams = {});
    int32_t reshape(int32_t tensor, std::span<const int64_t> ne);
    void set_layer(int32_t layer) { layer_ = layer; }
    // Activation sparsity (graph.h SPARSIFY): from now on, a MATMUL of a
    // projection weight (not the token embeddings, the output head or a
    // router) reads its input through a SPARSIFY zeroing `fraction` of each
    // token's row, one SPARSIFY per distinct input. 0: off.
    void set_sparsity(float fraction) { sparsity_ = fraction; }
    // Calibrated instead (sparsity_thresholds.hpp): the input keyed k gets a
    // threshold-mode SPARSIFY with thresholds->at(k); an input without a key
    // in the map stays dense. The map must outlive the builder; nullptr: off.
    void set_sparsity_thresholds(const std::map<std::string, float>* thresholds) {
        thresholds_ = thresholds;
    }
    // Recording (dwell calibrate): every projection input is listed in
    // Graph::sparsity_inputs and Graph::kept (its values before any
    // SPARSIFY), whether sparsified or not.
    void set_sparsity_record(bool record) { record_ = record; }
    void set_output(int32_t tensor);

    const std::string& last_error() const { return last_error_; }

private:
    struct OpCheck;  // infer()'s rules, one member per op (graph_builder.cpp)

    const dwell_tensor& at(int32_t id, const char* what) const;
    int32_t sparsify_input(int32_t weight, int32_t x);
    dwell_tensor infer(dwell_op op, std::span<const int32_t> in, std::span<const int32_t> ip) const;

    Graph& graph_;
    WeightLookup weights_;
    CacheLookup caches_;
    StateLookup states_;
    int32_t layer_ = -1;
    float sparsity_ = 0.0f;
    const std::map<std::string, float>* thresholds_ = nullptr;
    bool record_ = false;
    std::map<int32_t, int32_t> sparsified_;              // input tensor -> its SPARSIFY output
    std::set<std::string, std::less<>> constant_names_;  // constant()'s, not the file's
    std::string last_error_;
    dwell_graph_builder c_{};
};

}  // namespace dwell
