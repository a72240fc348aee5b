#include "dwell/core/scheduler/scheduler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "dwell/core/backend/isolated_step.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/base/tensor_shape.hpp"
#include "dwell/core/model/weight_streamer.hpp"
#include "dwell/core/runtime/runtime.hpp"

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

namespace {

bool reads_volatile_weight(const dwell_graph& g, const dwell_node& node) {
    for (int32_t k = 0; k < node.n_inputs; ++k) {
        if (dwell_graph_tensor_flags(&g, node.inputs[k]) & DWELL_TENSOR_VOLATILE) return true;
    }
    return false;
}

// Before ABI 1.4 an FP8_E4M3 key cache held plain codes (graph.h).
bool attends_over_fp8_keys(const dwell_graph& g, const dwell_node& node) {
    if (node.op != DWELL_OP_ATTENTION || node.n_inputs < 4) return false;
    const dwell_tensor* cache = dwell_graph_tensor(&g, node.inputs[3]);
    return cache != nullptr && cache->dtype == DWELL_FP8_E4M3;
}

// Before ABI 1.5 ATTENTION had no window or soft-cap and SOFTCAP did not
// exist (graph.h): an older backend would attend over every row, uncapped.
bool uses_abi15_attention(const dwell_node& node) {
    if (node.op == DWELL_OP_SOFTCAP) return true;
    return node.op == DWELL_OP_ATTENTION && (node.iparams[0] != 0 || node.fparams[1] != 0.0f);
}

// ABI 1.5 added ROPE's frequency factors (in2) and attention factor
// (fparams[2]; 0 and 1 mean none).
bool ropes_with_factors(const dwell_node& node) {
    if (node.op != DWELL_OP_ROPE) return false;
    const float attn_factor = node.fparams[2];
    return node.n_inputs > 2 || (attn_factor != 0.0f && attn_factor != 1.0f);
}

// ABI 1.6 added SHORT_CONV and the recurrent state it writes in place
// (graph.h): an older backend knows neither the op nor that an input is
// written.
bool uses_recurrent_state(const dwell_node& node) {
    return node.op == DWELL_OP_SHORT_CONV;
}

// ABI 1.7 added the ops of gated delta-net layers (graph.h).
bool uses_delta_net_ops(const dwell_node& node) {
    return node.op == DWELL_OP_SIGMOID || node.op == DWELL_OP_SOFTPLUS ||
           node.op == DWELL_OP_SLICE || node.op == DWELL_OP_GATED_DELTA_NET;
}

// Why a backend must not get a node its ABI minor predates, or "".
std::string abi_too_old_for(const dwell_graph& g, const dwell_node& node, const Backend& be) {
    const uint32_t minor = be.plugin().info().abi_minor;
    const char* what = nullptr;
    const char* since = nullptr;
    if (minor < 2 && reads_volatile_weight(g, node)) {
        what = "streamed weights";
        since = "1.2";
    } else if (minor < 4 && attends_over_fp8_keys(g, node)) {
        what = "the FP8 key encoding";
        since = "1.4";
    } else if (minor < 5 && uses_abi15_attention(node)) {
        what = "sliding-window and soft-capped attention";
        since = "1.5";
    } else if (minor < 5 && ropes_with_factors(node)) {
        what = "RoPE frequency factors";
        since = "1.5";
    } else if (minor < 6 && uses_recurrent_state(node)) {
        what = "short convolutions and their recurrent state";
        since = "1.6";
    } else if (minor < 7 && uses_delta_net_ops(node)) {
        what = "the gated delta-net ops (sigmoid, softplus, slice, gated_delta_net)";
        since = "1.7";
    }
    if (what == nullptr) return "";
    return be.label() + ": built against dwell ABI " + be.plugin().abi_version() +
           ", which predates " + what + " (rebuild it against " + since + " or later)";
}

}  // namespace

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
                declined += (declined.empty() ? "" : ", ") + be.label() + ": " +
                            be.health().unhealthy_reason();
                continue;
            }
            // Before ABI 1.2 a backend cannot tell a streamed weight, whose
            // memory changes between steps, from one it may cache; before 1.4
            // it reads FP8 key caches as plain codes.
            if (const std::string old = abi_too_old_for(cg, node, be); !old.empty()) {
                declined += (declined.empty() ? "" : ", ") + old;
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
    for (const auto& split : placement.splits) {
        const Backend& be = *backends_[split.backend];
        const auto compute = [&](int32_t first, int32_t end) {
            std::vector<int32_t> ids;
            for (int32_t n = first; n < end; ++n) ids.push_back(n);
            if (const std::string failure = try_run(be, graph, cg, ids); !failure.empty())
                run_elsewhere(cg, graph, {&be}, first, end, failure);
        };
        if (weights != nullptr) {
            weights->run(graph, cg, split.first_node, split.end_node, compute);
        } else {
            compute(split.first_node, split.end_node);
        }
    }
}

