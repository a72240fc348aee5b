#include "dwell/core/graph/graph.hpp"

#include "dwell/core/base/error.hpp"

namespace dwell {

dwell_tensor make_tensor(dwell_dtype dtype, int32_t n_dims, const int64_t* ne) {
    dwell_tensor t{};
    t.dtype = dtype;
    t.n_dims = n_dims;
    for (int i = 0; i < DWELL_MAX_DIMS; ++i) t.ne[i] = i < n_dims ? ne[i] : 1;
    t.nb[0] = dwell_dtype_block_bytes(dtype);
    t.nb[1] = dwell_row_bytes(dtype, t.ne[0]);
    for (int i = 2; i < DWELL_MAX_DIMS; ++i)
        t.nb[i] = t.nb[i - 1] * static_cast<uint64_t>(t.ne[i - 1]);
    return t;
}

int32_t Graph::add_tensor(const dwell_tensor& t, TensorRole role, const std::string& name) {
    TensorSlot slot;
    slot.tensor = t;
    slot.role = role;
    if (!name.empty()) {
        names_.push_back(name);
        slot.tensor.name = names_.back().c_str();
    } else {
        slot.tensor.name = nullptr;
    }
    slots.push_back(slot);
    return static_cast<int32_t>(slots.size() - 1);
}

int32_t Graph::find_input(const std::string& name) const {
    for (size_t i = 0; i < slots.size(); ++i) {
        if (slots[i].role == TensorRole::Input && slots[i].tensor.name &&
            name == slots[i].tensor.name) {
            return static_cast<int32_t>(i);
        }
    }
    return -1;
}

const dwell_graph& Graph::c_graph() {
    c_tensors_.resize(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) c_tensors_[i] = slots[i].tensor;
    c_graph_.struct_size = sizeof(dwell_graph);
    c_graph_.n_tensors = static_cast<int32_t>(c_tensors_.size());
    c_graph_.tensors = c_tensors_.data();
    c_graph_.n_nodes = static_cast<int32_t>(nodes.size());
    c_graph_.nodes = nodes.data();
    c_graph_.tensor_stride = sizeof(dwell_tensor);
    c_graph_.node_stride = sizeof(dwell_node);
    return c_graph_;
}

}  // namespace dwell
