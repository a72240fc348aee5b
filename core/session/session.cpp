#include "dwell/core/session/session.hpp"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/graph/activation_plan.hpp"
#include "dwell/core/graph/graph_builder.hpp"
#include "dwell/core/kv/kv_prefix_cache.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session_file.hpp"

namespace dwell {

namespace {

std::vector<Backend*> backend_list(const Runtime& rt) {
    std::vector<Backend*> out;
    for (const auto& b : rt.backends()) out.push_back(b.get());
    return out;
}

// The runtime's backends with the one named `name` first.
std::vector<Backend*> backends_preferring(const Runtime& rt, const std::string& name) {
    std::vector<Backend*> out = backend_list(rt);
    const auto it = std::find_if(out.begin(), out.end(), [&](const Backend* b) {
        return b->label() == name || b->plugin().name() == name;
    });
    if (it == out.end()) {
        std::string selected;
        for (const Backend* b : out) selected += (selected.empty() ? "" : ", ") + b->label();
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "backend '" + name + "' is not selected in this runtime (selected: " +
                        selected + "); add it to the manifest");
    }
    std::rotate(out.begin(), it, it + 1);
    return out;
}

// Without --ctx a session gets the model's training context, capped: a
// 128K-context model would otherwise reserve tens of GiB of KV cache.
constexpr int64_t kDefaultMaxContext = 4096;

// Refuses a KV cache that cannot fit before any page is touched, so an
// absurd context fails with a message instead of an OOM kill later. What is
// left counts the weights already in memory: under a budget the bytes they
// are charged; without one, the mapped weights, which the system reports as
// reclaimable page cache although the model needs them.
void check_kv_fits(const Runtime& runtime, const Model& model, int64_t n_ctx, dwell_dtype dtype) {
    const auto& info = model.info();
    if (info.n_layer <= 0 || info.kv_width <= 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    model.path().string() + ": the model plugin reports " +
                        std::to_string(info.n_layer) + " layers of KV width " +
                        std::to_string(info.kv_width));
    }
    const uint64_t row = dwell_row_bytes(dtype, info.kv_width);
    uint64_t bytes = 0;
    const bool wraps =
        __builtin_mul_overflow(row, static_cast<uint64_t>(n_ctx), &bytes) ||
        __builtin_mul_overflow(bytes, static_cast<uint64_t>(info.n_layer) * 2, &bytes);
    const MemoryPool& pool = runtime.pool();
    const uint64_t budget = pool.budget_bytes();
    uint64_t weights = 0, total = 0;
    if (budget) {
        weights = pool.stats().used_by[static_cast<int>(MemoryUse::Weights)];
        total = budget;
    } else {
        weights = model.mapped_weight_bytes();
        total = runtime.available_memory();
        if (total == 0 && !wraps) return;  // unknown: the pool and the OS refuse later
    }
    const uint64_t left = total > weights ? total - weights : 0;
    if (wraps || bytes > left) {
        throw Error(DWELL_ERR_OUT_OF_MEMORY,
                    "the KV cache for " + std::to_string(n_ctx) + " tokens needs " +
                        (wraps ? std::string("more than 2^64 bytes") : format_bytes(bytes)) +
                        " but " + format_bytes(left) + " is left " +
                        (budget ? "of the " + format_bytes(budget) + " memory budget"
                                : std::string("of the memory available")) +
                        " after " + format_bytes(weights) + " of weights" +
                        ": use a smaller --ctx or --kv-type q8_0" +
                        (budget ? ", or raise --memory-budget" : ""));
    }
}

// All layers' states at once (recurrent_state.hpp says why), charged to
// the budget as KV memory.
RecurrentState make_state(Runtime& runtime, const Model& model) {
    const auto& info = model.info();
    return RecurrentState(runtime.pool(), info.n_layer, {info.state_elems[0], info.state_elems[1]});
}

