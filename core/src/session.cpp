#include "dwell/core/session.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "dwell/core/activation_plan.hpp"
#include "dwell/core/error.hpp"
#include "dwell/core/format_bytes.hpp"
#include "dwell/core/graph_builder.hpp"
#include "dwell/core/model.hpp"
#include "dwell/core/runtime.hpp"
#include "dwell/core/system_memory.hpp"

namespace dwell {

namespace {

std::vector<Backend*> backend_list(const Runtime& rt) {
    std::vector<Backend*> out;
    for (const auto& b : rt.backends()) out.push_back(b.get());
    return out;
}

// Without --ctx a session gets the model's training context, capped: a
// 128K-context model would otherwise reserve tens of GiB of KV cache.
constexpr int64_t kDefaultMaxContext = 4096;

int32_t context_size(const Model& model, int32_t requested) {
    if (requested < 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "--ctx " + std::to_string(requested) +
                        " is not a context size (use a positive number)");
    }
    const int64_t train = model.info().n_ctx_train > 0 ? model.info().n_ctx_train : 2048;
    if (requested > 0) return requested;
    const int64_t n = std::min(train, kDefaultMaxContext);
    if (n < train) {
        spdlog::info("context: {} tokens (the model was trained for {}; raise with --ctx)", n,
                     train);
    }
    return static_cast<int32_t>(n);
}

// Refuses a KV cache that cannot fit before any page is touched, so an
// absurd context fails with a message instead of an OOM kill later.
void check_kv_fits(const Model& model, int64_t n_ctx, dwell_dtype dtype, const MemoryPool& pool) {
    const auto& info = model.info();
    const uint64_t elem = dwell_dtype_block_bytes(dtype);
    if (info.n_layer <= 0 || info.kv_width <= 0 || elem == 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    model.path().string() + ": the model plugin reports " +
                        std::to_string(info.n_layer) + " layers of KV width " +
                        std::to_string(info.kv_width));
    }
    uint64_t bytes = 0;
    const bool wraps =
        __builtin_mul_overflow(static_cast<uint64_t>(info.kv_width), elem, &bytes) ||
        __builtin_mul_overflow(bytes, static_cast<uint64_t>(n_ctx), &bytes) ||
        __builtin_mul_overflow(bytes, static_cast<uint64_t>(info.n_layer) * 2, &bytes);
    const uint64_t available = pool.budget_bytes() ? pool.budget_bytes() : available_memory_bytes();
    if (wraps || (available && bytes > available)) {
        throw Error(
            DWELL_ERR_OUT_OF_MEMORY,
            "the KV cache for " + std::to_string(n_ctx) + " tokens needs " +
                (wraps ? std::string("more than 2^64 bytes") : format_bytes(bytes)) + " but " +
                format_bytes(available) +
                (pool.budget_bytes() ? " is the memory budget" : " of memory is available") +
                ": use a smaller --ctx or --kv-type f16");
    }
}

KvCache make_kv_cache(Runtime& runtime, const Model& model, int32_t n_ctx,
                      std::optional<dwell_dtype> requested) {
    const dwell_dtype dtype = requested.value_or(runtime.manifest().kv.dtype);
    if (dtype != DWELL_F16 && dtype != DWELL_F32) {
        throw Error(DWELL_ERR_UNSUPPORTED,
                    std::string("KV-cache type ") + dwell_dtype_name(dtype) + " (from " +
                        (requested ? std::string("--kv-type")
                                   : "[kv] dtype in " + runtime.manifest().source.string()) +
                        ") is not supported yet: use f16 or f32");
    }
    check_kv_fits(model, n_ctx, dtype, runtime.pool());
    return KvCache(runtime.pool(), model.info().n_layer, model.info().kv_width, n_ctx, dtype);
}

}  // namespace

Session::Session(Runtime& runtime, std::shared_ptr<const Model> model,
                 const SessionOptions& options)
    : runtime_(runtime),
      model_(std::move(model)),
      n_ctx_(context_size(*model_, options.n_ctx)),
      n_batch_(std::max(1, options.n_batch)),
      kv_(make_kv_cache(runtime, *model_, n_ctx_, options.kv_dtype)),
      scheduler_(backend_list(runtime), runtime.strict()) {}