std::string Scheduler::try_run(const Backend& be, const Graph& graph, const dwell_graph& cg,
                               std::span<const int32_t> ids) const {
    const std::string nodes =
        "nodes " + std::to_string(ids.front()) + "-" + std::to_string(ids.back());
    if (!be.healthy()) {
        std::string line =
            be.label() + " skipped " + nodes + " (" + be.health().unhealthy_reason() + ")";
        spdlog::debug("{}: running them on the next backend", line);
        return line;
    }
    const auto fail = [&](BackendFault fault, const std::string& why) {
        std::string line = be.label() + " failed on " + nodes + " (" + why + ")";
        if (be.health().step_failed(fault, line)) {
            spdlog::warn(
                "{}: running them on the next backend; {} is now {} and gets no more nodes", line,
                be.label(), be.health().unhealthy_reason());
        } else {
            spdlog::warn("{}: running them on the next backend", line);
        }
        return line;
    };
    if (StepWorker* worker = be.step_worker()) {
        const auto step = std::make_shared<IsolatedStep>(graph, cg, ids);
        const int32_t timeout = be.entry().step_timeout_ms;
        const StepWorker::Result r = worker->run(step, std::chrono::milliseconds(timeout));
        switch (r.outcome) {
            case StepWorker::Outcome::TimedOut:
                return fail(BackendFault::Timeout, "no result within its step_timeout_ms of " +
                                                       std::to_string(timeout) +
                                                       " ms; the step was abandoned");
            case StepWorker::Outcome::Busy: {
                std::string line = be.label() + " skipped " + nodes +
                                   " (still running a step abandoned past its deadline)";
                spdlog::debug("{}: running them on the next backend", line);
                return line;
            }
            case StepWorker::Outcome::Done:
                break;
        }
        if (r.status != DWELL_OK)
            return fail(BackendFault::ErrorStatus,
                        std::string(dwell_status_name(r.status)) + ": " + r.error);
        if (const std::string bad = step->verify(); !bad.empty())
            return fail(BackendFault::WrongSize, "wrong-size result: " + bad);
        step->copy_back(cg);
        be.health().step_succeeded();
        return {};
    }
    // The descriptors the nodes use, to see that the backend kept them.
    std::vector<std::pair<int32_t, dwell_tensor>> given;
    for (const int32_t id : ids) {
        const dwell_node& n = graph.nodes[static_cast<size_t>(id)];
        given.emplace_back(n.output, *dwell_graph_tensor(&cg, n.output));
        for (int32_t k = 0; k < n.n_inputs; ++k)
            given.emplace_back(n.inputs[k], *dwell_graph_tensor(&cg, n.inputs[k]));
    }
    // SHORT_CONV and GATED_DELTA_NET advance their state in place, so
    // unlike a KV row written twice, a rerun elsewhere after a failure
    // would advance it twice: the states are put back as they were before
    // the failed try.
    std::vector<std::pair<dwell_tensor*, std::vector<std::byte>>> states;
    for (const int32_t id : ids) {
        const int32_t sid = dwell_node_state_tensor(&graph.nodes[static_cast<size_t>(id)]);
        if (sid < 0) continue;
        dwell_tensor* st = dwell_graph_tensor(&cg, sid);
        const auto* bytes = static_cast<const std::byte*>(st->data);
        states.emplace_back(
            st, std::vector<std::byte>(bytes, bytes + dwell_tensor_nelements(st) * sizeof(float)));
    }
    const auto restore_states = [&] {
        for (auto& [st, bytes] : states) std::memcpy(st->data, bytes.data(), bytes.size());
    };
    dwell_status status = DWELL_OK;
    std::string error;
    {
        std::lock_guard lock(be.mutex());
        status = be.api().graph_compute(be.context(), &cg, ids.data(), ids.size());
        if (status != DWELL_OK) error = be.last_error();
    }
    std::string changed;
    // Restored whatever the verdict: the nodes that follow read them.
    for (const auto& [t, was] : given) {
        dwell_tensor& now = *dwell_graph_tensor(&cg, t);
        if (std::memcmp(&now, &was, sizeof was) == 0) continue;
        if (changed.empty())
            changed = "tensor " + std::to_string(t) + " came back as " + shape_str(now) +
                      ", the graph's is " + shape_str(was);
        now = was;
    }
    if (status != DWELL_OK || !changed.empty()) restore_states();
    if (status != DWELL_OK)
        return fail(BackendFault::ErrorStatus,
                    std::string(dwell_status_name(status)) + ": " + error);
    if (!changed.empty()) return fail(BackendFault::WrongSize, "wrong-size result: " + changed);
    be.health().step_succeeded();
    return {};
}

void Scheduler::run_elsewhere(const dwell_graph& cg, const Graph& graph,
                              std::vector<const Backend*> excluded, int32_t first, int32_t end,
                              const std::string& why) const {
    std::vector<int32_t> ids;
    for (int32_t n = first; n < end;) {
        const Backend* target = nullptr;
        for (const Backend* b : backends_) {
            if (std::find(excluded.begin(), excluded.end(), b) != excluded.end() || !b->healthy() ||
                !allowed(*b, graph.nodes[static_cast<size_t>(n)]))
                continue;
            std::lock_guard lock(b->mutex());
            if (b->api().supports_op(b->context(), &cg, n)) {
                target = b;
                break;
            }
        }
        if (target == nullptr) {
            throw Error(DWELL_ERR_UNAVAILABLE,
                        why + ", and " + node_str(graph.nodes[static_cast<size_t>(n)], n) +
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
        if (const std::string failure = try_run(*target, graph, cg, ids); !failure.empty()) {
            excluded.push_back(target);
            run_elsewhere(cg, graph, excluded, ids.front(), ids.back() + 1, why + "; " + failure);
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