KvCache make_kv_cache(Runtime& runtime, const Model& model, int32_t n_ctx,
                      std::optional<dwell_dtype> requested) {
    const dwell_dtype dtype = requested.value_or(runtime.manifest().kv.dtype);
    check_kv_fits(runtime, model, n_ctx, dtype);
    try {
        return KvCache(runtime.kv_pages(), model.info().n_layer, model.info().kv_width, n_ctx,
                       dtype);
    } catch (const Error& e) {
        throw Error(e.status(),
                    std::string(e.what()) + " (from " +
                        (requested ? std::string("--kv-type")
                                   : "[kv] dtype in " + runtime.manifest().source.string()) +
                        ")");
    }
}

}  // namespace

int32_t session_context_size(const dwell_model_info& info, int32_t requested) {
    if (requested < 0 || requested > kSessionMaxContext) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "--ctx " + std::to_string(requested) + " is not a context size (use 1.." +
                        std::to_string(kSessionMaxContext) + ", or 0 for the model's)");
    }
    const int64_t train = info.n_ctx_train > 0 ? info.n_ctx_train : 2048;
    if (requested > 0) {
        if (requested > train) {
            spdlog::warn(
                "context: {} tokens, more than the {} the model was trained for; "
                "text past {} tokens may degrade",
                requested, train, train);
        }
        return requested;
    }
    const int64_t n = std::min(train, kDefaultMaxContext);
    if (n < train) {
        spdlog::info("context: {} tokens (the model was trained for {}; raise with --ctx)", n,
                     train);
    }
    return static_cast<int32_t>(n);
}

Session::Session(Runtime& runtime, std::shared_ptr<const Model> model,
                 const SessionOptions& options)
    : runtime_(runtime),
      model_(std::move(model)),
      n_ctx_(session_context_size(model_->info(), options.n_ctx)),
      n_batch_(std::max(1, options.n_batch)),
      on_full_(options.on_full),
      n_keep_(std::clamp(options.n_keep, 0, n_ctx_)),
      kv_(make_kv_cache(runtime, *model_, n_ctx_, options.kv_dtype)),
      state_(make_state(runtime, *model_)),
      scheduler_(backend_list(runtime), runtime.strict()),
      prefix_root_(KvPrefixCache::root_key(model_->id(), kv_.dtype(), kv_.rows_per_page())),
      prefix_cache_(options.prefix_cache) {
    if (options.prefix_scope != 0) {
        // The scope goes into the root key, and so into every key after it.
        const int32_t scope[2] = {static_cast<int32_t>(options.prefix_scope >> 32),
                                  static_cast<int32_t>(options.prefix_scope & 0xffffffffu)};
        prefix_root_ = KvPrefixCache::child_key(prefix_root_, scope);
    }
    if (!state_.empty()) use_kv_only_where_attended();
    sparsity_fraction_ = options.sparsity_fraction.value_or(runtime.manifest().sparsity.fraction);
    thresholds_ = options.sparsity_thresholds;
    if (!thresholds_ && !options.sparsity_fraction && runtime.sparsity_thresholds()) {
        // The runtime outlives its sessions: borrowed, not owned.
        thresholds_ = std::shared_ptr<const SparsityThresholds>(std::shared_ptr<void>(),
                                                                runtime.sparsity_thresholds());
    }
    recorder_ = options.sparsity_recorder;
    if (thresholds_) check_sparsity_thresholds();
}

std::vector<std::string> Session::sparsity_input_keys() const {
    Graph graph;
    build_step_graph(graph, 1, 1, /*record=*/true);
    std::vector<std::string> keys;
    for (const auto& [tensor, key] : graph.sparsity_inputs) keys.push_back(key);
    return keys;
}

void Session::check_sparsity_thresholds() const {
    const SparsityThresholds& t = *thresholds_;
    const std::string fix = ": calibrate this model with dwell calibrate -m " +
                            model_->path().string() + " -f TEXT --sparsity S -o FILE";
    char fp[17];
    std::snprintf(fp, sizeof fp, "%016llx",
                  static_cast<unsigned long long>(session_weights_fingerprint(*model_)));
    if (t.weights != fp) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "the sparsity thresholds are for other weights (model '" + t.model +
                        "', fingerprint " + t.weights + ", this one " + fp + ")" + fix);
    }
    const std::vector<std::string> keys = sparsity_input_keys();
    for (const auto& [key, value] : t.values) {
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT, "the sparsity thresholds name '" + key +
                                                        "', no projection input of this model" +
                                                        fix);
        }
    }
    for (const std::string& key : keys) {
        if (!t.values.contains(key)) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        "the sparsity thresholds lack the model's input '" + key + "'" + fix);
        }
    }
}

