// The hyper-parameters of a "sample-llama" model, read from the model
// file's metadata through the host's dwell_metadata table.
//
// A model family owns the keys under its architecture name: GGUF writes
// them as "<general.architecture>.<key>", so this plugin reads
// "sample-llama.embedding_length", "sample-llama.block_count", ...
#pragma once

#include <cstdint>

#include "dwell/model.h"

namespace sample_llama {

// The general.architecture value this plugin serves, and the prefix of its
// metadata keys.
inline constexpr const char* kArchitecture = "sample-llama";

struct HParams {
    int64_t n_vocab = 0;      // rows of token_embd.weight
    int64_t n_ctx_train = 0;  // context length the model was trained for
    int64_t n_embd = 0;       // width of the residual stream
    int32_t n_layer = 0;
    int64_t n_ff = 0;       // width of the feed-forward hidden layer
    int64_t n_head = 0;     // query heads
    int64_t n_head_kv = 0;  // key/value heads (< n_head: grouped-query attention)
    int64_t head_dim = 0;
    int32_t n_rot = 0;  // dimensions of each head that RoPE rotates
    float rms_eps = 1e-5f;
    float rope_freq_base = 10000.0f;
    bool tied_output = false;  // no output.weight: the embedding table is the output head

    // Values one cached token takes in one layer's K (or V) cache.
    int64_t kv_width() const { return head_dim * n_head_kv; }
};

// Reads and validates every hyper-parameter. Throws std::runtime_error with
// one line naming the metadata key at fault, e.g.
// "metadata key sample-llama.block_count is missing or not an integer".
HParams read_hparams(const dwell_metadata& meta);

}  // namespace sample_llama
