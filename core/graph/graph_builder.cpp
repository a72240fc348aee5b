#include "dwell/core/graph/graph_builder.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/tensor_shape.hpp"

namespace dwell {

namespace {

[[noreturn]] void fail(dwell_op op, const std::string& what) {
    throw Error(DWELL_ERR_INVALID_ARGUMENT,
                std::string("graph: ") + dwell_op_name(op) + ": " + what);
}

bool same_shape(const dwell_tensor& a, const dwell_tensor& b) {
    return std::equal(a.ne, a.ne + DWELL_MAX_DIMS, b.ne);
}

bool is_vector(const dwell_tensor& t) {
    return t.ne[1] == 1 && t.ne[2] == 1 && t.ne[3] == 1;
}

dwell_tensor shaped(dwell_dtype dtype, std::initializer_list<int64_t> ne) {
    return make_tensor(dtype, static_cast<int32_t>(ne.size()), std::data(ne));
}

// C thunks: exceptions never cross into the plugin.
template <typename F>
int32_t guarded(void* self, F&& f) {
    auto* b = static_cast<GraphBuilder*>(self);
    try {
        return f(*b);
    } catch (const std::exception& e) {
        const_cast<std::string&>(b->last_error()) = e.what();
        return -1;
    }
}

// Element count of a shape from a plugin, or a throw: every dimension in
// 1..2^32 and the product within 2^48, so no size computed from it wraps.
int64_t checked_elements(std::span<const int64_t> ne, const std::string& what) {
    constexpr int64_t kMaxDim = int64_t{1} << 32, kMaxElements = int64_t{1} << 48;
    int64_t n = 1;
    for (int64_t d : ne) {
        if (d < 1 || d > kMaxDim) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: " + what + " has a dimension of " +
                                                        std::to_string(d) + " (allowed 1.." +
                                                        std::to_string(kMaxDim) + ")");
        }
        if (n > kMaxElements / d) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        "graph: " + what + " has more than 2^48 elements");
        }
        n *= d;
    }
    return n;
}

}  // namespace

GraphBuilder::GraphBuilder(Graph& graph, WeightLookup weights, CacheLookup caches,
                           StateLookup states)
    : graph_(graph),
      weights_(std::move(weights)),
      caches_(std::move(caches)),
      states_(std::move(states)) {
    c_.struct_size = sizeof(c_);
    c_.self = this;
    c_.input = [](void* self, const char* name, dwell_dtype dtype_in, int32_t n_dims,
                  const int64_t* ne) {
        int32_t raw = 0;  // checked before it is read as the enum, as for ops
        static_assert(sizeof raw == sizeof dtype_in);
        std::memcpy(&raw, &dtype_in, sizeof raw);
        return guarded(self, [&](GraphBuilder& b) {
            if (!name || n_dims < 1 || n_dims > DWELL_MAX_DIMS || !ne) {
                throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: input needs a name and 1..4 dims");
            }
            if (raw < 0 || raw >= DWELL_DTYPE_COUNT) {
                throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: input '" + std::string(name) +
                                                            "' has unknown dtype " +
                                                            std::to_string(raw));
            }
            return b.input(name, static_cast<dwell_dtype>(raw), {ne, static_cast<size_t>(n_dims)});
        });
    };
    c_.weight = [](void* self, const char* name) {
        return guarded(self, [&](GraphBuilder& b) { return name ? b.weight(name) : -1; });
    };
    c_.weight_rows = [](void* self, const char* name, int64_t first, int64_t n) {
        return guarded(self,
                       [&](GraphBuilder& b) { return name ? b.weight_rows(name, first, n) : -1; });
    };
    c_.kv_cache = [](void* self, int32_t layer, int32_t which) {
        return guarded(self, [&](GraphBuilder& b) { return b.kv_cache(layer, which); });
    };
    c_.recurrent_state = [](void* self, int32_t layer, int32_t which, int32_t n_dims,
                            const int64_t* ne) {
        return guarded(self, [&](GraphBuilder& b) {
            if (n_dims < 1 || n_dims > DWELL_MAX_DIMS || !ne) {
                throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: recurrent_state needs 1..4 dims");
            }
            return b.recurrent_state(layer, which, {ne, static_cast<size_t>(n_dims)});
        });
    };
    c_.constant = [](void* self, const char* name, int32_t n_dims, const int64_t* ne,
                     const float* data) {
        return guarded(self, [&](GraphBuilder& b) {
            if (!name || n_dims < 1 || n_dims > DWELL_MAX_DIMS || !ne || !data) {
                throw Error(DWELL_ERR_INVALID_ARGUMENT,
                            "graph: constant needs a name, 1..4 dims and data");
            }
            const std::span<const int64_t> shape{ne, static_cast<size_t>(n_dims)};
            const int64_t n = checked_elements(shape, "constant '" + std::string(name) + "'");
            return b.constant(name, shape, {data, static_cast<size_t>(n)});
        });
    };
    c_.op = [](void* self, dwell_op op_in, const int32_t* inputs, int32_t n_inputs,
               const int32_t* ip, int32_t n_ip, const float* fp, int32_t n_fp) {
        // A plugin may pass any integer here; reading it as the enum before
        // checking its range would be undefined behaviour in C++.
        int32_t raw = 0;
        static_assert(sizeof raw == sizeof op_in);
        std::memcpy(&raw, &op_in, sizeof raw);
        return guarded(self, [&](GraphBuilder& b) {
            if (raw <= DWELL_OP_NONE || raw >= DWELL_OP_COUNT) {
                throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: unknown op " + std::to_string(raw));
            }
            const auto op = static_cast<dwell_op>(raw);
            if (n_inputs < 0 || n_inputs > DWELL_MAX_INPUTS || n_ip < 0 ||
                n_ip > DWELL_MAX_PARAMS || n_fp < 0 || n_fp > DWELL_MAX_PARAMS ||
                (n_inputs && !inputs) || (n_ip && !ip) || (n_fp && !fp)) {
                throw Error(DWELL_ERR_INVALID_ARGUMENT, std::string("graph: ") + dwell_op_name(op) +
                                                            ": bad input or parameter count");
            }
            return b.op(op, {inputs, static_cast<size_t>(n_inputs)},
                        {ip, static_cast<size_t>(n_ip)}, {fp, static_cast<size_t>(n_fp)});
        });
    };
    c_.reshape = [](void* self, int32_t tensor, int32_t n_dims, const int64_t* ne) {
        return guarded(self, [&](GraphBuilder& b) {
            if (n_dims < 1 || n_dims > DWELL_MAX_DIMS || !ne) {
                throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: reshape needs 1..4 dims");
            }
            return b.reshape(tensor, {ne, static_cast<size_t>(n_dims)});
        });
    };
    c_.set_layer = [](void* self, int32_t layer) {
        static_cast<GraphBuilder*>(self)->set_layer(layer);
    };
    c_.set_output = [](void* self, int32_t tensor) -> dwell_status {
        return guarded(self,
                       [&](GraphBuilder& b) {
                           b.set_output(tensor);
                           return 0;
                       }) < 0
                   ? DWELL_ERR_INVALID_ARGUMENT
                   : DWELL_OK;
    };
    c_.last_error = [](void* self) {
        return static_cast<GraphBuilder*>(self)->last_error().c_str();
    };
}