void Session::use_kv_only_where_attended() {
    // The layers a one-token graph asks kv_cache() for; the others (a hybrid
    // model's convolutions) get no KV pages. A plugin that cannot build the
    // graph fails the first decode with its message instead.
    Graph graph;
    try {
        build_step_graph(graph, 1, 1);
    } catch (const Error&) {
        return;
    }
    const int32_t n_layer = kv_.n_layer();
    std::vector<bool> used(static_cast<size_t>(n_layer), false);
    for (const TensorSlot& slot : graph.slots) {
        if (slot.role == TensorRole::Cache && slot.layer >= 0 && slot.layer < n_layer)
            used[static_cast<size_t>(slot.layer)] = true;
    }
    key_rope_ = find_layer_key_ropes(graph, n_layer);
    const auto n_used = std::count(used.begin(), used.end(), true);
    if (n_used == n_layer) return;
    kv_.use_layers(std::move(used));
    spdlog::debug("session: KV pages for {} of {} layers (the others do not attend)", n_used,
                  n_layer);
}

Session::Session(Runtime& runtime, std::shared_ptr<const Model> model, int32_t n_ctx,
                 int32_t n_batch, KvCache kv)
    : runtime_(runtime),
      model_(std::move(model)),
      n_ctx_(n_ctx),
      n_batch_(n_batch),
      kv_(std::move(kv)),
      state_(make_state(runtime, *model_)),
      scheduler_(backend_list(runtime), runtime.strict()),
      prefix_root_(KvPrefixCache::root_key(model_->id(), kv_.dtype(), kv_.rows_per_page())) {}

Session::~Session() = default;

void Session::check_cancel() const {
    if (cancelled()) {
        throw Error(DWELL_ERR_CANCELLED,
                    "cancelled after " + std::to_string(n_past_) + " tokens in the context");
    }
}

std::span<const float> Session::last_logits() const {
    const auto n_vocab = static_cast<size_t>(model_->info().n_vocab);
    if (logits_.size() < n_vocab) return {};
    return std::span<const float>(logits_).last(n_vocab);
}

