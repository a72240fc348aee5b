#include "dwell/core/scheduler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "dwell/core/error.hpp"
#include "dwell/core/runtime.hpp"
#include "dwell/core/weight_streamer.hpp"

namespace dwell {

namespace {

std::string node_str(const dwell_node& n, int32_t index) {
    std::string s = "node " + std::to_string(index) + " (" + dwell_op_name(n.op);
    if (n.layer >= 0) s += ", layer " + std::to_string(n.layer);
    return s + ")";
}

std::string layer_range(const std::set<int32_t>& layers) {
    std::string s;
    for (auto it = layers.lower_bound(0); it != layers.end();) {
        const int32_t first = *it;
        int32_t last = first;
        while (++it != layers.end() && *it == last + 1) ++last;
        // Appends, not operator+ chains: GCC 12 warns falsely (-Wrestrict) on those.
        s.append(s.empty() ? "layers " : ", ").append(std::to_string(first));
        if (last > first) s.append("-").append(std::to_string(last));
    }
    // Nodes outside any layer: the embedding lookup and the output head.
    if (layers.count(-1)) s += s.empty() ? "embedding/output" : " + embedding/output";
    return s;
}

}  // namespace

Scheduler::Scheduler(std::vector<Backend*> backends, bool strict)
    : backends_(std::move(backends)), strict_(strict) {}

bool Scheduler::allowed(const Backend& backend, const dwell_node& node) const {
    const auto& e = backend.entry();
    if (!e.ops.empty() &&
        std::find(e.ops.begin(), e.ops.end(), dwell_op_name(node.op)) == e.ops.end())
        return false;
    if (!e.layers.empty() &&
        std::find(e.layers.begin(), e.layers.end(), node.layer) == e.layers.end())
        return false;
    return true;
}

Placement Scheduler::place(Graph& graph) const {
    const dwell_graph& cg = graph.c_graph();
    Placement p;
    p.node_backend.resize(graph.nodes.size(), -1);
    std::map<std::string, std::string> fallback_reasons;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
        const dwell_node& node = graph.nodes[i];
        std::string declined;
        // A backend paused by the thermal governor is a preference, not a
        // ban: it still runs a node no other backend takes.
        int32_t paused_fallback = -1;
        for (size_t b = 0; b < backends_.size(); ++b) {
            const Backend& be = *backends_[b];
            if (!allowed(be, node)) continue;
            if (!be.healthy()) {
                declined += (declined.empty() ? "" : ", ") + be.label() + ": unhealthy after " +
                            std::to_string(Backend::kMaxConsecutiveFailures) + " failed steps";
                continue;
            }
            if (be.thermally_paused()) {
                if (paused_fallback < 0) paused_fallback = static_cast<int32_t>(b);
                declined += (declined.empty() ? "" : ", ") + be.label() + ": paused while hot";
                continue;
            }
            std::string reason;
            {
                std::lock_guard lock(be.mutex());
                if (be.api().supports_op(be.context(), &cg, static_cast<int32_t>(i))) {
                    p.node_backend[i] = static_cast<int32_t>(b);
                    break;
                }
                reason = be.last_error();
            }
            if (strict_) {
                throw Error(
                    DWELL_ERR_UNSUPPORTED,
                    "strict placement: " + node_str(node, static_cast<int32_t>(i)) +
                        " is not supported by " + be.label() +
                        (reason.empty() || reason == "no message" ? "" : " (" + reason + ")") +
                        " and strict mode forbids falling back");
            }
            declined += (declined.empty() ? "" : ", ") + be.label() +
                        (reason.empty() || reason == "no message" ? "" : ": " + reason);
        }
        if (p.node_backend[i] < 0 && paused_fallback >= 0) {
            const Backend& be = *backends_[static_cast<size_t>(paused_fallback)];
            std::lock_guard lock(be.mutex());
            if (be.api().supports_op(be.context(), &cg, static_cast<int32_t>(i)))
                p.node_backend[i] = paused_fallback;
        }
        if (p.node_backend[i] < 0) {
            throw Error(DWELL_ERR_UNSUPPORTED,
                        node_str(node, static_cast<int32_t>(i)) +
                            " can run on no selected backend (declined by: " +
                            (declined.empty() ? "none allowed by the manifest" : declined) + ")");
        }
        if (!declined.empty()) {
            fallback_reasons[std::string(dwell_op_name(node.op)) + " -> " +
                             backends_[p.node_backend[i]]->label()] = "declined by " + declined;
        }
        if (p.splits.empty() || p.splits.back().backend != p.node_backend[i]) {
            p.splits.push_back(
                {p.node_backend[i], static_cast<int32_t>(i), static_cast<int32_t>(i) + 1});
        } else {
            p.splits.back().end_node = static_cast<int32_t>(i) + 1;
        }
    }
    for (const auto& [what, why] : fallback_reasons) p.fallbacks.push_back(what + " (" + why + ")");
    return p;
}