const dwell_tensor& GraphBuilder::at(int32_t id, const char* what) const {
    if (id < 0 || static_cast<size_t>(id) >= graph_.slots.size()) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    std::string("graph: ") + what + ": no tensor with id " + std::to_string(id));
    }
    return graph_.slots[id].tensor;
}

int32_t GraphBuilder::input(std::string_view name, dwell_dtype dtype, std::span<const int64_t> ne) {
    if (graph_.find_input(std::string(name)) >= 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "graph: input '" + std::string(name) + "' declared twice");
    }
    checked_elements(ne, "input '" + std::string(name) + "'");
    if (dwell_row_bytes(dtype, ne[0]) == 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "graph: input '" + std::string(name) + "' of " + std::to_string(ne[0]) + " " +
                        dwell_dtype_name(dtype) + " values per row cannot be laid out");
    }
    dwell_tensor t = make_tensor(dtype, static_cast<int32_t>(ne.size()), ne.data());
    return graph_.add_tensor(t, TensorRole::Input, std::string(name));
}

int32_t GraphBuilder::weight(std::string_view name) {
    for (size_t i = 0; i < graph_.slots.size(); ++i) {
        const TensorSlot& s = graph_.slots[i];
        if (s.role == TensorRole::Weight && s.tensor.name && name == s.tensor.name) {
            return static_cast<int32_t>(i);
        }
    }
    const dwell_tensor* w = weights_ ? weights_(name) : nullptr;
    if (!w) return -1;
    return graph_.add_tensor(*w, TensorRole::Weight, std::string(name));
}

int32_t GraphBuilder::weight_rows(std::string_view name, int64_t first, int64_t n) {
    const int32_t root = weight(name);
    if (root < 0) return -1;
    const dwell_tensor& w = graph_.slots[static_cast<size_t>(root)].tensor;
    if (w.ne[2] != 1 || w.ne[3] != 1 || first < 0 || n <= 0 || first > w.ne[1] - n) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "graph: rows [" + std::to_string(first) + ", " + std::to_string(first) + " + " +
                        std::to_string(n) + ") of weight '" + std::string(name) + "' " +
                        shape_str(w) + " are out of range");
    }
    dwell_tensor t = w;
    t.name = nullptr;
    t.ne[1] = n;
    for (int d = 2; d < DWELL_MAX_DIMS; ++d)
        t.nb[d] = t.nb[d - 1] * static_cast<uint64_t>(t.ne[d - 1]);
    const uint64_t offset = static_cast<uint64_t>(first) * w.nb[1];
    if (t.data) t.data = static_cast<uint8_t*>(t.data) + offset;
    const int32_t id = graph_.add_tensor(t, TensorRole::View, "");
    graph_.slots[static_cast<size_t>(id)].view_of = root;
    graph_.slots[static_cast<size_t>(id)].view_offset = offset;
    return id;
}

