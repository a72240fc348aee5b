// Llama-family hyper-parameters, read from the model's metadata
// ("<arch>.embedding_length" and friends, as GGUF names them).
#pragma once

#include <cstdint>
#include <string>

#include "dwell/model.h"

namespace dwell::llama {

struct HParams {
    std::string arch;
    int64_t n_vocab = 0;
    int64_t n_ctx_train = 0;
    int64_t n_embd = 0;
    int32_t n_layer = 0;
    int64_t n_ff = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim = 0;
    int32_t n_rot = 0;
    float rms_eps = 1e-5f;
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;
    bool tied_output = false;  // output.weight absent: reuse token_embd.weight

    int64_t kv_width() const { return head_dim * n_head_kv; }
};

// Throws std::runtime_error with a one-line reason naming the key at fault.
HParams read_hparams(const dwell_metadata& meta);

}  // namespace dwell::llama
