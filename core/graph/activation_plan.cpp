#include "dwell/core/graph/activation_plan.hpp"

#include <algorithm>
#include <map>

namespace dwell {

namespace {

uint64_t tensor_bytes(const dwell_tensor& t) {
    return t.nb[3] * static_cast<uint64_t>(t.ne[3]);
}

// Free space in the arena as offset -> size, merged on release.
class FreeList {
public:
    uint64_t take(uint64_t size) {
        // Best fit keeps big holes for big tensors.
        auto best = free_.end();
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
        }
        if (best == free_.end()) {
            uint64_t off = end_;
            end_ += size;
            return off;
        }
        const uint64_t off = best->first;
        const uint64_t rest = best->second - size;
        free_.erase(best);
        if (rest) free_[off + size] = rest;
        return off;
    }
    void give(uint64_t off, uint64_t size) {
        auto it = free_.emplace(off, size).first;
        if (auto next = std::next(it);
            next != free_.end() && it->first + it->second == next->first) {
            it->second += next->second;
            free_.erase(next);
        }
        if (it != free_.begin()) {
            auto prev = std::prev(it);
            if (prev->first + prev->second == it->first) {
                prev->second += it->second;
                free_.erase(it);
            }
        }
    }
    uint64_t end() const { return end_; }

private:
    std::map<uint64_t, uint64_t> free_;
    uint64_t end_ = 0;
};

}  // namespace

ActivationPlan plan_activations(const Graph& graph, uint64_t alignment) {
    const size_t n_tensors = graph.slots.size();
    const int32_t n_nodes = static_cast<int32_t>(graph.nodes.size());
    std::vector<int32_t> last_use(n_tensors, -1);
    for (int32_t i = 0; i < n_nodes; ++i) {
        const dwell_node& node = graph.nodes[i];
        for (int j = 0; j < node.n_inputs; ++j) {
            const int32_t in = node.inputs[j];
            if (in >= 0) last_use[graph.storage_of(in)] = i;
        }
    }
    if (graph.output >= 0)
        last_use[graph.storage_of(graph.output)] = n_nodes;  // read after the run
    for (const int32_t t : graph.kept) {
        if (t >= 0 && static_cast<size_t>(t) < n_tensors) last_use[graph.storage_of(t)] = n_nodes;
    }

    ActivationPlan plan;
    plan.offset.assign(n_tensors, ActivationPlan::kNone);
    FreeList arena;
    std::vector<std::vector<int32_t>> dies_after(n_nodes + 1);
    for (int32_t i = 0; i < n_nodes; ++i) {
        const int32_t out = graph.nodes[i].output;
        if (graph.slots[out].role != TensorRole::Activation) continue;
        const uint64_t size =
            (tensor_bytes(graph.slots[out].tensor) + alignment - 1) / alignment * alignment;
        plan.offset[out] = arena.take(size);
        // A result nobody reads is freed right after it is written.
        dies_after[std::max(last_use[out], i)].push_back(out);
        for (int32_t dead : dies_after[i]) {
            const uint64_t dsize =
                (tensor_bytes(graph.slots[dead].tensor) + alignment - 1) / alignment * alignment;
            arena.give(plan.offset[dead], dsize);
        }
    }
    plan.arena_bytes = arena.end();
    return plan;
}

}  // namespace dwell
