// Test helpers for the cpu kernels: the shared op-test graph and references
// (hosts/conformance/reference/op_test_graph.hpp) plus running a graph on the kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "dwell/graph.h"
#include "host/thread_pool.hpp"
#include "op_test_graph.hpp"
#include "ops/op_dispatch.hpp"

namespace dwell::cpu::test {

// Every dtype the CPU backend reads weights in.
inline constexpr dwell_dtype kWeightDtypes[] = {
    DWELL_F32,  DWELL_F16,  DWELL_BF16, DWELL_Q8_0, DWELL_Q4_0, DWELL_Q4_1, DWELL_Q5_0,
    DWELL_Q5_1, DWELL_Q4_K, DWELL_Q5_K, DWELL_Q6_K, DWELL_I4_G, DWELL_I6_G, DWELL_I8_C};

using dwell::test::OffsetBuffer;
using dwell::test::random_floats;
using dwell::test::random_weight_rows;
using dwell::test::ref_bf16;
using dwell::test::ref_decode_row;
using dwell::test::ref_half;
using dwell::test::ref_stream_code;
using dwell::test::tensor_2d;

class TestGraph : public dwell::test::OpTestGraph {
public:
    // Runs every node in order with a pool of `threads`.
    OpVerdict run(unsigned threads = 1) {
        ThreadPool pool(threads);
        return run(pool);
    }
    // With a repacked-weight cache, as the plugin runs graphs.
    OpVerdict run(ThreadPool& pool, PackedWeights* packed = nullptr,
                  WeightReadCounts* reads = nullptr) {
        const dwell_graph g = graph();
        std::vector<int32_t> ids(n_nodes());
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
        return compute_nodes(&g, ids.data(), ids.size(), pool, packed, reads);
    }
    // Runs only the given nodes, in the given order.
    OpVerdict run_nodes(const std::vector<int32_t>& ids, unsigned threads = 1) {
        ThreadPool pool(threads);
        const dwell_graph g = graph();
        return compute_nodes(&g, ids.data(), ids.size(), pool);
    }
    OpVerdict check(int node, bool need_data = false) {
        const dwell_graph g = graph();
        return check_node(&g, node, need_data);
    }
};

}  // namespace dwell::cpu::test