std::span<const float> Session::decode(std::span<const int32_t> tokens, bool all_logits) {
    if (tokens.empty()) throw Error(DWELL_ERR_INVALID_ARGUMENT, "decode: no tokens given");
    const int32_t n_vocab = static_cast<int32_t>(model_->info().n_vocab);
    for (int32_t t : tokens) {
        if (t < 0 || t >= n_vocab) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT, "token id " + std::to_string(t) +
                                                        " is outside the vocabulary (0.." +
                                                        std::to_string(n_vocab - 1) + ")");
        }
    }
    if (static_cast<int64_t>(n_past_) + static_cast<int64_t>(tokens.size()) > n_ctx_) {
        throw Error(DWELL_ERR_OUT_OF_MEMORY, "context full: " + std::to_string(n_past_) + " + " +
                                                 std::to_string(tokens.size()) +
                                                 " tokens exceed the context of " +
                                                 std::to_string(n_ctx_) + " (raise --ctx)");
    }
    std::vector<float> all;
    const int32_t saved_past = n_past_;
    try {
        for (size_t start = 0; start < tokens.size(); start += static_cast<size_t>(n_batch_)) {
            const size_t n = std::min(tokens.size() - start, static_cast<size_t>(n_batch_));
            const bool last = start + n == tokens.size();
            run_batch(tokens.subspan(start, n), all_logits);
            if (all_logits) all.insert(all.end(), logits_.begin(), logits_.end());
            (void)last;
        }
    } catch (...) {
        // Cache rows past n_past are never read, so rewinding the position undoes the step.
        n_past_ = saved_past;
        throw;
    }
    if (all_logits) {
        logits_ = std::move(all);
        return logits_;
    }
    return std::span<const float>(logits_).last(static_cast<size_t>(n_vocab));
}

void Session::run_batch(std::span<const int32_t> tokens, bool all_logits) {
    const int32_t n_tokens = static_cast<int32_t>(tokens.size());
    const int32_t n_out = all_logits ? n_tokens : 1;

    Graph graph;
    GraphBuilder builder(
        graph, [this](std::string_view name) { return model_->weight(name); },
        [this](int32_t layer, int32_t which) { return kv_.tensor(layer, which); });
    dwell_batch batch{sizeof(dwell_batch), n_tokens, n_out};
    model_->build_graph(builder, batch);
    if (graph.output < 0)
        throw Error(DWELL_ERR_INTERNAL, "the model plugin built a graph without an output");

    // Host-filled inputs.
    std::vector<int32_t> positions(n_tokens), out_rows(n_out);
    for (int32_t i = 0; i < n_tokens; ++i) positions[i] = n_past_ + i;
    for (int32_t i = 0; i < n_out; ++i) out_rows[i] = n_tokens - n_out + i;
    std::vector<int32_t> token_copy(tokens.begin(), tokens.end());
    for (auto& slot : graph.slots) {
        if (slot.role != TensorRole::Input) continue;
        const std::string name = slot.tensor.name ? slot.tensor.name : "";
        std::vector<int32_t>* src = name == "tokens"      ? &token_copy
                                    : name == "positions" ? &positions
                                    : name == "out_rows"  ? &out_rows
                                                          : nullptr;
        if (!src || slot.tensor.dtype != DWELL_I32 ||
            dwell_tensor_nelements(&slot.tensor) != static_cast<int64_t>(src->size())) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        "the model plugin declared input '" + name +
                            "' that the host does not provide with that shape");
        }
        slot.tensor.data = src->data();
    }

    const bool first = placement_summary_.empty();
    Placement placement = scheduler_.place(graph);
    if (first) {
        placement_summary_ = scheduler_.describe(graph, placement);
        spdlog::info("placement:\n{}", placement_summary_);
    }

    const ActivationPlan plan = plan_activations(graph);
    if (arena_.size() < plan.arena_bytes) {
        arena_ = PoolBuffer();  // release first so the budget sees only the new size
        arena_ = runtime_.pool().allocate(
            plan.arena_bytes, "activations for a batch of " + std::to_string(n_tokens) + " tokens");
    }
    auto* base = static_cast<uint8_t*>(arena_.data());
    for (size_t i = 0; i < graph.slots.size(); ++i) {
        if (plan.offset[i] != ActivationPlan::kNone)
            graph.slots[i].tensor.data = base + plan.offset[i];
    }
    for (auto& slot : graph.slots) {
        if (slot.role == TensorRole::View) slot.tensor.data = graph.slots[slot.view_of].tensor.data;
    }

    scheduler_.run(graph, placement);

    const dwell_tensor& out = graph.slots[graph.output].tensor;
    const int64_t n_vocab = model_->info().n_vocab;
    if (out.ne[0] != n_vocab || out.ne[1] != n_out) {
        throw Error(DWELL_ERR_INTERNAL,
                    "the model's output has shape [" + std::to_string(out.ne[0]) + ", " +
                        std::to_string(out.ne[1]) + "], expected [n_vocab, rows]");
    }
    const auto* src =
        static_cast<const float*>(graph.slots[graph.storage_of(graph.output)].tensor.data);
    logits_.assign(src, src + n_vocab * n_out);
    n_past_ += n_tokens;
}

}  // namespace dwell
