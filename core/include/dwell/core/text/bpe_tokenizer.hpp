// Byte-level BPE (the GPT-2 / Qwen2 scheme): text is split into words by a
// pre-tokenizer, each word's bytes start as one symbol per byte, and the
// vocabulary's merges are applied lowest rank first (leftmost first among
// equal ranks) until none applies; each final symbol is a token. Token and
// merge texts are in the byte alphabet of bpe_byte_map.hpp.
//
// Special tokens are not this engine's business: the caller cuts them out of
// the text first (special_token_split.hpp) and encodes the pieces between.
//
// Thread-safety: immutable after construction; encode() is safe from many
// threads.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dwell/core/text/bpe_pre_tokenizer.hpp"

namespace dwell::bpe {

class BpeTokenizer {
public:
    // tokens and merges ("left right") as tokenizer.ggml.tokens and
    // tokenizer.ggml.merges hold them.
    BpeTokenizer(std::span<const std::string_view> tokens, std::span<const std::string_view> merges,
                 PreTokenizerKind pre);

    // Appends the ids of `text`, which holds no special token.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

private:
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;
    int32_t merge_rank(std::string_view left, std::string_view right) const;

    PreTokenizer pre_;
    bool ignore_merges_ = false;  // a word that is a token is that token (llama3 kind)
    // Merges by the raw bytes of both sides (see pair_key()); the lowest
    // rank of a pair listed twice.
    std::unordered_map<std::string, int32_t> ranks_;
    // Token ids by their raw bytes; of tokens with the same text, the last.
    std::unordered_map<std::string, int32_t> ids_;
    // Ids of the tokens whose text is one byte, by that byte: what a symbol
    // that is no token falls back to, byte by byte of its alphabet text.
    std::array<int32_t, 256> single_byte_ids_;
};

// What a token stands for when decoding, by its GGUF token type: normal
// tokens (1) their raw bytes, user-defined ones (4) their text as it is,
// every other type nothing. A normal token's character outside the byte
// alphabet is kept as that character.
std::string token_bytes(std::string_view token_text, int32_t token_type);

}  // namespace dwell::bpe
