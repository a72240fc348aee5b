// The first step of byte-level BPE: splitting text into words (runs of
// letters, digits, punctuation, whitespace) that merges never cross. Each
// supported tokenizer.ggml.pre value names one splitting pattern:
//   gpt2 kind:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   qwen2 kind: the same contractions in either case, [^\r\n\p{L}\p{N}]?\p{L}+,
//               single digits \p{N}, ?[^\s\p{L}\p{N}]+[\r\n]*, \s*[\r\n]+, \s+(?!\S), \s+
//   llama3 kind: qwen2's with digits in runs of up to three, \p{N}{1,3}; a
//               word that is a token is that token, merges unapplied
//               (llama.cpp's ignore_merges), and BOS is added unless the
//               file says otherwise
//   smollm kind: every digit a word (\p{N}), then the gpt2 pattern on the
//               text between digits
//   gpt4o kind: letters as [^\r\n\p{L}\p{N}]? then "upper" letters then
//               "lower" ones (or at least one upper, then lower ones), each
//               run with an optional contraction ('s 't 're 've 'm 'll 'd,
//               either case); \p{N}{1,3}, ?[^\s\p{L}\p{N}]+[\r\n/]*,
//               \s*[\r\n]+, \s+(?!\S), \s+. Only ASCII letters have a case
//               (llama.cpp's reading), so non-ASCII letters join either run
// \s is Unicode's White_Space property; the patterns run on PCRE2 (Unicode
// categories from its tables, Unicode 14 in Debian 12's 10.42).
//
// Thread-safety: split() is const and safe from many threads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dwell/core/base/export.hpp"

namespace dwell::bpe {

enum class PreTokenizerKind { gpt2, qwen2, llama3, smollm, gpt4o };

// The kind a tokenizer.ggml.pre value selects; nullopt when unsupported.
DWELL_CORE_API std::optional<PreTokenizerKind> pre_tokenizer_kind(std::string_view pre);
// The supported tokenizer.ggml.pre values, for messages: "'gpt-2', ...".
DWELL_CORE_API std::string supported_pre_tokenizers();

class DWELL_CORE_API PreTokenizer {
public:
    explicit PreTokenizer(PreTokenizerKind kind);
    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;
    ~PreTokenizer();

    // Calls on_word with each word of `text` in order. Malformed UTF-8 is
    // read leniently, as llama.cpp reads it, so that ids match: a byte that
    // does not start a character (or starts one that the next bytes do not
    // continue) becomes U+FFFD, and overlong forms are read as the code point
    // they spell, so the words' bytes then differ from `text`'s.
    void split(std::string_view text, const std::function<void(std::string_view)>& on_word) const;

private:
    struct DWELL_CORE_LOCAL Pattern;
    std::unique_ptr<Pattern> pattern_;
};

}  // namespace dwell::bpe