std::unique_ptr<Session> Session::fork() const {
    std::unique_ptr<Session> copy(new Session(runtime_, model_, n_ctx_, n_batch_, kv_.fork()));
    copy->n_past_ = n_past_;
    copy->tokens_ = tokens_;
    copy->page_keys_ = page_keys_;
    copy->prefix_root_ = prefix_root_;
    copy->prefix_cache_ = prefix_cache_;
    copy->on_full_ = on_full_;
    copy->n_keep_ = n_keep_;
    copy->n_shifted_ = n_shifted_;
    copy->key_rope_ = key_rope_;
    copy->sparsity_fraction_ = sparsity_fraction_;
    copy->thresholds_ = thresholds_;
    copy->recorder_ = recorder_;
    copy->state_.assign(state_.all());  // a state is per sequence: copied, never shared
    const std::span<const float> last = last_logits();
    copy->logits_.assign(last.begin(), last.end());
    return copy;
}

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
    check_cancel();
    if (static_cast<int64_t>(n_past_) + static_cast<int64_t>(tokens.size()) > n_ctx_) {
        if (on_full_ == ContextFull::Stop ||
            static_cast<int64_t>(tokens.size()) > int64_t{n_ctx_} - n_keep_) {
            throw ContextFullError(
                "context full: " + std::to_string(n_past_) + " + " + std::to_string(tokens.size()) +
                    " tokens exceed the context of " + std::to_string(n_ctx_) +
                    (on_full_ == ContextFull::Stop
                         ? " (raise --ctx, or let the context shift: --ctx-full shift)"
                         : " even after dropping all but the " + std::to_string(n_keep_) +
                               " kept tokens (raise --ctx or feed fewer tokens at once)"),
                n_past_, static_cast<int64_t>(tokens.size()), n_ctx_);
        }
        if ((model_->info().flags & DWELL_MODEL_STATE_SPANS_CONTEXT) != 0) {
            // Dropping tokens cannot be undone in a state that summed them
            // all up (model.h); re-prefilling the kept ones would be a new
            // prompt, which is the caller's call, not a silent side effect.
            throw ContextFullError(
                "context full: " + std::to_string(n_past_) + " + " + std::to_string(tokens.size()) +
                    " tokens exceed the context of " + std::to_string(n_ctx_) + ", and this " +
                    model_->architecture() +
                    " model's recurrent state holds every token seen, so the context cannot "
                    "shift (raise --ctx, or start a new session from a shorter prompt)",
                n_past_, static_cast<int64_t>(tokens.size()), n_ctx_);
        }
        shift_for(tokens.size());
    }
    std::vector<float> all;
    const int32_t saved_past = n_past_;
    const size_t saved_keys = page_keys_.size();
    const int64_t saved_cached = n_cached_;
    std::vector<float> saved_logits = logits_;
    // A step writes the carried state in place, so unlike the KV rows it
    // is not undone by rewinding n_past: it is copied back.
    const std::vector<float> saved_state(state_.all().begin(), state_.all().end());
    try {
        // Pages another session computed for the same tokens are adopted,
        // not recomputed (every row's logits were asked for: compute all).
        const size_t cached = all_logits || !prefix_cache_ ? 0 : adopt_cached_prefix(tokens);
        n_cached_ += static_cast<int64_t>(cached);
        for (size_t start = cached, n = 0; start < tokens.size(); start += n) {
            if (start > cached) check_cancel();
            n = std::min(tokens.size() - start, static_cast<size_t>(n_batch_));
            // A hybrid model's state exists only where a batch ends: a batch
            // that crosses a page boundary ends at the last one it crosses,
            // so the prefix cache gets the state after that page.
            const auto rpp = static_cast<size_t>(kv_.rows_per_page());
            const size_t past_boundary = (static_cast<size_t>(n_past_) + n) % rpp;
            if (!state_.empty() && prefix_cache_ && n > past_boundary &&
                static_cast<size_t>(n_past_) % rpp + n > rpp) {
                n -= past_boundary;
            }
            const auto t0 = std::chrono::steady_clock::now();
            run_batch(tokens.subspan(start, n), all_logits);
            // The thermal governor's pacing: rest in proportion to the work.
            runtime_.pace(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            if (all_logits) all.insert(all.end(), logits_.begin(), logits_.end());
        }
        if (prefix_cache_) publish_pages();
    } catch (...) {
        // Cache rows past n_past are never read, so rewinding the position
        // undoes the step; pages taken for them are given back.
        n_past_ = saved_past;
        tokens_.resize(static_cast<size_t>(saved_past));
        page_keys_.resize(saved_keys);
        n_cached_ = saved_cached;
        logits_ = std::move(saved_logits);
        kv_.truncate(saved_past);
        state_.assign(saved_state);
        boundary_states_.clear();
        throw;
    }
    if (all_logits) {
        logits_ = std::move(all);
        return logits_;
    }
    return std::span<const float>(logits_).last(static_cast<size_t>(n_vocab));
}

void Session::reserve(int32_t n) {
    const int64_t end = std::min<int64_t>(n_ctx_, int64_t{n_past_} + std::max(n, 0));
    if (end <= n_past_) return;
    try {
        kv_.prepare_write(n_past_, end);
    } catch (...) {
        kv_.truncate(n_past_);  // what was taken goes back
        throw;
    }
}

