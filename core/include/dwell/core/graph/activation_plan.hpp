// Where each intermediate result of a graph lives inside one arena: tensors
// whose lifetimes do not overlap share memory, so a step needs the peak of
// live activations rather than their sum.
#pragma once

#include <cstdint>
#include <vector>

#include "dwell/core/graph/graph.hpp"

namespace dwell {

struct ActivationPlan {
    static constexpr uint64_t kNone = ~uint64_t{0};
    std::vector<uint64_t> offset;  // per tensor; kNone for non-activations
    uint64_t arena_bytes = 0;
};

ActivationPlan plan_activations(const Graph& graph, uint64_t alignment = 64);

}  // namespace dwell
