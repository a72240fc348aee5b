// The conformance cases: every IR op the graph contract (sdk/graph.h)
// defines, over each weight / cache dtype and a few representative shapes,
// each a one-node graph with its expected output computed in double
// precision from the contract, independently of any backend.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "op_test_graph.hpp"

namespace dwell::conformance {

using test::OpTestGraph;

struct Case {
    std::string name;
    // Fills g (one node, the last); returns the reference values of the
    // node's output, row-major.
    std::function<std::vector<double>(OpTestGraph& g)> build;
    // |got - want| <= tol * max(1, max |want|).
    double tol;
    // How to read the output: F32 values, I32 values, or rows of its dtype
    // decoded (CPY to a quantized type).
    enum class Out { F32, I32, Decoded } out = Out::F32;
    // Times the node runs in a row on the same tensors (SHORT_CONV: the
    // second call starts from the state the first one wrote).
    int calls = 1;
    // An input the node writes in place (SHORT_CONV's state, 2), or -1:
    // read back as F32 after the output, its reference after the output's
    // in what build returns.
    int written_input = -1;
};

// Every case, in a fixed order (names are unique).
std::vector<Case> all_cases();

// Rows of tensor id decoded to double by the contract (any dtype).
std::vector<double> decode_rows(OpTestGraph& g, int id);

}  // namespace dwell::conformance