size_t Session::adopt_cached_prefix(std::span<const int32_t> tokens) {
    KvPrefixCache& cache = runtime_.kv_prefixes();
    const auto rpp = static_cast<size_t>(kv_.rows_per_page());
    if (n_past_ % static_cast<int32_t>(rpp) != 0 ||
        page_keys_.size() != static_cast<size_t>(n_past_) / rpp ||
        kv_.n_pages() != static_cast<int64_t>(page_keys_.size())) {
        return 0;
    }
    // Every hit first, then as many as may end the adopted prefix; find()'s
    // page references go back whatever happens.
    std::vector<KvPrefixCache::Hit> hits;
    struct Release {
        KvPagePool& pages;
        std::vector<KvPrefixCache::Hit>& hits;
        ~Release() {
            for (const auto& h : hits)
                for (int32_t p : h.page_ids)
                    if (p != KvCache::kNoPage) pages.release(p);
        }
    } release{runtime_.kv_pages(), hits};
    uint64_t parent = page_keys_.empty() ? prefix_root_ : page_keys_.back();
    size_t usable = 0;
    for (size_t used = 0;
         tokens.size() - used >= rpp &&
         static_cast<int64_t>(n_past_) + static_cast<int64_t>(used + rpp) <= n_ctx_;
         used += rpp) {
        std::optional<KvPrefixCache::Hit> hit = cache.find(parent, tokens.subspan(used, rpp));
        if (!hit) break;
        parent = hit->key;
        hits.push_back(std::move(*hit));
        const KvPrefixCache::Hit& h = hits.back();
        // The last page of the input comes with the logits after it, or is
        // computed (decode must return them).
        if (used + rpp == tokens.size() && h.logits.empty()) break;
        // A hybrid model continues from the carried state after the page:
        // a page published without it can only be passed through.
        if (state_.empty() || h.state.size() == state_.all().size()) usable = hits.size();
    }
    for (size_t i = 0; i < usable; ++i) {
        kv_.adopt_page(hits[i].page_ids);
        const std::span<const int32_t> page = tokens.subspan(i * rpp, rpp);
        tokens_.insert(tokens_.end(), page.begin(), page.end());
        n_past_ += static_cast<int32_t>(rpp);
        page_keys_.push_back(hits[i].key);
    }
    if (usable == 0) return 0;
    if (!state_.empty()) state_.assign(hits[usable - 1].state);
    if (usable * rpp == tokens.size()) logits_ = std::move(hits[usable - 1].logits);
    return usable * rpp;
}

void Session::publish_pages() {
    KvPrefixCache& cache = runtime_.kv_prefixes();
    const auto rpp = static_cast<size_t>(kv_.rows_per_page());
    for (size_t i = page_keys_.size(); (i + 1) * rpp <= static_cast<size_t>(n_past_); ++i) {
        const std::span<const int32_t> page(tokens_.data() + i * rpp, rpp);
        const uint64_t parent = page_keys_.empty() ? prefix_root_ : page_keys_.back();
        // The logits after the page go with it when it ends the input, so an
        // identical prompt later needs no compute.
        const bool last = (i + 1) * rpp == static_cast<size_t>(n_past_);
        const auto state = boundary_states_.find(static_cast<int32_t>((i + 1) * rpp));
        cache.insert(model_->id(), parent, page, kv_.page_ids(static_cast<int64_t>(i)),
                     last ? last_logits() : std::span<const float>(),
                     state != boundary_states_.end() ? std::span<const float>(state->second)
                                                     : std::span<const float>());
        page_keys_.push_back(KvPrefixCache::child_key(parent, page));
    }
    boundary_states_.clear();
}

void Session::use_backend(const std::string& name) {
    scheduler_ = Scheduler(backends_preferring(runtime_, name), runtime_.strict());
    placement_summary_.clear();  // logged again at the next step
    spdlog::info("session: switching to backend {}", name);
}

