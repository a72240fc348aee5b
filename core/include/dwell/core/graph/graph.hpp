// A graph as the core holds it while building and running one step: the
// tensors (with their role) and the nodes, plus the C view handed to
// backends.
//
// Thread-safety: none; a Graph belongs to one session step.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "dwell/graph.h"

namespace dwell {

enum class TensorRole : uint8_t {
    Input,       // filled by the host each step (tokens, positions, ...)
    Weight,      // model weights, bound to the model file's data
    Cache,       // KV cache, persists across steps
    State,       // a layer's carried recurrent state (ABI 1.6), persists, written in place
    Activation,  // produced by a node, lives in the step's arena
    View,        // another shape of an existing tensor's data
};

struct TensorSlot {
    dwell_tensor tensor{};
    TensorRole role = TensorRole::Activation;
    int32_t view_of = -1;      // for views: the tensor whose data this shares (never a view)
    uint64_t view_offset = 0;  // for views: where in view_of's data this one starts (bytes)
    int32_t producer = -1;     // node index that writes it, -1 for leaves
    int32_t layer = -1;
};

class Graph {
public:
    Graph() = default;
    // Slots point at names_ and c_graph_ at c_tensors_: a copy would alias them.
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    std::vector<TensorSlot> slots;
    std::vector<dwell_node> nodes;
    int32_t output = -1;
    // Each projection input the builder considered for sparsity (dense or
    // not): the tensor and its key, the first consumer weight's name without
    // ".weight" (sparsity_thresholds.hpp). In the order the plugin built them.
    std::vector<std::pair<int32_t, std::string>> sparsity_inputs;
    // Activations read after the run besides the output (kept alive by
    // plan_activations): the inputs above when they are being recorded.
    std::vector<int32_t> kept;

    int32_t add_tensor(const dwell_tensor& t, TensorRole role, const std::string& name);
    // The C view: tensor array rebuilt from slots (pointers to names stay valid
    // while the Graph lives). Call after data pointers are final.
    const dwell_graph& c_graph();
    int32_t find_input(const std::string& name) const;
    // Storage for a constant's values (ABI 1.8) that lives as long as the
    // graph; deque: growth never moves earlier values.
    std::vector<float>& keep_constant(std::vector<float> values) {
        return constants_.emplace_back(std::move(values));
    }

    // The tensor that owns the memory of `id` (itself unless it is a view).
    int32_t storage_of(int32_t id) const { return slots[id].view_of >= 0 ? slots[id].view_of : id; }

private:
    std::deque<std::string> names_;  // deque: growth never moves existing strings
    std::deque<std::vector<float>> constants_;
    std::vector<dwell_tensor> c_tensors_;
    dwell_graph c_graph_{};
};

// Fills ne/nb of a contiguous tensor.
dwell_tensor make_tensor(dwell_dtype dtype, int32_t n_dims, const int64_t* ne);

}  // namespace dwell
