// A byte-level BPE vocabulary for tests and synthetic models (Qwen2-style):
// 256 byte tokens, then the results of merges trained on a built-in
// multilingual text (English prose and code, Chinese, Japanese, Korean,
// European languages, Cyrillic, Arabic, emoji), then special tokens:
// "<|endoftext|>" (EOS, also BOS and padding as in Qwen2 files, control),
// "<|im_start|>" and "<|im_end|>" (control), "<tool_call>" and
// "</tool_call>" (user-defined).
//
// Training is standard greedy BPE: the most frequent adjacent pair (ties:
// the lowest pair of token ids) is merged, over and over, within the words
// of the qwen2 pre-tokenizer. The seed weighs each paragraph of the text
// (1 to 3 times), so other seeds give other merges; the same arguments always
// give the same vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dwell {

class GgufWriter;

struct BpeVocab {
    std::vector<std::string> tokens;  // byte-alphabet text, as tokenizer.ggml.tokens
    std::vector<int32_t>
        types;  // GGUF token types: 1 normal, 3 control, 4 user-defined, 5 reserved
    std::vector<std::string> merges;  // "left right", lowest rank first
    int32_t bos = -1, eos = -1;
    int32_t pad = -1;
    bool add_bos = false;  // tokenizer.ggml.add_bos_token
};

// n_vocab tokens in all: at least 261, at most what the text supports
// (about 2780, a little less or more with the seed); throws
// dwell::Error(DWELL_ERR_INVALID_ARGUMENT) outside that range.
BpeVocab make_synthetic_bpe_vocab(int64_t n_vocab, uint64_t seed);

// Writes the tokenizer.ggml.* keys of `v` with tokenizer.ggml.model "gpt2"
// and tokenizer.ggml.pre `pre` ("qwen2", "gpt-2", ...: throws for one
// dwell's tokenizer does not support).
void write_bpe_vocab(GgufWriter& w, const BpeVocab& v, const std::string& pre);

}  // namespace dwell
