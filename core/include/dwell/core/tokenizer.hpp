// Text <-> token ids on the sentencepiece library.
//
// Built either from a sentencepiece .model file or from a GGUF file's SPM
// vocabulary (tokenizer.ggml.model = "llama": tokens, scores, token_type,
// bos/eos/unk ids), in which case an equivalent sentencepiece model is
// assembled in memory. Encoding matches llama.cpp's SPM tokenizer: a dummy
// prefix space, no whitespace collapsing, byte fallback for unknown
// characters; decode(encode(s)) == s for any valid UTF-8 s.
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

namespace dwell {

class GgufFile;

class Tokenizer {
public:
    static Tokenizer from_gguf(const GgufFile& file);  // throws dwell::Error
    static Tokenizer from_model_file(const std::filesystem::path& path);
    // A serialized sentencepiece ModelProto, e.g. embedded in a dwell pack;
    // `source` names where it came from in messages.
    static Tokenizer from_serialized_model(std::string_view serialized, const std::string& source);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    std::vector<int32_t> encode(std::string_view text, bool add_bos) const;
    std::string decode(std::span<const int32_t> ids) const;
    // The model as a serialized sentencepiece ModelProto (what a pack embeds);
    // from_serialized_model() of it gives a tokenizer with the same ids.
    std::string serialized_model() const;
    // The raw bytes a token stands for ("▁" as a space, <0xNN> as that byte).
    std::string token_bytes(int32_t id) const;
    std::string_view piece(int32_t id) const;

    int32_t n_vocab() const;
    int32_t bos() const;
    int32_t eos() const;
    int32_t unk() const;
    bool is_control(int32_t id) const;

private:
    friend class StreamDecoder;  // shares decode()'s per-token tables
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Turns generated ids into text as they arrive: emits only whole UTF-8
// characters, drops the dummy-prefix space of the first piece, and prints
// nothing for control tokens. Concatenating every push() and finish() equals
// tokenizer.decode(all ids).
class StreamDecoder {
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
