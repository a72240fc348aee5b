// Text <-> token ids, for the two vocabulary kinds of GGUF files:
//
// - SPM (tokenizer.ggml.model = "llama"), on the sentencepiece library:
//   built from a sentencepiece .model file or from a GGUF file's vocabulary
//   (tokens, scores, token_type, bos/eos/unk ids), in which case an
//   equivalent sentencepiece model is assembled in memory. Encoding matches
//   llama.cpp's SPM tokenizer: a dummy prefix space, no whitespace
//   collapsing, byte fallback for unknown characters.
// - Byte-level BPE (tokenizer.ggml.model = "gpt2", as Qwen2 and GPT-2 use),
//   on dwell's own engine: tokenizer.ggml.tokens, merges, token_type,
//   bos/eos/unk/padding ids, add_bos_token and the pre-tokenizer named by
//   tokenizer.ggml.pre. Encoding matches llama.cpp's BPE tokenizer.
//
// decode(encode(s)) == s for any valid UTF-8 s (with parse_special, as long
// as s holds no control token's text: those decode to nothing), except that
// an SPM vocabulary reads U+2581 in the text as the space it stands for.
//
// Thread-safety: encode/decode are const and safe from many threads.
// StreamDecoder is not thread-safe; use one per generation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/base/export.hpp"

namespace dwell {

class GgufFile;

class DWELL_CORE_API Tokenizer {
public:
    static Tokenizer from_gguf(const GgufFile& file);  // throws dwell::Error
    static Tokenizer from_model_file(const std::filesystem::path& path);
    // A serialized sentencepiece ModelProto, e.g. embedded in a dwell pack;
    // `source` names where it came from in messages.
    static Tokenizer from_serialized_model(std::string_view serialized, const std::string& source);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // add_bos: prepend BOS if the vocabulary asks for it (wants_bos()).
    // parse_special: the text of a control or unknown token (e.g.
    // "<|im_start|>") becomes that token, as llama.cpp does by default;
    // without it such text is tokenized as text. A BPE vocabulary's
    // user-defined tokens are cut out of the text either way (sentencepiece
    // matches an SPM one's itself).
    std::vector<int32_t> encode(std::string_view text, bool add_bos,
                                bool parse_special = false) const;
    std::string decode(std::span<const int32_t> ids) const;
    // The model as a serialized sentencepiece ModelProto (what a pack embeds);
    // from_serialized_model() of it gives a tokenizer with the same ids.
    // Throws dwell::Error (DWELL_ERR_UNSUPPORTED) for a BPE vocabulary.
    std::string serialized_model() const;
    // The raw bytes a token stands for: for SPM "▁" as a space and <0xNN> as
    // that byte; for BPE the bytes behind its byte-alphabet text ("Ġ" is a
    // space). Empty for control tokens.
    std::string token_bytes(int32_t id) const;
    // The token's text as the vocabulary stores it.
    std::string_view piece(int32_t id) const;

    int32_t n_vocab() const;
    int32_t bos() const;
    int32_t eos() const;
    int32_t unk() const;  // -1 when the vocabulary has none
    bool is_control(int32_t id) const;
    // Whether encode(text, true) prepends BOS: always for SPM; for BPE when
    // tokenizer.ggml.add_bos_token says so (Qwen2 files say no).
    bool wants_bos() const;
    bool is_byte_level_bpe() const;

private:
    friend class StreamDecoder;  // shares decode()'s per-token tables
    struct DWELL_CORE_LOCAL Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    static Tokenizer from_bpe_gguf(const GgufFile& file);
    std::unique_ptr<Impl> impl_;
};

// A sentencepiece error message as one line a user can act on: without
// the library's source location and check expression, and with the common
// failures named ("protobuf parse failed": not a model file at all).
DWELL_CORE_API std::string sentencepiece_error_text(std::string_view message);

// Turns generated ids into text as they arrive: emits only whole UTF-8
// characters, drops the dummy-prefix space of the first piece (SPM only:
// BPE adds none, so a leading space is real), and prints nothing for
// control tokens. Concatenating every push() and finish() equals
// tokenizer.decode(all ids).
class DWELL_CORE_API StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tokenizer, bool strip_leading_space = true);
    std::string push(int32_t id);
    std::string finish();  // flushes incomplete bytes (as U+FFFD)

private:
    const Tokenizer* tokenizer_;
    bool at_start_;
    std::string pending_;
};

}  // namespace dwell
