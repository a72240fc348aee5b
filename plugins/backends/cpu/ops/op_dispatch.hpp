// Op -> kernel dispatch, shared by supports_op and graph_compute so that a
// node is accepted exactly when it can run.
//
// Thread-safety: check_node is pure; compute_nodes uses the pool it is
// given (one caller at a time). Ownership: the graph stays the caller's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/kernels.hpp"
#include "ops/packed_weights.hpp"

namespace dwell::cpu {

// Validates graph->nodes[node]: graph and ids well formed, op known and
// implemented, input count, tensor layouts, the op's shape/dtype contract.
// With need_data, also that every tensor has (suitably aligned) data.
// Fills *args when given and the node is fine. Never throws for malformed
// graphs; only std::bad_alloc can escape (from building messages).
OpVerdict check_node(const dwell_graph* graph, int32_t node, bool need_data,
                     NodeArgs* args = nullptr);

// Runs graph->nodes[node_ids[i]] in order. Stops at the first failure and
// returns it with a message naming the node index and op. Matmuls keep
// their repacked weights in `packed` when given (else they repack per call)
// and add what they read of weights to `reads` when given.
OpVerdict compute_nodes(const dwell_graph* graph, const int32_t* node_ids, size_t n_ids,
                        ThreadPool& pool, PackedWeights* packed = nullptr,
                        WeightReadCounts* reads = nullptr);

}  // namespace dwell::cpu
