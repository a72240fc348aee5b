// One conversation with a model: its tokens, its paged KV cache, and the
// machinery that turns a batch of tokens into logits (graph build by the
// model plugin, placement by the scheduler, activations in the pool).
//
// Many sessions may live at once on one Runtime and Model. Their KV pages
// come from the runtime's KvPagePool: fork() shares every page, and pages
// are copied only when a session writes into a shared one.
//
// Thread-safety: a session is used by one thread at a time, except
// cancel(), which any thread may call at any time. Sessions on different
// threads may share a Model and a Runtime.
// Ownership: the Runtime must outlive the session; the session shares the
// Model.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/config/sparsity_thresholds.hpp"
#include "dwell/core/kv/context_shift.hpp"
#include "dwell/core/kv/kv_cache.hpp"
#include "dwell/core/kv/recurrent_state.hpp"
#include "dwell/core/memory/memory_pool.hpp"
#include "dwell/core/scheduler/scheduler.hpp"
#include "dwell/model.h"

namespace dwell {

class Model;
class Runtime;

// What decode() does when the tokens would not fit the context.
enum class ContextFull {
    Stop,   // throw DWELL_ERR_OUT_OF_MEMORY ("context full ...")
    Shift,  // keep the first n_keep positions, drop the older half of the rest
};

struct SessionOptions {
    int32_t n_ctx = 0;                    // 0: the model's training context
    int32_t n_batch = 256;                // longest batch run in one graph
    std::optional<dwell_dtype> kv_dtype;  // default: the manifest's [kv] dtype
    ContextFull on_full = ContextFull::Stop;
    int32_t n_keep = 0;  // with Shift: positions never dropped (e.g. a system prompt)
    // The runtime's prefix cache lets sessions adopt pages another session
    // computed for the same prompt start, which a client can time. Sessions
    // of different scopes never share cached pages (a server keeps each API
    // key's prompts apart); 0 is the scope every session gets by default.
    uint64_t prefix_scope = 0;
    bool prefix_cache = true;  // false: this session neither adopts nor offers pages
    // Activation sparsity other than the runtime's [sparsity] (dwell
    // calibrate compares several on one loaded model): thresholds, when set,
    // win over a fraction; neither: the runtime's. Calibrated thresholds are
    // checked against the model when the session is made (every key one of
    // its projection inputs, every input keyed, the weights' fingerprint).
    std::optional<float> sparsity_fraction;
    std::shared_ptr<const SparsityThresholds> sparsity_thresholds;
    // Set: after each step this hears each projection input before its
    // SPARSIFY (key as in sparsity_thresholds.hpp, the step's values, all
    // its tokens' rows) in the order the graph computed them. Called on the
    // thread that decodes; the span is valid for the call only.
    std::function<void(const std::string& key, std::span<const float> values)> sparsity_recorder;
};

// What a host keeps in a session file beside the conversation itself.
struct SessionExtras {
    int32_t pending_token = -1;  // -1: none
    std::string host_data;       // up to kSessionMaxHostData bytes
    bool had_host_data = false;  // restore(): the file holds host data (version 3 or later)
};

// A cheap, content-sensitive hash of a model's weights: every tensor's
// name, type and shape, and its bytes' checksum where the file keeps one,
// else its first and last 4 KiB. Stored in session files so a session
// never restores into other weights of the same shape.
DWELL_CORE_API uint64_t session_weights_fingerprint(const Model& model);

// The context a session gets when `requested` is asked for (0: the
// model's training context, capped at 4096). Throws naming --ctx when it is
// negative or above kSessionMaxContext; a context longer than the model's
// training context is allowed, with a warning. Whether its KV cache fits
// the memory is checked when the session is made.
DWELL_CORE_API int32_t session_context_size(const dwell_model_info& info, int32_t requested);

class DWELL_CORE_API Session {
public:
    Session(Runtime& runtime, std::shared_ptr<const Model> model,
            const SessionOptions& options = {});
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Appends `tokens` at the current position and returns the logits of the
    // last token, or of every token when all_logits ([n_tokens x n_vocab]).
    // Throws dwell::Error on a bad token id, a full context, running out of
    // memory budget, cancel() (DWELL_ERR_CANCELLED), or a backend failure;
    // the session is then as before the call.
    // The returned span stays valid until the next decode() call, whether
    // that call succeeds or not.
    std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits = false);

    // Takes the KV pages for the next n positions (capped at the context)
    // now, so that decoding them cannot run out of memory later. Throws
    // DWELL_ERR_OUT_OF_MEMORY, with nothing taken, when they do not fit.
    void reserve(int32_t n);

