// An SPM vocabulary for tests, laid out as Gemma 3's is: <pad>, <eos>,
// <bos> (control) and <unk>; the chat-turn and image markers
// <start_of_turn>, <end_of_turn>, <start_of_image>, <end_of_image>
// (control); user-defined tokens matched in text before anything else
// ("<table>", "</table>", "<br>", a tab pair); the 256 byte-fallback tokens
// <0x00>..<0xFF>; then the normal pieces, with U+2581 for a space and
// falling scores: the synthetic BPE vocabulary's tokens that are whole UTF-8
// text, in the order its training made them. Characters the training text
// never made a token of (most CJK and emoji) fall back to their bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dwell {

class GgufWriter;

struct SpmVocab {
    std::vector<std::string> tokens;  // tokenizer.ggml.tokens
    std::vector<float> scores;        // tokenizer.ggml.scores
    std::vector<int32_t> types;       // GGUF token types: 1 normal, 2 unknown, 3 control, ...
    int32_t pad = 0, eos = 1, bos = 2, unk = 3;
    bool add_bos = true;            // tokenizer.ggml.add_bos_token
    bool add_space_prefix = false;  // tokenizer.ggml.add_space_prefix (Gemma 3: false)
};

// The normal pieces come from make_synthetic_bpe_vocab(n_bpe, seed).
SpmVocab make_synthetic_spm_vocab(int64_t n_bpe, uint64_t seed);

// Writes the tokenizer.ggml.* keys of `v` with tokenizer.ggml.model "llama".
void write_spm_vocab(GgufWriter& w, const SpmVocab& v);

}  // namespace dwell