int32_t GraphBuilder::kv_cache(int32_t layer, int32_t which) {
    const dwell_tensor* c = caches_ ? caches_(layer, which) : nullptr;
    if (!c) {
        throw Error(
            DWELL_ERR_INVALID_ARGUMENT,
            "graph: no KV cache for layer " + std::to_string(layer) + (which ? " (V)" : " (K)"));
    }
    int32_t id = graph_.add_tensor(*c, TensorRole::Cache, "");
    graph_.slots[id].layer = layer;
    return id;
}

int32_t GraphBuilder::constant(std::string_view name, std::span<const int64_t> ne,
                               std::span<const float> data) {
    const std::string what = "graph: constant '" + std::string(name) + "'";
    for (size_t i = 0; i < graph_.slots.size(); ++i) {
        const TensorSlot& s = graph_.slots[i];
        if (s.role == TensorRole::Weight && s.tensor.name && name == s.tensor.name) {
            if (!constant_names_.contains(std::string(name)))
                throw Error(DWELL_ERR_INVALID_ARGUMENT, what + " has the name of a file tensor");
            return static_cast<int32_t>(i);
        }
    }
    // A file tensor of that name would be shadowed for the whole graph.
    if (weights_ && weights_(name))
        throw Error(DWELL_ERR_INVALID_ARGUMENT, what + " has the name of a file tensor");
    if (checked_elements(ne, "constant '" + std::string(name) + "'") !=
        static_cast<int64_t>(data.size()))
        throw Error(DWELL_ERR_INVALID_ARGUMENT, what + ": data size differs from its shape");
    std::vector<float>& kept = graph_.keep_constant({data.begin(), data.end()});
    dwell_tensor t = make_tensor(DWELL_F32, static_cast<int32_t>(ne.size()), ne.data());
    t.data = kept.data();
    constant_names_.insert(std::string(name));
    return graph_.add_tensor(t, TensorRole::Weight, std::string(name));
}

int32_t GraphBuilder::recurrent_state(int32_t layer, int32_t which, std::span<const int64_t> ne) {
    const std::string what =
        "recurrent state " + std::to_string(which) + " of layer " + std::to_string(layer);
    if (which != 0 && which != 1) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: " + what + ": `which` must be 0 or 1");
    }
    const dwell_tensor* s = states_ ? states_(layer, which) : nullptr;
    if (!s) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "graph: no " + what +
                        ": the model declares no such state (dwell_model_info.state_elems) or the "
                        "layer is out of range");
    }
    const int64_t n = checked_elements(ne, what);
    if (n != dwell_tensor_nelements(s)) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: " + what + " holds " +
                                                    std::to_string(dwell_tensor_nelements(s)) +
                                                    " values (state_elems), not the " +
                                                    std::to_string(n) + " of the shape asked");
    }
    dwell_tensor t = make_tensor(DWELL_F32, static_cast<int32_t>(ne.size()), ne.data());
    t.data = s->data;
    t.buffer = s->buffer;
    t.offset = s->offset;
    const int32_t id = graph_.add_tensor(t, TensorRole::State, "");
    graph_.slots[static_cast<size_t>(id)].layer = layer;
    return id;
}

int32_t GraphBuilder::reshape(int32_t tensor, std::span<const int64_t> ne) {
    const dwell_tensor& src = at(tensor, "reshape");
    if (!dwell_tensor_is_contiguous(&src)) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: reshape of a non-contiguous tensor");
    }
    const int64_t n = checked_elements(ne, "reshape");
    if (n != dwell_tensor_nelements(&src)) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: reshape of " + shape_str(src) +
                                                    " to a shape with " + std::to_string(n) +
                                                    " elements");
    }
    // A row-format row is one self-contained stream (group headers inside),
    // so its bytes only mean something cut at the same row length.
    if (dwell_dtype_is_row_format(src.dtype) && ne[0] != src.ne[0]) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "graph: reshape of " + shape_str(src) + " must keep its rows of " +
                        std::to_string(src.ne[0]) + " values, got " + std::to_string(ne[0]));
    }
    dwell_tensor t = make_tensor(src.dtype, static_cast<int32_t>(ne.size()), ne.data());
    if (t.nb[1] == 0)
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "graph: reshape splits a quantized block");
    t.data = src.data;
    const int32_t root = graph_.storage_of(tensor);
    int32_t id = graph_.add_tensor(t, TensorRole::View, "");
    graph_.slots[id].view_of = root;
    graph_.slots[id].producer = graph_.slots[tensor].producer;
    return id;
}

// One op's inputs checked and its output shape inferred: infer() picks the
// member for the op. The checks run in a fixed order (input count, then
// each input's id, type and shape), so a bad call always hears the same
// message.
struct GraphBuilder::OpCheck {
    const GraphBuilder& b;
    dwell_op op;
    std::span<const int32_t> in;
    std::span<const int32_t> ip;