    // Makes the running (or the next) decode() stop between two batches, and
    // generate() between two tokens, with DWELL_ERR_CANCELLED. The flag
    // stays set until clear_cancel().
    // From the next step on, prefer backend `name` (a plugin name such as
    // "opencl", or a label such as "opencl/opencl0") for every node it
    // supports and the manifest allows it; the others follow in manifest
    // order. The conversation continues: the KV pages stay where they are,
    // since every backend so far computes on host memory. Throws naming the
    // selected backends when `name` is not one of them.
    void use_backend(const std::string& name);

    void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
    void clear_cancel() { cancelled_.store(false, std::memory_order_relaxed); }
    bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

    // A new session at the same point of the same conversation (same
    // tokens, same last logits) sharing this one's KV pages.
    std::unique_ptr<Session> fork() const;

    // Writes the conversation (tokens, KV rows, last logits) to `path`, and
    // reads one back into a new session of the same model (same shape and
    // same weights, by their fingerprint), KV type and context. Throws
    // naming the file on I/O errors, a file of another model or type, or
    // damage.
    // `extras` travel in the same file: the host's pending token (the last
    // generated one, not yet decoded: saving never needs room for it, so a
    // full context saves too) and the host's own bytes. When restore() is
    // given no `extras`, a pending token is decoded if the context has room.
    void save(const std::filesystem::path& path, const SessionExtras& extras = {}) const;
    static std::unique_ptr<Session> restore(Runtime& runtime, std::shared_ptr<const Model> model,
                                            const std::filesystem::path& path,
                                            const SessionOptions& options = {},
                                            SessionExtras* extras = nullptr);

    // True when a full context shifts instead of stopping.
    bool shifts_context() const { return on_full_ == ContextFull::Shift; }
    // Positions dropped by context shifts so far.
    int64_t n_shifted() const { return n_shifted_; }
    int32_t n_past() const { return n_past_; }
    // Tokens decode() took from the prefix cache instead of computing them.
    int64_t n_cached_tokens() const { return n_cached_; }
    int32_t n_ctx() const { return n_ctx_; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const Model& model() const { return *model_; }
    const KvCache& kv_cache() const { return kv_; }
    // The carried state of a hybrid model (empty for other models).
    const RecurrentState& recurrent_state() const { return state_; }
    // The logits of the last token decoded (empty before the first decode).
    std::span<const float> last_logits() const;
    // The keys of the model's projection inputs (sparsity_thresholds.hpp),
    // in the order a step computes them.
    std::vector<std::string> sparsity_input_keys() const;

    // The placement of the first step, for the log and `dwell run -v`.
    const std::string& placement_summary() const { return placement_summary_; }

private:
    Session(Runtime& runtime, std::shared_ptr<const Model> model, int32_t n_ctx, int32_t n_batch,
            KvCache kv);
    // Hybrid models: KV pages only for the layers whose graph attends.
    void use_kv_only_where_attended();
    // Makes room for n_new tokens by dropping positions after n_keep_.
    void shift_for(size_t n_new);
    // Builds (without running) the graph of a step of n_tokens.
    void build_step_graph(Graph& graph, int32_t n_tokens, int32_t n_out, bool record = false) const;
    // Throws in one line when the calibrated thresholds do not fit the model.
    void check_sparsity_thresholds() const;
    void run_batch(std::span<const int32_t> tokens, bool all_logits);
    void check_cancel() const;
    // Adopts cached pages for whole pages at the front of `tokens`; returns
    // how many tokens they covered.
    size_t adopt_cached_prefix(std::span<const int32_t> tokens);
    // Offers the full pages not yet offered to the runtime's prefix cache.
    void publish_pages();

    Runtime& runtime_;
    std::shared_ptr<const Model> model_;
    int32_t n_ctx_;
    int32_t n_batch_;
    ContextFull on_full_ = ContextFull::Stop;
    int32_t n_keep_ = 0;
    int64_t n_shifted_ = 0;
    // Per layer (Gemma's local and global layers rotate differently); outer:
    // looked up yet.
    std::optional<std::vector<std::optional<KeyRope>>> key_rope_;
    KvCache kv_;
    RecurrentState state_;
    Scheduler scheduler_;
    PoolBuffer arena_;
    int32_t n_past_ = 0;
    std::vector<int32_t> tokens_;  // the n_past_ tokens in the cache
    uint64_t prefix_root_ = 0;     // prefix-cache key of the empty prefix (scope included)
    bool prefix_cache_ = true;
    int64_t n_cached_ = 0;
    std::vector<uint64_t> page_keys_;  // prefix-cache key after each full page offered
    // Hybrid models: the recurrent state at each page boundary where a batch
    // ended since the last publish_pages() (by n_past there).
    std::map<int32_t, std::vector<float>> boundary_states_;
    std::vector<float> logits_;
    float sparsity_fraction_ = 0.0f;
    std::shared_ptr<const SparsityThresholds> thresholds_;  // null: none
    std::function<void(const std::string&, std::span<const float>)> recorder_;
    std::string placement_summary_;
    std::atomic<bool> cancelled_{false};
};

}  // namespace dwell
