// The host's dwell_graph_builder with every call checked: a failed call
// throws std::runtime_error carrying what was being built and the host's
// reason, so graph code reads as a straight sequence of ops.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "dwell/model.h"

namespace dwell::model_kit {

// "blk.<layer>.<what>.weight" (or ".bias", ...), as GGUF names layer tensors.
std::string layer_tensor(int32_t layer, const char* what, const char* kind = "weight");

class Builder {
public:
    explicit Builder(const dwell_graph_builder& b) : b_(b) {}

    // Throws when id < 0, with `what` and the host's last error.
    int32_t check(int32_t id, const std::string& what) const;

    // An I32 input vector of n values ("tokens", "positions", "out_rows").
    int32_t input(const char* name, int64_t n) const;
    // A declared weight; throws when the file lacks it.
    int32_t weight(const std::string& name) const;
    // A declared optional weight, or -1 when the file lacks it.
    int32_t optional_weight(const std::string& name) const;
    // Rows [first, first + n) of a declared 2-D weight, sharing its data
    // (ABI 1.5); throws when the host predates it or the rows do not fit.
    int32_t weight_rows(const std::string& name, int64_t first, int64_t n) const;
    int32_t op(dwell_op op, std::initializer_list<int32_t> in,
               std::initializer_list<int32_t> ip = {}, std::initializer_list<float> fp = {}) const;
    int32_t reshape(int32_t t, std::initializer_list<int64_t> ne) const;
    // The K (which = 0) or V (1) cache of a layer.
    int32_t kv(int32_t layer, int32_t which) const;
    // The layer's carried state `which` (0 or 1) of a hybrid model, F32 of
    // shape `ne` (ABI 1.6; e.g. a short convolution's [C, K - 1]); throws
    // when the host predates it, or the model declared no such state or
    // another element count (dwell_model_info.state_elems).
    int32_t recurrent_state(int32_t layer, int32_t which, std::initializer_list<int64_t> ne) const;
    // A read-only F32 tensor of shape `ne` holding a copy of `data`, for
    // values computed from the metadata (ABI 1.8); throws when the host
    // predates it. The same name again returns the same tensor.
    int32_t constant(const std::string& name, std::initializer_list<int64_t> ne,
                     std::span<const float> data) const;
    // Tags the nodes added from now on with a layer (-1: none).
    void layer(int32_t l) const;
    void output(int32_t t) const;

    const dwell_graph_builder& raw() const { return b_; }

private:
    const dwell_graph_builder& b_;
};

}  // namespace dwell::model_kit