    void need(size_t n) const {
        if (in.size() != n)
            fail(op, "takes " + std::to_string(n) + " inputs, got " + std::to_string(in.size()));
    }
    void f32(const dwell_tensor& t, const char* what) const {
        if (t.dtype != DWELL_F32) fail(op, std::string(what) + " must be f32, got " + shape_str(t));
    }
    void i32(const dwell_tensor& t, const char* what) const {
        if (t.dtype != DWELL_I32) fail(op, std::string(what) + " must be i32, got " + shape_str(t));
    }
    const dwell_tensor& input(size_t k, const char* what) const { return b.at(in[k], what); }

    dwell_tensor get_rows() const;
    dwell_tensor matmul() const;
    dwell_tensor broadcast_binary() const;  // add, mul
    dwell_tensor elementwise_unary() const;
    dwell_tensor sparsify() const;
    dwell_tensor swiglu() const;
    dwell_tensor rope() const;
    dwell_tensor attention() const;
    void check_attention_heads(const dwell_tensor& q, const dwell_tensor& k,
                               const dwell_tensor& v) const;
    void check_attention_caches(const dwell_tensor& k, const dwell_tensor& kc,
                                const dwell_tensor& vc) const;
    void check_attention_writes_only_caches() const;
    dwell_tensor topk() const;
    dwell_tensor gather() const;
    dwell_tensor expert_matmul() const;
    dwell_tensor moe_combine() const;
    dwell_tensor cpy() const;
    dwell_tensor short_conv() const;
    dwell_tensor slice() const;
    dwell_tensor gated_delta_net() const;
};

dwell_tensor GraphBuilder::OpCheck::get_rows() const {
    need(2);
    const auto& table = input(0, "get_rows");
    const auto& ids = input(1, "get_rows");
    i32(ids, "ids");
    if (!is_vector(ids)) fail(op, "ids must be a vector, got " + shape_str(ids));
    if (table.ne[2] != 1 || table.ne[3] != 1)
        fail(op, "table must be 2-D, got " + shape_str(table));
    return shaped(DWELL_F32, {table.ne[0], ids.ne[0]});
}

dwell_tensor GraphBuilder::OpCheck::matmul() const {
    need(2);
    const auto& w = input(0, "matmul");
    const auto& x = input(1, "matmul");
    f32(x, "x");
    if (w.ne[2] != 1 || w.ne[3] != 1) fail(op, "weight must be 2-D, got " + shape_str(w));
    if (w.ne[0] != x.ne[0])
        fail(op, "inner dimensions differ: " + shape_str(w) + " x " + shape_str(x));
    return shaped(DWELL_F32, {w.ne[1], x.ne[1], x.ne[2], x.ne[3]});
}

dwell_tensor GraphBuilder::OpCheck::broadcast_binary() const {
    need(2);
    const auto& a = input(0, "add/mul");
    const auto& b = input(1, "add/mul");
    f32(a, "in0");
    f32(b, "in1");
    if (!same_shape(a, b) && !(is_vector(b) && b.ne[0] == a.ne[0])) {
        fail(op, "cannot broadcast " + shape_str(b) + " over " + shape_str(a));
    }
    return make_tensor(DWELL_F32, a.n_dims, a.ne);
}

// graph.h: the mode in iparams[0]; its parameter is checked in op().
dwell_tensor GraphBuilder::OpCheck::sparsify() const {
    need(1);
    const auto& a = input(0, "sparsify");
    f32(a, "input");
    const int32_t mode = ip.empty() ? DWELL_SPARSIFY_FRACTION : ip[0];
    if (mode != DWELL_SPARSIFY_FRACTION && mode != DWELL_SPARSIFY_THRESHOLD)
        fail(op, "iparams[0] (the mode) must be 0 (fraction) or 1 (threshold), got " +
                     std::to_string(mode));
    return make_tensor(DWELL_F32, a.n_dims, a.ne);
}

dwell_tensor GraphBuilder::OpCheck::elementwise_unary() const {
    need(1);
    const auto& a = input(0, dwell_op_name(op));
    f32(a, "input");
    return make_tensor(DWELL_F32, a.n_dims, a.ne);
}

dwell_tensor GraphBuilder::OpCheck::swiglu() const {
    need(2);
    const auto& a = input(0, "swiglu");
    const auto& b = input(1, "swiglu");
    f32(a, "gate");
    f32(b, "up");
    if (!same_shape(a, b)) fail(op, "gate " + shape_str(a) + " and up " + shape_str(b) + " differ");
    return make_tensor(DWELL_F32, a.n_dims, a.ne);
}

dwell_tensor GraphBuilder::OpCheck::rope() const {
    // A third input, the frequency factors, since ABI 1.5.
    if (in.size() != 2 && in.size() != 3)
        fail(op, "takes 2 or 3 inputs, got " + std::to_string(in.size()));
    const auto& x = input(0, "rope");
    const auto& pos = input(1, "rope");
    f32(x, "x");
    i32(pos, "positions");
    if (!is_vector(pos) || pos.ne[0] != x.ne[2]) {
        fail(op,
             "positions " + shape_str(pos) + " must have one entry per token of " + shape_str(x));
    }
    if (ip.size() < 2 || (ip[0] != DWELL_ROPE_NORM && ip[0] != DWELL_ROPE_NEOX) || ip[1] <= 0 ||
        ip[1] > x.ne[0] || ip[1] % 2 != 0) {
        fail(op, "needs iparams {mode, n_rot} with an even n_rot <= head_dim " +
                     std::to_string(x.ne[0]));
    }
    if (in.size() == 3) {
        const auto& factors = input(2, "rope");
        f32(factors, "frequency factors");
        if (!is_vector(factors) || factors.ne[0] != ip[1] / 2) {
            fail(op, "frequency factors " + shape_str(factors) + " must be [" +
                         std::to_string(ip[1] / 2) + "] (n_rot / 2)");
        }
    }
    return make_tensor(DWELL_F32, x.n_dims, x.ne);
}

