// The hyper-parameters decoder-only transformer families share, read from
// the "<arch>.*" keys as GGUF names them. A family reads its own extra keys
// (experts, biases, ...) with the same MetadataReader afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dwell/model.h"
#include "model/metadata_reader.hpp"
#include "model/rope_scaling.hpp"

namespace dwell::model_kit {

struct TransformerHParams {
    std::string arch;
    int64_t n_vocab = 0;
    int64_t n_ctx_train = 0;
    int64_t n_embd = 0;
    int32_t n_layer = 0;
    int64_t n_ff = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim = 0;  // attention.key_length, else n_embd / n_head
    int32_t n_rot = 0;     // rope.dimension_count, else head_dim
    float rms_eps = 1e-5f;
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;
    // rope.scaling.attn_factor: RoPE's cos and sin are scaled by it (LongRoPE
    // files carry it; ABI 1.5).
    float rope_attn_factor = 1.0f;
    // Per-pair RoPE frequency factors [n_rot/2] computed from the metadata
    // (YaRN, rope_scaling.hpp), on top of any factor tensor of the file;
    // empty: none.
    std::vector<float> rope_freq_factors;
    bool tied_output = false;  // output.weight absent: reuse token_embd.weight

    int64_t q_width() const { return head_dim * n_head; }
    int64_t kv_width() const { return head_dim * n_head_kv; }
    // What the host needs to size the KV cache and check outputs.
    dwell_model_info model_info() const;
};

// Throws std::runtime_error with a one-line reason naming the key at fault.
// `default_rms_eps` is used when attention.layer_norm_rms_epsilon is absent.
TransformerHParams read_transformer_hparams(const MetadataReader& m, float default_rms_eps = 1e-5f);
// The same for a hybrid family whose attention.head_count_kv is a per-layer
// array (0 marking the layers without attention, LFM2), which the metadata
// table cannot read element by element: the family finds the KV heads of
// its attention layers (from their tensors) and passes them as n_head_kv;
// the key is then not read.
TransformerHParams read_transformer_hparams(const MetadataReader& m, float default_rms_eps,
                                            int64_t n_head_kv);

// For families whose RoPE always rotates the whole head and whose files must
// say their norm epsilon (Qwen3, SmolLM3): throws unless
// rope.dimension_count equals the head size and
// attention.layer_norm_rms_epsilon is present, naming the key.
void require_full_rope_and_rms_eps(const MetadataReader& m, const TransformerHParams& h);

}  // namespace dwell::model_kit