void Session::shift_for(size_t n_new) {
    if (!key_rope_) {
        Graph graph;
        build_step_graph(graph, 1, 1);
        key_rope_ = find_layer_key_ropes(graph, kv_.n_layer());
    }
    const int64_t needed = int64_t{n_past_} + static_cast<int64_t>(n_new) - n_ctx_;
    // Half of what may go, as llama.cpp does, so shifts stay rare.
    const int64_t n_discard = std::max(needed, (int64_t{n_past_} - n_keep_) / 2);
    // The recurrent state stays as it is. For a short convolution that is
    // exact: its state is the layer's inputs at the last K - 1 positions,
    // and a shift drops positions from the middle (after n_keep), keeping
    // the rest as they were computed, as it keeps the KV rows; the state
    // holds no position, so nothing rotates as keys do. (A batch of
    // n_ctx - n_keep tokens drops every position after n_keep: the state
    // then carries the last dropped inputs into it, an approximation.)
    shift_context(kv_, *key_rope_, n_keep_, n_discard, n_past_);
    tokens_.erase(tokens_.begin() + n_keep_, tokens_.begin() + n_keep_ + n_discard);
    n_past_ -= static_cast<int32_t>(n_discard);
    n_shifted_ += n_discard;
    // Pages from n_keep on hold other rows now: their cache keys are void.
    page_keys_.resize(std::min(page_keys_.size(), static_cast<size_t>(n_keep_) /
                                                      static_cast<size_t>(kv_.rows_per_page())));
    spdlog::info("context full: dropped {} tokens after the first {}, {} remain", n_discard,
                 n_keep_, n_past_);
}

void Session::build_step_graph(Graph& graph, int32_t n_tokens, int32_t n_out, bool record) const {
    GraphBuilder builder(
        graph, [this](std::string_view name) { return model_->weight(name); },
        [this](int32_t layer, int32_t which) { return kv_.tensor(layer, which); },
        [this](int32_t layer, int32_t which) { return state_.tensor(layer, which); });
    // Every step, prompts too: each token's projections then see the same
    // inputs whether it was decoded alone or in a batch, so a perplexity run
    // (batched) measures what generation gets. Only a one-token step saves
    // weight reads (a batch reads each weight once for all its tokens).
    builder.set_sparsity_record(record || recorder_);
    if (record) {
        // dense: only the keys are wanted
    } else if (thresholds_) {
        builder.set_sparsity_thresholds(&thresholds_->values);
    } else {
        builder.set_sparsity(sparsity_fraction_);
    }
    dwell_batch batch{sizeof(dwell_batch), n_tokens, n_out, static_cast<int32_t>(kv_.n_ctx())};
    model_->build_graph(builder, batch);
    if (graph.output < 0)
        throw Error(DWELL_ERR_INTERNAL, "the model plugin built a graph without an output");
}

void Session::run_batch(std::span<const int32_t> tokens, bool all_logits) {
    const int32_t n_tokens = static_cast<int32_t>(tokens.size());
    const int32_t n_out = all_logits ? n_tokens : 1;

    // A model file truncated or rewritten under its mapping fails the step
    // in one line, before and after it runs, instead of killing the process
    // (mapped_file.hpp).
    model_->check_file();
    kv_.prepare_write(n_past_, n_past_ + n_tokens);

    Graph graph;
    build_step_graph(graph, n_tokens, n_out);
    if (!key_rope_) key_rope_ = find_layer_key_ropes(graph, kv_.n_layer());

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
            plan.arena_bytes, "activations for a batch of " + std::to_string(n_tokens) + " tokens",
            MemoryUse::Activations);
    }
    auto* base = static_cast<uint8_t*>(arena_.data());
    for (size_t i = 0; i < graph.slots.size(); ++i) {
        if (plan.offset[i] != ActivationPlan::kNone)
            graph.slots[i].tensor.data = base + plan.offset[i];
    }
    for (auto& slot : graph.slots) {
        if (slot.role != TensorRole::View) continue;
        auto* data = static_cast<uint8_t*>(graph.slots[slot.view_of].tensor.data);
        slot.tensor.data = data ? data + slot.view_offset : nullptr;
    }

    scheduler_.run(graph, placement, model_->streamer());
    model_->check_file();
    if (recorder_) {
        for (const auto& [tensor, key] : graph.sparsity_inputs) {
            const dwell_tensor& t = graph.slots[static_cast<size_t>(tensor)].tensor;
            recorder_(key, std::span<const float>(static_cast<const float*>(t.data),
                                                  static_cast<size_t>(dwell_tensor_nelements(&t))));
        }
    }

    const dwell_tensor& out = graph.slots[graph.output].tensor;
    const int64_t n_vocab = model_->info().n_vocab;
    if (out.ne[0] != n_vocab || out.ne[1] != n_out) {
        throw Error(DWELL_ERR_INTERNAL,
                    "the model's output has shape [" + std::to_string(out.ne[0]) + ", " +
                        std::to_string(out.ne[1]) + "], expected [n_vocab, rows]");
    }
    const auto* src =
        static_cast<const float*>(graph.slots[graph.storage_of(graph.output)].tensor.data);
    // A NaN or infinity would make every later sample the same arbitrary
    // token (in practice id 0, "<unk>", forever): the step fails instead.
    for (int64_t row = 0; row < n_out; ++row) {
        const float* r = src + row * n_vocab;
        const float* bad = std::find_if(r, r + n_vocab, [](float v) { return !std::isfinite(v); });
        if (bad != r + n_vocab) {
            const int64_t position = n_past_ + (n_tokens - n_out) + row;
            throw Error(DWELL_ERR_CORRUPT,
                        model_->path().string() + ": the model computed a non-finite logit (" +
                            (std::isnan(*bad) ? "NaN" : "infinity") + ", token id " +
                            std::to_string(bad - r) + ") at position " + std::to_string(position) +
                            ": its weights or hyper-parameters are corrupt, or a backend is "
                            "faulty");
        }
    }
    logits_.assign(src, src + n_vocab * n_out);
    n_past_ += n_tokens;
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    if (!state_.empty() && prefix_cache_ && n_past_ % kv_.rows_per_page() == 0) {
        boundary_states_[n_past_].assign(state_.all().begin(), state_.all().end());
    }
}