dwell_tensor GraphBuilder::OpCheck::attention() const {
    need(6);
    const auto& q = input(0, "attention");
    const auto& k = input(1, "attention");
    const auto& v = input(2, "attention");
    const auto& kc = input(3, "attention");
    const auto& vc = input(4, "attention");
    const auto& pos = input(5, "attention");
    f32(q, "q");
    f32(k, "k");
    f32(v, "v");
    i32(pos, "positions");
    check_attention_heads(q, k, v);
    check_attention_caches(k, kc, vc);
    if (!is_vector(pos) || pos.ne[0] != q.ne[2])
        fail(op, "positions must have one entry per token");
    // ABI 1.5: iparams[0] = window, fparams[1] = soft-cap (0: none).
    if (!ip.empty() && ip[0] < 0)
        fail(op, "the window (iparams[0]) must be >= 0, got " + std::to_string(ip[0]));
    check_attention_writes_only_caches();
    return make_tensor(DWELL_F32, q.n_dims, q.ne);
}

void GraphBuilder::OpCheck::check_attention_heads(const dwell_tensor& q, const dwell_tensor& k,
                                                  const dwell_tensor& v) const {
    if (k.ne[0] != q.ne[0] || !same_shape(k, v) || k.ne[2] != q.ne[2] || k.ne[1] <= 0 ||
        q.ne[1] % k.ne[1] != 0) {
        fail(op, "q " + shape_str(q) + ", k " + shape_str(k) + ", v " + shape_str(v) +
                     " are not [hd, n_head, T], [hd, n_kv, T] with n_head a multiple of n_kv");
    }
}

void GraphBuilder::OpCheck::check_attention_caches(const dwell_tensor& k, const dwell_tensor& kc,
                                                   const dwell_tensor& vc) const {
    // Paged (graph.h): a page space and an I32 page table [2, n].
    const bool paged = vc.dtype == DWELL_I32;
    if (paged) {
        if (kc.ne[0] != k.ne[0] * k.ne[1] || kc.n_dims != 3 || vc.n_dims != 2 || vc.ne[0] != 2) {
            fail(op, "paged cache " + shape_str(kc) + " / page table " + shape_str(vc) +
                         " are not [" + std::to_string(k.ne[0] * k.ne[1]) +
                         ", rows_per_page, n_pages] and [2, n_logical]");
        }
    } else if (kc.ne[0] != k.ne[0] * k.ne[1] || !same_shape(kc, vc) || kc.dtype != vc.dtype) {
        fail(op, "caches " + shape_str(kc) + " / " + shape_str(vc) + " do not hold rows of " +
                     std::to_string(k.ne[0] * k.ne[1]));
    }
}

// The op writes into input 3 (and 4 unless paged): they must be the KV
// cache, never weights (read-only mappings) or activations.
void GraphBuilder::OpCheck::check_attention_writes_only_caches() const {
    const Graph& g = b.graph_;
    const int32_t kc_root = g.storage_of(in[3]), vc_root = g.storage_of(in[4]);
    if (g.slots[kc_root].role != TensorRole::Cache || g.slots[vc_root].role != TensorRole::Cache ||
        g.slots[kc_root].tensor.data == g.slots[vc_root].tensor.data) {
        fail(op, "inputs 3 and 4 must be the layer's K and V caches (from kv_cache())");
    }
}

dwell_tensor GraphBuilder::OpCheck::topk() const {
    need(1);
    const auto& a = input(0, "topk");
    f32(a, "input");
    if (ip.empty() || ip[0] <= 0 || ip[0] > a.ne[0])
        fail(op, "k must be in 1.." + std::to_string(a.ne[0]));
    return shaped(DWELL_I32, {ip[0], a.ne[1], a.ne[2], a.ne[3]});
}

dwell_tensor GraphBuilder::OpCheck::gather() const {
    need(2);
    const auto& a = input(0, "gather");
    const auto& ids = input(1, "gather");
    f32(a, "input");
    i32(ids, "ids");
    if (ids.ne[1] != a.ne[1] || ids.ne[2] != a.ne[2] || ids.ne[3] != a.ne[3]) {
        fail(op, "ids " + shape_str(ids) + " do not match rows of " + shape_str(a));
    }
    return make_tensor(DWELL_F32, ids.n_dims, ids.ne);
}