void Scheduler::run(Graph& graph, const Placement& placement, WeightStreamer* weights) const {
    const dwell_graph& cg = graph.c_graph();
    std::vector<int32_t> ids;
    for (const auto& split : placement.splits) {
        const Backend& be = *backends_[split.backend];
        const auto compute = [&](int32_t first, int32_t end) {
            ids.clear();
            for (int32_t n = first; n < end; ++n) ids.push_back(n);
            std::string why;
            {
                std::unique_lock lock(be.mutex());
                const dwell_status st =
                    be.api().graph_compute(be.context(), &cg, ids.data(), ids.size());
                if (st == DWELL_OK) {
                    be.note_success();
                    return;
                }
                why = std::string(dwell_status_name(st)) + ": " + be.last_error();
            }
            be.note_failure();
            run_elsewhere(cg, graph, be, first, end, why);
        };
        if (weights != nullptr) {
            weights->run(graph, cg, split.first_node, split.end_node, compute);
        } else {
            compute(split.first_node, split.end_node);
        }
    }
}

void Scheduler::run_elsewhere(const dwell_graph& cg, const Graph& graph, const Backend& failed,
                              int32_t first, int32_t end, const std::string& why) const {
    const std::string what = failed.label() + " failed on nodes " + std::to_string(first) + "-" +
                             std::to_string(end - 1) + " (" + why + ")";
    spdlog::warn(
        "{}: running them on the next backend{}", what,
        failed.healthy() ? "" : "; " + failed.label() + " is now unhealthy and gets no more nodes");
    std::vector<int32_t> ids;
    for (int32_t n = first; n < end;) {
        const Backend* target = nullptr;
        for (const Backend* b : backends_) {
            if (b == &failed || !allowed(*b, graph.nodes[static_cast<size_t>(n)])) continue;
            std::lock_guard lock(b->mutex());
            if (b->api().supports_op(b->context(), &cg, n)) {
                target = b;
                break;
            }
        }
        if (target == nullptr) {
            throw Error(DWELL_ERR_UNAVAILABLE,
                        what + ", and " + node_str(graph.nodes[static_cast<size_t>(n)], n) +
                            " can run on no other backend");
        }
        ids.assign(1, n);
        // Consecutive nodes the same backend takes go together.
        while (ids.back() + 1 < end) {
            const int32_t next = ids.back() + 1;
            if (!allowed(*target, graph.nodes[static_cast<size_t>(next)])) break;
            std::lock_guard lock(target->mutex());
            if (!target->api().supports_op(target->context(), &cg, next)) break;
            ids.push_back(next);
        }
        std::lock_guard lock(target->mutex());
        const dwell_status st =
            target->api().graph_compute(target->context(), &cg, ids.data(), ids.size());
        if (st != DWELL_OK) {
            throw Error(st, what + ", and " + target->label() +
                                " failed on them too: " + target->last_error());
        }
        n = ids.back() + 1;
    }
}

std::string Scheduler::describe(const Graph& graph, const Placement& placement) const {
    std::string out;
    for (size_t b = 0; b < backends_.size(); ++b) {
        std::set<int32_t> layers;
        std::map<std::string, int> ops;
        size_t n = 0;
        for (size_t i = 0; i < graph.nodes.size(); ++i) {
            if (placement.node_backend[i] != static_cast<int32_t>(b)) continue;
            layers.insert(graph.nodes[i].layer);
            ++ops[dwell_op_name(graph.nodes[i].op)];
            ++n;
        }
        if (n == 0) {
            out += backends_[b]->label() + ": no nodes\n";
            continue;
        }
        std::string op_list;
        for (const auto& [name, count] : ops)
            op_list += (op_list.empty() ? "" : " ") + name + "x" + std::to_string(count);
        out += backends_[b]->label() + ": " + std::to_string(n) + " nodes, " + layer_range(layers) +
               " [" + op_list + "]\n";
    }
    out += std::to_string(placement.splits.size()) + " split(s)";
    for (const auto& f : placement.fallbacks) out += "\nfallback: " + f;
    return out;
}

}  // namespace dwell