// The file format and its checks: session_file.hpp.
namespace {

SessionFileModel file_model_of(const Model& model) {
    const auto& info = model.info();
    return {info.n_layer,
            info.kv_width,
            info.n_vocab,
            model.weight_bytes(),
            session_weights_fingerprint(model),
            model.path().string(),
            {info.state_elems[0], info.state_elems[1]}};
}

}  // namespace

uint64_t session_weights_fingerprint(const Model& model) {
    XXH3_state_t* raw = XXH3_createState();
    if (!raw) throw Error(DWELL_ERR_OUT_OF_MEMORY, "cannot allocate a hash");
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(raw, &XXH3_freeState);
    XXH3_64bits_reset(st.get());
    auto add = [&](const void* p, size_t n) { XXH3_64bits_update(st.get(), p, n); };
    auto add_u64 = [&](uint64_t v) { add(&v, sizeof v); };
    add(model.architecture().data(), model.architecture().size());
    const auto& info = model.info();
    for (int64_t v : {int64_t{info.n_vocab}, int64_t{info.n_layer}, int64_t{info.kv_width},
                      int64_t{info.n_ctx_train}})
        add_u64(static_cast<uint64_t>(v));
    // Pages at both ends of every tensor: a fine-tune changes nearly every
    // weight, so these differ, and reading them costs two pages a tensor.
    constexpr uint64_t kSample = 4096;
    for (const SourceTensor& t : model.source().tensors()) {
        add(t.name.data(), t.name.size() + 1);
        add_u64(static_cast<uint64_t>(t.dtype));
        for (int64_t d : t.ne) add_u64(static_cast<uint64_t>(d));
        add_u64(t.size);
        // A checksum the file keeps covers every byte, and is there whether
        // the tensor is resident or read later (streamed packs).
        if (t.stored.xxh3) {
            add_u64(*t.stored.xxh3);
        } else if (t.data) {
            const uint64_t head = std::min(t.size, kSample);
            add(t.data, head);
            add(t.data + (t.size - head), head);
        } else {
            add_u64(t.stored.offset);
            add_u64(t.stored.bytes);
        }
    }
    return XXH3_64bits_digest(st.get());
}