dwell_tensor GraphBuilder::OpCheck::expert_matmul() const {
    need(3);
    const auto& w = input(0, "expert_matmul");
    const auto& x = input(1, "expert_matmul");
    const auto& ids = input(2, "expert_matmul");
    f32(x, "x");
    i32(ids, "ids");
    if (w.ne[0] != x.ne[0] || w.ne[3] != 1 || ids.ne[1] != x.ne[1] || x.ne[2] != 1) {
        fail(op, "weights " + shape_str(w) + ", x " + shape_str(x) + ", ids " + shape_str(ids) +
                     " are not [K, N, E], [K, T], [k, T]");
    }
    return shaped(DWELL_F32, {w.ne[1], ids.ne[0], x.ne[1]});
}

dwell_tensor GraphBuilder::OpCheck::moe_combine() const {
    need(2);
    const auto& y = input(0, "moe_combine");
    const auto& w = input(1, "moe_combine");
    f32(y, "y");
    f32(w, "w");
    if (w.ne[0] != y.ne[1] || w.ne[1] != y.ne[2]) {
        fail(op, "y " + shape_str(y) + " and w " + shape_str(w) + " are not [N, k, T], [k, T]");
    }
    return shaped(DWELL_F32, {y.ne[0], y.ne[2]});
}

dwell_tensor GraphBuilder::OpCheck::cpy() const {
    need(1);
    const auto& a = input(0, "cpy");
    if (ip.empty() || ip[0] < 0 || ip[0] >= DWELL_DTYPE_COUNT) fail(op, "needs the target dtype");
    auto dt = static_cast<dwell_dtype>(ip[0]);
    if (dwell_row_bytes(dt, a.ne[0]) == 0) {
        fail(op, std::string("rows of ") + std::to_string(a.ne[0]) + " cannot be stored as " +
                     dwell_dtype_name(dt));
    }
    return make_tensor(dt, a.n_dims, a.ne);
}

// graph.h: x [C, T], kernel [K, C], state [C, K - 1] written in place, so
// the state must be the layer's own (recurrent_state()), never a weight,
// a view or an activation.
dwell_tensor GraphBuilder::OpCheck::short_conv() const {
    constexpr int64_t kMinTaps = 2, kMaxTaps = 16;
    need(3);
    const auto& x = input(0, "short_conv");
    const auto& w = input(1, "short_conv");
    const auto& st = input(2, "short_conv");
    f32(x, "x (in0)");
    if (x.ne[2] != 1 || x.ne[3] != 1) fail(op, "x (in0) must be [C, T], got " + shape_str(x));
    if (w.dtype != DWELL_F32 && w.dtype != DWELL_F16)
        fail(op, "the kernel (in1) must be f32 or f16, got " + shape_str(w));
    if (w.ne[2] != 1 || w.ne[3] != 1 || w.ne[0] < kMinTaps || w.ne[0] > kMaxTaps ||
        w.ne[1] != x.ne[0]) {
        fail(op, "the kernel (in1) " + shape_str(w) + " must be [K, C] with 2 <= K <= 16 and C = " +
                     std::to_string(x.ne[0]) + " (x's channels)");
    }
    const Graph& g = b.graph_;
    if (g.slots[static_cast<size_t>(in[2])].role != TensorRole::State)
        fail(op, "the state (in2) must be a layer's recurrent_state(), got " + shape_str(st));
    f32(st, "the state (in2)");
    if (st.ne[0] != x.ne[0] || st.ne[1] != w.ne[0] - 1 || st.ne[2] != 1 || st.ne[3] != 1) {
        fail(op, "the state (in2) " + shape_str(st) + " must be [C, K - 1] = [" +
                     std::to_string(x.ne[0]) + ", " + std::to_string(w.ne[0] - 1) + "]");
    }
    return make_tensor(DWELL_F32, 2, x.ne);
}

// graph.h: the columns [iparams[0], iparams[0] + iparams[1]) of every row.
dwell_tensor GraphBuilder::OpCheck::slice() const {
    need(1);
    const auto& a = input(0, "slice");
    f32(a, "input");
    const int64_t first = ip.size() > 0 ? ip[0] : -1;
    const int64_t n = ip.size() > 1 ? ip[1] : 0;
    if (first < 0 || n < 1 || first + n > a.ne[0]) {
        fail(op, "columns " + std::to_string(first) + " + " + std::to_string(n) +
                     " (iparams[0], iparams[1]) do not fit in rows of " + shape_str(a));
    }
    const int64_t ne[DWELL_MAX_DIMS] = {n, a.ne[1], a.ne[2], a.ne[3]};
    return make_tensor(DWELL_F32, a.n_dims, ne);
}

