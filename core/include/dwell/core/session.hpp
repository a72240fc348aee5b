// One conversation with a model: its KV cache, its position, and the
// machinery that turns a batch of tokens into logits (graph build by the
// model plugin, placement by the scheduler, activations in the pool).
//
// Thread-safety: a session is used by one thread at a time; many sessions
// may share a Model and a Runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dwell/core/kv_cache.hpp"
#include "dwell/core/memory_pool.hpp"
#include "dwell/core/scheduler.hpp"

namespace dwell {

class Model;
class Runtime;

struct SessionOptions {
    int32_t n_ctx = 0;                    // 0: the model's training context
    int32_t n_batch = 256;                // longest batch run in one graph
    std::optional<dwell_dtype> kv_dtype;  // default: the manifest's [kv] dtype
};

class Session {
public:
    Session(Runtime& runtime, std::shared_ptr<const Model> model,
            const SessionOptions& options = {});

    // Appends `tokens` at the current position and returns the logits of the
    // last token, or of every token when all_logits ([n_tokens x n_vocab]).
    // Throws dwell::Error on a bad token id, a full context, or a backend failure;
    // the session is then unchanged.
    // The returned span stays valid until the next decode() call, whether
    // that call succeeds or not.
    std::span<const float> decode(std::span<const int32_t> tokens, bool all_logits = false);

    int32_t n_past() const { return n_past_; }
    int32_t n_ctx() const { return n_ctx_; }
    const Model& model() const { return *model_; }
    const KvCache& kv_cache() const { return kv_; }
    // The placement of the first step, for the log and `dwell run -v`.
    const std::string& placement_summary() const { return placement_summary_; }

private:
    void run_batch(std::span<const int32_t> tokens, bool all_logits);

    Runtime& runtime_;
    std::shared_ptr<const Model> model_;
    int32_t n_ctx_;
    int32_t n_batch_;
    KvCache kv_;
    Scheduler scheduler_;
    PoolBuffer arena_;
    int32_t n_past_ = 0;
    std::vector<float> logits_;
    std::string placement_summary_;
};

}  // namespace dwell