void Session::save(const std::filesystem::path& path, const SessionExtras& extras) const {
    const std::span<const float> logits = last_logits();
    const auto n_vocab = model_->info().n_vocab;
    if (extras.pending_token < -1 || extras.pending_token >= n_vocab) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "session save: pending token " +
                                                    std::to_string(extras.pending_token) +
                                                    " is outside the vocabulary");
    }
    if (extras.host_data.size() > kSessionMaxHostData) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    path.string() + ": " + std::to_string(extras.host_data.size()) +
                        " bytes of host data exceed the session file's limit of " +
                        std::to_string(kSessionMaxHostData));
    }
    refuse_output_over_input(path, model_->path(), "the model file this session runs");
    SessionFileHeader h;
    h.kv_dtype = kv_.dtype();
    h.n_ctx = n_ctx_;
    h.n_past = n_past_;
    h.n_logits = static_cast<int32_t>(logits.size());
    h.pending_token = extras.pending_token;
    h.host_data_bytes = static_cast<uint32_t>(extras.host_data.size());
    SessionFileWriter out(path, file_model_of(*model_), h);
    out.write(tokens_.data(), tokens_.size() * sizeof(int32_t));
    out.write(logits.data(), logits.size() * sizeof(float));
    out.write(extras.host_data.data(), extras.host_data.size());
    // A layer without KV keeps its place in the file with zero rows.
    const std::vector<unsigned char> no_row(kv_.row_bytes(), 0);
    for (int32_t l = 0; l < model_->info().n_layer; ++l) {
        for (int32_t which = 0; which < 2; ++which) {
            for (int32_t pos = 0; pos < n_past_; ++pos) {
                out.write(kv_.uses_layer(l) ? kv_.row(l, which, pos) : no_row.data(),
                          kv_.row_bytes());
            }
        }
    }
    out.write(state_.all().data(), state_.all().size_bytes());
    out.finish();
}

std::unique_ptr<Session> Session::restore(Runtime& runtime, std::shared_ptr<const Model> model,
                                          const std::filesystem::path& path,
                                          const SessionOptions& options, SessionExtras* extras) {
    const int32_t n_layer = model->info().n_layer;
    SessionFileReader in(path, file_model_of(*model));
    const SessionFileHeader& h = in.header();
    SessionOptions so = options;
    if (so.n_ctx != 0 && so.n_ctx != h.n_ctx) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    path.string() + ": the session has a context of " + std::to_string(h.n_ctx) +
                        " tokens, not " + std::to_string(so.n_ctx) + " (drop --ctx to restore it)");
    }
    so.n_ctx = h.n_ctx;
    so.kv_dtype = h.kv_dtype;
    // The header and the file's size were checked before this allocates.
    auto session = std::make_unique<Session>(runtime, std::move(model), so);
    session->tokens_ = in.read_tokens();
    session->logits_ = in.read_logits();
    std::string host_data = in.read_host_data();
    KvCache& kv = session->kv_;
    kv.prepare_write(0, h.n_past);
    std::vector<uint8_t> no_row(kv.row_bytes());
    for (int32_t l = 0; l < n_layer; ++l) {
        for (int32_t which = 0; which < 2; ++which) {
            for (int32_t pos = 0; pos < h.n_past; ++pos) {
                in.read_row(kv.uses_layer(l)
                                ? std::span<uint8_t>(kv.row(l, which, pos), kv.row_bytes())
                                : std::span<uint8_t>(no_row));
            }
        }
    }
    if (!session->state_.empty()) {
        std::vector<float> states(session->state_.all().size());
        in.read_states(states);
        session->state_.assign(states);
    }
    in.finish();
    session->n_past_ = h.n_past;
    if (h.version < 3) {
        spdlog::info(
            "{}: a version {} session file: it has no weights fingerprint, so only the "
            "model's shape was checked",
            path.string(), h.version);
    }
    if (extras) {
        extras->pending_token = h.pending_token;
        extras->host_data = std::move(host_data);
        extras->had_host_data = h.version >= 3;
    } else if (h.pending_token >= 0 &&
               (session->n_past_ < session->n_ctx_ || session->shifts_context())) {
        session->decode(std::span<const int32_t>(&h.pending_token, 1));
    }
    return session;
}

}  // namespace dwell