// graph.h: q, k [Dk, Hk, T], v [Dv, Hv, T], g, beta [Hv, T] and the
// layer's own state [Dk, Dv, Hv], which the op writes in place.
dwell_tensor GraphBuilder::OpCheck::gated_delta_net() const {
    need(6);
    const char* names[6] = {"q (in0)", "k (in1)",    "v (in2)",
                            "g (in3)", "beta (in4)", "the state (in5)"};
    for (size_t i = 0; i < 6; ++i) f32(input(i, "gated_delta_net"), names[i]);
    const auto& q = input(0, "gated_delta_net");
    const auto& k = input(1, "gated_delta_net");
    const auto& v = input(2, "gated_delta_net");
    const auto& g = input(3, "gated_delta_net");
    const auto& beta = input(4, "gated_delta_net");
    const auto& st = input(5, "gated_delta_net");
    const int64_t hk = q.ne[1], hv = v.ne[1], T = q.ne[2];
    if (!same_shape(q, k) || q.ne[3] != 1 || v.ne[2] != T || v.ne[3] != 1 || hv % hk != 0) {
        fail(op, "q " + shape_str(q) + ", k " + shape_str(k) + ", v " + shape_str(v) +
                     " must be [Dk, Hk, T], [Dk, Hk, T], [Dv, Hv, T] with Hv a multiple of Hk");
    }
    for (const dwell_tensor* t : {&g, &beta}) {
        if (t->ne[0] != hv || t->ne[1] != T || t->ne[2] != 1 || t->ne[3] != 1)
            fail(op, "g and beta must be [Hv, T] = [" + std::to_string(hv) + ", " +
                         std::to_string(T) + "], got " + shape_str(*t));
    }
    if (b.graph_.slots[static_cast<size_t>(in[5])].role != TensorRole::State)
        fail(op, "the state (in5) must be a layer's recurrent_state(), got " + shape_str(st));
    if (st.ne[0] != q.ne[0] || st.ne[1] != v.ne[0] || st.ne[2] != hv || st.ne[3] != 1) {
        fail(op, "the state (in5) " + shape_str(st) + " must be [Dk, Dv, Hv] = [" +
                     std::to_string(q.ne[0]) + ", " + std::to_string(v.ne[0]) + ", " +
                     std::to_string(hv) + "]");
    }
    if (!ip.empty() && ip[0] != 0 && ip[0] != 1)
        fail(op, "iparams[0] (L2-normalise q and k) must be 0 or 1, got " + std::to_string(ip[0]));
    return make_tensor(DWELL_F32, 3, v.ne);
}

dwell_tensor GraphBuilder::infer(dwell_op op, std::span<const int32_t> in,
                                 std::span<const int32_t> ip) const {
    const OpCheck check{*this, op, in, ip};
    switch (op) {
        case DWELL_OP_GET_ROWS:
            return check.get_rows();
        case DWELL_OP_MATMUL:
            return check.matmul();
        case DWELL_OP_ADD:
        case DWELL_OP_MUL:
            return check.broadcast_binary();
        case DWELL_OP_SCALE:
        case DWELL_OP_RMS_NORM:
        case DWELL_OP_LAYER_NORM:
        case DWELL_OP_SILU:
        case DWELL_OP_GELU:
        case DWELL_OP_SOFTMAX:
        case DWELL_OP_SOFTCAP:
        case DWELL_OP_SIGMOID:
        case DWELL_OP_SOFTPLUS:
            return check.elementwise_unary();
        case DWELL_OP_SPARSIFY:
            return check.sparsify();
        case DWELL_OP_SWIGLU:
            return check.swiglu();
        case DWELL_OP_ROPE:
            return check.rope();
        case DWELL_OP_ATTENTION:
            return check.attention();
        case DWELL_OP_TOPK:
            return check.topk();
        case DWELL_OP_GATHER:
            return check.gather();
        case DWELL_OP_EXPERT_MATMUL:
            return check.expert_matmul();
        case DWELL_OP_MOE_COMBINE:
            return check.moe_combine();
        case DWELL_OP_CPY:
            return check.cpy();
        case DWELL_OP_SHORT_CONV:
            return check.short_conv();
        case DWELL_OP_SLICE:
            return check.slice();
        case DWELL_OP_GATED_DELTA_NET:
            return check.gated_delta_net();
        default:
            fail(op, "unknown op " + std::to_string(static_cast<int>(op)));
    }
}

