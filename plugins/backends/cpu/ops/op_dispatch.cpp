#include "ops/op_dispatch.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "dwell/plugin.h"
#include "ops/quantized_acts.hpp"
#include "ops/tensor_access.hpp"
#include "simd/sparse_matvec.hpp"

namespace dwell::cpu {

namespace {

using CheckFn = OpVerdict (*)(const NodeArgs&);
using RunFn = void (*)(const NodeArgs&, ThreadPool&);

struct KernelEntry {
    int n_inputs = 0;
    CheckFn check = nullptr;
    RunFn run = nullptr;
    // Whether the output may be one of the inputs: true for ops that read
    // each element (or row) before writing the same place.
    bool in_place_ok = false;
    // Inputs after the first n_inputs a node may add (ROPE's factors).
    int n_optional = 0;
};

constexpr KernelEntry kernel_for(int32_t op) {
    switch (op) {
        case DWELL_OP_GET_ROWS:
            return {2, check_get_rows, run_get_rows, false};
        case DWELL_OP_MATMUL:
            return {2, check_matmul, run_matmul, false};
        case DWELL_OP_ADD:
            return {2, check_binary, run_add, true};
        case DWELL_OP_MUL:
            return {2, check_binary, run_mul, true};
        case DWELL_OP_SCALE:
            return {1, check_unary, run_scale, true};
        case DWELL_OP_RMS_NORM:
            return {1, check_norm, run_rms_norm, true};
        case DWELL_OP_LAYER_NORM:
            return {1, check_norm, run_layer_norm, true};
        case DWELL_OP_ROPE:
            return {2, check_rope, run_rope, true, 1};
        case DWELL_OP_ATTENTION:
            return {6, check_attention, run_attention, false};
        case DWELL_OP_SILU:
            return {1, check_unary, run_silu, true};
        case DWELL_OP_GELU:
            return {1, check_unary, run_gelu, true};
        case DWELL_OP_SWIGLU:
            return {2, check_swiglu, run_swiglu, true};
        case DWELL_OP_SOFTMAX:
            return {1, check_softmax, run_softmax, true};
        case DWELL_OP_TOPK:
            return {1, check_topk, run_topk, false};
        case DWELL_OP_GATHER:
            return {2, check_gather, run_gather, false};
        case DWELL_OP_EXPERT_MATMUL:
            return {3, check_expert_matmul, run_expert_matmul, false};
        case DWELL_OP_MOE_COMBINE:
            return {2, check_moe_combine, run_moe_combine, false};
        case DWELL_OP_CPY:
            return {1, check_cpy, run_cpy, false};
        case DWELL_OP_SOFTCAP:
            return {1, check_softcap, run_softcap, true};
        case DWELL_OP_SHORT_CONV:
            return {3, check_short_conv, run_short_conv, false};
        case DWELL_OP_SIGMOID:
            return {1, check_unary, run_sigmoid, true};
        case DWELL_OP_SOFTPLUS:
            return {1, check_unary, run_softplus, true};
        case DWELL_OP_SLICE:
            return {1, check_slice, run_slice, false};
        case DWELL_OP_GATED_DELTA_NET:
            return {6, check_gated_delta_net, run_gated_delta_net, false};
        case DWELL_OP_SPARSIFY:
            return {1, check_sparsify, run_sparsify, true};
        default:
            return {};
    }
}

// One past the last byte of t.
const unsigned char* tensor_end(const dwell_tensor& t) {
    uint64_t last = 0;
    for (int d = 1; d < DWELL_MAX_DIMS; ++d) last += static_cast<uint64_t>(t.ne[d] - 1) * t.nb[d];
    return static_cast<const unsigned char*>(t.data) + last + dwell_row_bytes(t.dtype, t.ne[0]);
}

// Enum fields are read as raw integers: a garbage value must be reported,
// not loaded as an out-of-range enum (undefined behaviour in C++).
int32_t raw_enum(const void* field) {
    int32_t v;
    memcpy(&v, field, sizeof v);
    return v;
}

std::string op_label(int32_t op) {
    if (op >= 0 && op < DWELL_OP_COUNT) return dwell_op_name(static_cast<dwell_op>(op));
    return "unknown op " + std::to_string(op);
}

// Loose sanity bounds that keep index arithmetic far from int64 overflow.
constexpr int64_t kMaxDim = int64_t{1} << 32;
constexpr int64_t kMaxElements = int64_t{1} << 48;
constexpr uint64_t kMaxStride = uint64_t{1} << 48;

size_t element_alignment(dwell_dtype t) {
    // 16-bit and block types are read with memcpy, so only 4-byte scalars
    // need aligned rows.
    return (t == DWELL_F32 || t == DWELL_I32) ? 4 : 1;
}

OpVerdict check_layout(const dwell_tensor& t, std::string_view role, bool need_data) {
    const int32_t dtype = raw_enum(&t.dtype);
    if (dtype < 0 || dtype >= DWELL_DTYPE_COUNT ||
        dwell_dtype_block_elems(static_cast<dwell_dtype>(dtype)) == 0) {
        return unsupported(std::string(role) + ": dtype " + std::to_string(dtype) +
                           " is not supported");
    }
    int64_t n = 1;
    for (int d = 0; d < DWELL_MAX_DIMS; ++d) {
        if (t.ne[d] < 1 || t.ne[d] > kMaxDim) {
            return invalid(std::string(role) + ": ne[" + std::to_string(d) +
                           "] = " + std::to_string(t.ne[d]) + " is out of range");
        }
        n *= t.ne[d];
        if (n > kMaxElements) return invalid(std::string(role) + ": too many elements");
    }
    const int64_t block = dwell_dtype_block_elems(t.dtype);
    if (t.ne[0] % block != 0) {
        return invalid(std::string(role) + ": row length " + std::to_string(t.ne[0]) +
                       " is not a multiple of the " + dwell_dtype_name(t.dtype) + " block size");
    }
    if (t.nb[0] != dwell_dtype_block_bytes(t.dtype)) {
        return unsupported(std::string(role) + ": elements inside a row are not packed (nb[0] = " +
                           std::to_string(t.nb[0]) + ")");
    }
    const uint64_t row_bytes = dwell_row_bytes(t.dtype, t.ne[0]);
    for (int d = 1; d < DWELL_MAX_DIMS; ++d) {
        if (t.ne[d] == 1) continue;  // the stride of a single-entry dim is never used
        if (t.nb[d] < row_bytes || t.nb[d] > kMaxStride) {
            return unsupported(std::string(role) + ": stride nb[" + std::to_string(d) +
                               "] = " + std::to_string(t.nb[d]) + " overlaps rows of " +
                               std::to_string(row_bytes) + " bytes");
        }
    }
    if (need_data) {
        if (t.data == nullptr) return invalid(std::string(role) + ": no data");
        const size_t align = element_alignment(t.dtype);
        bool aligned = reinterpret_cast<uintptr_t>(t.data) % align == 0;
        for (int d = 1; d < DWELL_MAX_DIMS; ++d) aligned = aligned && t.nb[d] % align == 0;
        if (!aligned) return invalid(std::string(role) + ": data or strides are misaligned");
    }
    return std::nullopt;
}

// Calls f(id) for each tensor the node writes: its output, ATTENTION's
// cache inputs and the state SHORT_CONV and GATED_DELTA_NET advance (graph.h). Safe on unchecked
// nodes: ids are range-checked.
template <typename F>
void for_each_written(const dwell_graph* graph, const dwell_node& node, F&& f) {
    auto visit = [&](int32_t id) {
        if (id >= 0 && id < graph->n_tensors) f(id);
    };
    visit(node.output);
    visit(dwell_node_state_tensor(&node));
    if (raw_enum(&node.op) != DWELL_OP_ATTENTION || node.n_inputs < 5) return;
    visit(node.inputs[3]);
    const dwell_tensor* in4 = dwell_graph_tensor(graph, node.inputs[4]);
    if (in4 != nullptr && attention_writes_input4(*in4)) visit(node.inputs[4]);
}

OpVerdict check_node_impl(const dwell_graph* graph, int32_t node_index, bool need_data,
                          NodeArgs* out_args) {
    if (graph == nullptr) return invalid("no graph");
    if (!DWELL_HAS_FIELD(graph, dwell_graph, nodes)) return invalid("graph struct too small");
    if (graph->n_tensors < 0 || (graph->n_tensors > 0 && graph->tensors == nullptr)) {
        return invalid("graph has no tensor array");
    }
    if (graph->n_nodes < 0 || (graph->n_nodes > 0 && graph->nodes == nullptr)) {
        return invalid("graph has no node array");
    }
    if (node_index < 0 || node_index >= graph->n_nodes) {
        return invalid("node index " + std::to_string(node_index) + " is out of range");
    }
    const dwell_node& node = *dwell_graph_node(graph, node_index);
    const int32_t op = raw_enum(&node.op);
    const KernelEntry entry = kernel_for(op);
    if (entry.run == nullptr) return unsupported(op_label(op) + " is not implemented");
    if (node.n_inputs < entry.n_inputs || node.n_inputs > entry.n_inputs + entry.n_optional) {
        return invalid("expects " + std::to_string(entry.n_inputs) +
                       (entry.n_optional
                            ? " to " + std::to_string(entry.n_inputs + entry.n_optional)
                            : std::string()) +
                       " inputs, got " + std::to_string(node.n_inputs));
    }

    auto tensor_at = [&](int32_t id) -> const dwell_tensor* {
        return dwell_graph_tensor(graph, id);
    };
    NodeArgs args;
    args.node = &node;
    args.out = tensor_at(node.output);
    if (args.out == nullptr) {
        return invalid("output tensor id " + std::to_string(node.output) + " is out of range");
    }
    if (auto p = check_layout(*args.out, "output", need_data)) return p;
    for (int i = 0; i < node.n_inputs; ++i) {
        const int32_t id = node.inputs[i];
        args.in[static_cast<size_t>(i)] = tensor_at(id);
        // Names for messages, without building a string per node per token.
        static constexpr const char* kRoles[DWELL_MAX_INPUTS] = {"input 0", "input 1", "input 2",
                                                                 "input 3", "input 4", "input 5"};
        const std::string_view role = kRoles[i];
        if (args.in[static_cast<size_t>(i)] == nullptr) {
            return invalid(std::string(role) + ": tensor id " + std::to_string(id) +
                           " is out of range");
        }
        if (auto p = check_layout(*args.in[static_cast<size_t>(i)], role, need_data)) return p;
        if (!entry.in_place_ok &&
            (id == node.output ||
             (need_data && args.in[static_cast<size_t>(i)]->data == args.out->data))) {
            return unsupported(std::string(role) + ": cannot be computed in place");
        }
    }
    if (auto p = entry.check(args)) return p;
    if (out_args != nullptr) *out_args = args;
    return std::nullopt;
}

}  // namespace

OpVerdict check_node(const dwell_graph* graph, int32_t node, bool need_data, NodeArgs* args) {
    return check_node_impl(graph, node, need_data, args);
}

OpVerdict compute_nodes(const dwell_graph* graph, const int32_t* node_ids, size_t n_ids,
                        ThreadPool& pool, PackedWeights* packed, WeightReadCounts* reads) {
    if (n_ids > 0 && node_ids == nullptr) return invalid("no node id array");
    QuantizedActs acts;
    SparseActsCache sparse_acts;
    // Tensors SPARSIFY writes: a matmul reading one may skip the weight
    // columns of its zeros.
    std::vector<bool> sparse;
    if (graph != nullptr && graph->n_tensors > 0) {
        for (int32_t n = 0; n < graph->n_nodes; ++n) {
            const dwell_node* node = dwell_graph_node(graph, n);
            if (node == nullptr || raw_enum(&node->op) != DWELL_OP_SPARSIFY) continue;
            if (node->output < 0 || node->output >= graph->n_tensors) continue;
            if (sparse.empty()) sparse.assign(static_cast<size_t>(graph->n_tensors), false);
            sparse[static_cast<size_t>(node->output)] = true;
        }
    }
    // Tensors some node of the graph writes: their bytes change from call to
    // call, so a matmul must not keep a repacked copy of them.
    std::vector<bool> written;
    if (packed != nullptr && graph != nullptr) {
        written.assign(static_cast<size_t>(std::max(graph->n_tensors, 0)), false);
        for (int32_t n = 0; n < graph->n_nodes; ++n) {
            const dwell_node* node = dwell_graph_node(graph, n);
            if (node == nullptr) continue;
            for_each_written(graph, *node,
                             [&](int32_t id) { written[static_cast<size_t>(id)] = true; });
        }
    }
    for (size_t i = 0; i < n_ids; ++i) {
        const int32_t id = node_ids[i];
        NodeArgs args;
        OpVerdict problem = check_node_impl(graph, id, true, &args);
        args.acts = &acts;
        args.reads = reads;
        args.sparse_acts = &sparse_acts;
        if (!problem && !sparse.empty() && raw_enum(&args.node->op) == DWELL_OP_MATMUL) {
            const int32_t x = args.node->inputs[1];
            args.sparse_input = x >= 0 && x < graph->n_tensors && sparse[static_cast<size_t>(x)];
        }
        if (!problem && !written.empty()) {
            const int32_t w = args.node->inputs[0];
            // A volatile weight's buffer holds another tensor next call.
            const bool leaf = w >= 0 && w < graph->n_tensors && !written[static_cast<size_t>(w)] &&
                              (dwell_graph_tensor_flags(graph, w) & DWELL_TENSOR_VOLATILE) == 0;
            args.packed = leaf ? packed : nullptr;
        }
        if (!problem) {
            try {
                kernel_for(raw_enum(&args.node->op)).run(args, pool);
                for_each_written(graph, *args.node, [&](int32_t written_id) {
                    const dwell_tensor& t = *dwell_graph_tensor(graph, written_id);
                    acts.note_written(t);
                    // Any write over the digested row voids it.
                    const auto* row = static_cast<const unsigned char*>(sparse_acts.data);
                    const auto* begin = static_cast<const unsigned char*>(t.data);
                    if (row != nullptr && row + 4 * sparse_acts.k > begin && row < tensor_end(t))
                        sparse_acts.data = nullptr;
                });
            } catch (const KernelError& e) {
                problem = OpProblem{e.status(), e.what()};
            } catch (const std::bad_alloc&) {
                problem = OpProblem{DWELL_ERR_OUT_OF_MEMORY, "out of memory"};
            } catch (const std::exception& e) {
                problem = OpProblem{DWELL_ERR_INTERNAL, e.what()};
            }
        }
        if (problem) {
            // Built only on failure: this loop runs for every node of every token.
            std::string where = "node " + std::to_string(id);
            if (graph != nullptr && DWELL_HAS_FIELD(graph, dwell_graph, nodes) &&
                graph->nodes != nullptr && id >= 0 && id < graph->n_nodes) {
                where += " (" + op_label(raw_enum(&dwell_graph_node(graph, id)->op)) + ")";
            }
            problem->message = where + ": " + problem->message;
            return problem;
        }
    }
    return std::nullopt;
}

}  // namespace dwell::cpu
