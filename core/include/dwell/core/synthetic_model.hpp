// Writes a Llama-shaped GGUF with deterministic random weights, so a model
// exists on any machine for demos, tests and benchmarks. The vocabulary is
// either taken from a sentencepiece .model file or generated: control
// tokens, 256 byte-fallback tokens, printable characters, common English
// word pieces and letter pieces (with every prefix, so BPE merges reach
// them) up to n_vocab.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "dwell/tensor.h"

namespace dwell {

struct SyntheticLlamaSpec {
    int64_t n_embd = 256;
    int32_t n_layer = 4;
    int64_t n_head = 8;
    int64_t n_head_kv = 4;
    int64_t n_ff = 688;
    int64_t n_vocab = 1024;  // ignored when vocab_model is set
    int64_t n_ctx = 2048;
    float rope_freq_base = 10000.0f;
    float rms_eps = 1e-5f;
    bool tied_output = false;
    dwell_dtype dtype = DWELL_F32;  // matrices; norms stay F32
    float weight_std = 0.02f;
    uint64_t seed = 1;
    std::optional<std::filesystem::path> vocab_model;  // a sentencepiece .model
};

// Throws dwell::Error naming the option at fault (e.g. n_embd not a multiple
// of n_head, or rows not a multiple of the quantization block).
void write_synthetic_llama(const SyntheticLlamaSpec& spec, const std::filesystem::path& out);

}  // namespace dwell