int32_t GraphBuilder::op(dwell_op op, std::span<const int32_t> inputs,
                         std::span<const int32_t> iparams, std::span<const float> fparams) {
    // Soft-caps divide by their parameter: a NaN or a negative one is a
    // plugin bug, refused here rather than turned into NaN logits.
    const auto cap = [&](size_t i) { return i < fparams.size() ? fparams[i] : 0.0f; };
    if ((op == DWELL_OP_ATTENTION && !(cap(1) >= 0.0f && std::isfinite(cap(1)))) ||
        (op == DWELL_OP_SOFTCAP && !(cap(0) > 0.0f && std::isfinite(cap(0))))) {
        fail(op, std::string("the soft-cap (fparams[") + (op == DWELL_OP_SOFTCAP ? "0" : "1") +
                     "] = " + std::to_string(op == DWELL_OP_SOFTCAP ? cap(0) : cap(1)) +
                     ") must be a finite number " + (op == DWELL_OP_SOFTCAP ? "> 0" : ">= 0"));
    }
    // The delta rule's output scale and L2 epsilon (graph.h).
    const bool l2 = !iparams.empty() && iparams[0] == 1;
    if (op == DWELL_OP_GATED_DELTA_NET && !(std::isfinite(cap(0)) && std::isfinite(cap(1)) &&
                                            (l2 ? cap(1) > 0.0f : cap(1) >= 0.0f))) {
        fail(op, "the scale (fparams[0] = " + std::to_string(cap(0)) +
                     ") and epsilon (fparams[1] = " + std::to_string(cap(1)) +
                     ") must be finite, the epsilon > 0 when q and k are "
                     "L2-normalised");
    }
    if (op == DWELL_OP_SPARSIFY) {
        const bool threshold = !iparams.empty() && iparams[0] == DWELL_SPARSIFY_THRESHOLD;
        if (threshold ? !(cap(0) >= 0.0f && std::isfinite(cap(0)))
                      : !(cap(0) >= 0.0f && cap(0) < 1.0f)) {
            fail(op, "fparams[0] = " + std::to_string(cap(0)) +
                         (threshold ? " must be a finite threshold >= 0"
                                    : " must be a fraction in [0, 1)"));
        }
    }
    if (op == DWELL_OP_MATMUL && (sparsity_ > 0.0f || thresholds_ || record_) &&
        inputs.size() == 2) {
        const int32_t x = sparsify_input(inputs[0], inputs[1]);
        if (x != inputs[1]) {
            const int32_t both[2] = {inputs[0], x};
            return this->op(op, both, iparams, fparams);
        }
    }
    dwell_tensor out = infer(op, inputs, iparams);
    dwell_node node{};
    node.op = op;
    node.n_inputs = static_cast<int32_t>(inputs.size());
    std::copy(inputs.begin(), inputs.end(), node.inputs);
    std::fill(node.inputs + inputs.size(), node.inputs + DWELL_MAX_INPUTS, -1);
    std::copy(iparams.begin(), iparams.end(), node.iparams);
    std::copy(fparams.begin(), fparams.end(), node.fparams);
    node.layer = layer_;
    const int32_t id = graph_.add_tensor(out, TensorRole::Activation, "");
    node.output = id;
    graph_.slots[id].producer = static_cast<int32_t>(graph_.nodes.size());
    graph_.slots[id].layer = layer_;
    graph_.nodes.push_back(node);
    return id;
}

// The projections' inputs only: the token embeddings (a lookup), the output
// head (the logits decide the token; sparsifying them costs the most
// quality for one matrix's bytes) and routers (a wrong expert costs more
// than it saves) keep their inputs dense.
int32_t GraphBuilder::sparsify_input(int32_t weight, int32_t x) {
    if (weight < 0 || static_cast<size_t>(weight) >= graph_.slots.size() || x < 0 ||
        static_cast<size_t>(x) >= graph_.slots.size())
        return x;
    const TensorSlot* w = &graph_.slots[static_cast<size_t>(weight)];
    if (w->role == TensorRole::View && w->view_of >= 0)  // weight_rows(): a fused weight's part
        w = &graph_.slots[static_cast<size_t>(w->view_of)];
    if (w->role != TensorRole::Weight) return x;
    const std::string_view name = w->tensor.name ? w->tensor.name : "";
    const bool excluded = name.empty() || name.starts_with("token_embd") ||
                          name.starts_with("output") || name.find("_inp") != std::string_view::npos;
    const dwell_tensor& xt = graph_.slots[static_cast<size_t>(x)].tensor;
    if (excluded || xt.dtype != DWELL_F32) return x;
    const int32_t producer = graph_.slots[static_cast<size_t>(x)].producer;
    if (producer >= 0 && graph_.nodes[static_cast<size_t>(producer)].op == DWELL_OP_SPARSIFY)
        return x;  // already sparse (the plugin's own, or ours)
    if (const auto it = sparsified_.find(x); it != sparsified_.end()) return it->second;
    // The key: the first consumer's name, so q, k and v's shared input is
    // "blk.N.attn_q" whichever order a plugin uses for the other two.
    std::string key(name);
    if (key.ends_with(".weight")) key.resize(key.size() - 7);
    graph_.sparsity_inputs.emplace_back(x, key);
    int32_t y = x;
    if (record_) graph_.kept.push_back(x);
    if (thresholds_) {
        if (const auto it = thresholds_->find(key); it != thresholds_->end()) {
            const int32_t mode[1] = {DWELL_SPARSIFY_THRESHOLD};
            const float t[1] = {it->second};
            const int32_t in[1] = {x};
            y = op(DWELL_OP_SPARSIFY, in, mode, t);
        }
    } else if (sparsity_ > 0.0f) {
        const int32_t mode[1] = {DWELL_SPARSIFY_FRACTION};
        const float frac[1] = {sparsity_};
        const int32_t in[1] = {x};
        y = op(DWELL_OP_SPARSIFY, in, mode, frac);
    }
    sparsified_[x] = y;
    return y;
}

void GraphBuilder::set_output(int32_t tensor) {
    const dwell_tensor& t = at(tensor, "set_output");
    if (t.dtype != DWELL_F32 || t.ne[2] != 1 || t.ne[3] != 1) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "graph: the output must be f32 [n_vocab, rows], got " + shape_str(t));
    }
    graph_.output = tensor;
}

}  // namespace dwell
