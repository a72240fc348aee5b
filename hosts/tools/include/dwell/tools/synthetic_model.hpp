// Writes a GGUF of a decoder-only model family with deterministic random
// weights, so a model exists on any machine for demos, tests and
// benchmarks. Families: llama (dense), qwen2 (biases on Q/K/V), gemma (its
// own head size, always-tied output), mixtral (GGUF architecture "llama"
// with a mixture-of-experts FFN), qwen3 (per-head Q/K norms), qwen3moe
// (qwen3's attention, a mixture-of-experts FFN) and smollm3 (the llama
// layout; every fourth layer has no RoPE), llama3 (GGUF architecture "llama"
// with Llama 3's RoPE frequency factors in rope_freqs.weight) and phi3
// (fused attn_qkv and gate/up ffn_up, partial rotary, LongRoPE short and
// long factors with an attention factor), lfm2 (hybrid: every third layer,
// 2, 5, ..., is a QK-norm attention layer, the others gated short
// convolutions over conv_l_cache taps; head_count_kv is the per-layer array
// with 0 for those, and the final norm is token_embd_norm), qwen35 (hybrid:
// every fourth layer, 3, 7, ..., is gated full attention with QK-norm and
// rotary on half the head, the others gated delta nets with n_head value
// heads over n_head_kv key heads of head_dim, a conv_l_cache-tap
// convolution, post_attention_norm before the FFN). The vocabulary is either taken
// from a sentencepiece .model file or generated: for qwen2, qwen3 and
// qwen3moe a byte-level BPE one (synthetic_bpe_vocab.hpp, pre-tokenizer
// "qwen2"); otherwise control
// tokens, 256 byte-fallback tokens, printable characters, common English
// word pieces and letter pieces (with every prefix, so BPE merges reach
// them) up to n_vocab.
//
// The weights depend only on the spec's numbers and seed, never on the
// vocabulary's contents: the same spec with another vocabulary of the same
// size gives the same weights, and so the same logits for the same ids.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "dwell/tensor.h"

namespace dwell {

enum class SyntheticFamily {
    llama,
    qwen2,
    gemma,
    mixtral,
    qwen3,
    qwen3moe,
    smollm3,
    gemma2,
    gemma3,
    llama3,
    phi3,
    lfm2,
    qwen35
};

// "llama", "qwen2", "gemma", "mixtral", "qwen3", "qwen3moe", "smollm3", "gemma2", "gemma3",
// "llama3", "phi3", "lfm2", "qwen35".
const char* synthetic_family_name(SyntheticFamily f);
// Throws dwell::Error naming the accepted names for an unknown one.
SyntheticFamily parse_synthetic_family(std::string_view name);

struct SyntheticModelSpec {
    SyntheticFamily family = SyntheticFamily::llama;
    int64_t n_embd = 256;
    int32_t n_layer = 4;
    int64_t n_head = 8;
    int64_t n_head_kv = 4;
    int64_t n_ff = 688;      // per expert for mixtral and qwen3moe
    int64_t n_vocab = 1024;  // ignored when vocab_model is set
    int64_t n_ctx = 2048;
    // 0: n_embd / n_head. Otherwise written as attention.key_length and
    // value_length (gemma's heads need not split n_embd).
    int64_t head_dim = 0;
    int64_t n_expert = 0;       // mixtral, qwen3moe: experts per layer (2..256)
    int64_t n_expert_used = 0;  // mixtral, qwen3moe: experts each token uses (1..n_expert)
    float rope_freq_base = 10000.0f;
    // phi3: rope.dimension_count, the rotated dims of each head (0: all).
    int64_t n_rot = 0;
    // phi3: rope.scaling.original_context_length (0: n_ctx / 4); a session
    // whose context exceeds it uses the long factors.
    int64_t n_ctx_orig = 0;
    // > 0 (then >= 1): rope.scaling.type "yarn" with this factor and
    // rope.scaling.original_context_length n_ctx_orig (0: n_ctx / 4); not
    // for phi3, whose scaling is LongRoPE.
    float yarn_factor = 0.0f;
    float rms_eps = 1e-5f;
    bool tied_output = false;       // gemma is always tied
    dwell_dtype dtype = DWELL_F32;  // matrices; norms, biases and routers stay F32
    float weight_std = 0.02f;
    float norm_jitter = 0.0f;  // norm weights are 1 + norm_jitter * N(0, 1)
    float bias_std = 0.0f;     // qwen2's Q/K/V biases (0: weight_std)
    float router_std = 0.0f;   // mixtral's and qwen3moe's router (0: weight_std)
    // gemma2 / gemma3 (always tied, post-norms; gemma3 adds QK-norm): the
    // local layers' window and period (0: the family's default, 4096 / 2
    // for gemma2, none for gemma3), their RoPE base (0: not written) and the
    // soft-caps (0: not written, gemma2's defaults are 50 and 30).
    int64_t sliding_window = 0;
    int64_t swa_pattern = 0;
    float rope_freq_base_swa = 0.0f;
    float attn_softcap = 0.0f;
    float final_softcap = 0.0f;
    // lfm2: the convolution's taps (shortconv.l_cache, 2..16) and their
    // standard deviation (0: 0.5, so the convolution layers matter).
    int64_t conv_l_cache = 3;
    float conv_std = 0.0f;
    uint64_t alignment = 32;  // general.alignment: tensor data offsets
    uint64_t seed = 1;
    std::optional<std::filesystem::path> vocab_model;  // a sentencepiece .model
};

// Throws dwell::Error naming the option at fault (e.g. n_embd not a multiple
// of n_head, or rows not a multiple of the quantization block).
void write_synthetic_model(const SyntheticModelSpec& spec, const std::filesystem::path& out);

}  // namespace dwell
