// Places each node of a graph on a backend and runs the graph split by
// split. A node goes to the first selected backend, in manifest order, that
// the manifest allows for it (ops/layers restrictions) and whose
// supports_op accepts it. In strict mode a node the first allowed backend
// declines is an error instead of a fallback.
//
// Thread-safety: const member functions may run concurrently on different
// graphs; each backend context is used by one thread at a time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dwell/core/graph/graph.hpp"

namespace dwell {

class Backend;
class WeightStreamer;

struct Placement {
    struct Split {
        int32_t backend;
        int32_t first_node;
        int32_t end_node;  // one past the last
    };
    std::vector<int32_t> node_backend;  // per node, index into the backends
    std::vector<Split> splits;
    std::vector<std::string> fallbacks;  // one line per op kind that fell back, with why
};

class Scheduler {
public:
    Scheduler(std::vector<Backend*> backends, bool strict);

    Placement place(Graph& graph) const;  // throws when a node can run nowhere
    // Throws naming backend and node. With `weights`, each split runs in
    // segments whose streamed weights it makes resident first. A backend
    // that fails a split does not end the step: its nodes run on the next
    // backend that takes them, with a warning, and the failure goes into
    // the backend's health (backend_health.hpp), which decides when it
    // gets no more nodes. Failures: an error status; a result of another
    // shape (the backend changed a tensor's descriptor); with a step
    // deadline ([[backend]] step_timeout_ms), no result in time, or bytes
    // written outside the step's buffers (isolated_step.hpp).
    void run(Graph& graph, const Placement& placement, WeightStreamer* weights = nullptr) const;
    // A few lines for the log: which layers and ops run where, and why
    // anything fell back.
    std::string describe(const Graph& graph, const Placement& placement) const;

private:
    bool allowed(const Backend& backend, const dwell_node& node) const;
    // Runs nodes `ids` on `backend`; "" on success, else one line saying
    // what went wrong (logged, and noted in the backend's health).
    std::string try_run(const Backend& backend, const Graph& graph, const dwell_graph& cg,
                        std::span<const int32_t> ids) const;
    // Runs nodes [first, end) on backends not in `excluded`, each on the
    // first healthy one that takes it; throws, with `why`, when one can run
    // nowhere else.
    void run_elsewhere(const dwell_graph& cg, const Graph& graph,
                       std::vector<const Backend*> excluded, int32_t first, int32_t end,
                       const std::string& why) const;
    std::vector<Backend*> backends_;
    bool strict_;
};

}  // namespace dwell
