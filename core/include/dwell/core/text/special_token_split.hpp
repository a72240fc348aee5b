// Cuts special tokens (control and user-defined tokens such as
// "<|im_start|>") out of text before it is tokenized, as llama.cpp does:
// the longest special text first, each found left to right in the text not
// yet cut, so a special token inside a longer one's text is never seen.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dwell {

struct SpecialToken {
    std::string text;  // non-empty
    int32_t id;
};

// Sorts longest text first (lower id first among equal lengths): the order
// split_at_special_tokens() wants.
void sort_special_tokens(std::vector<SpecialToken>& specials);

// A run of ordinary text (id < 0), or one special token.
struct TextPiece {
    std::string_view text;
    int32_t id = -1;
};

// `text` as ordinary runs and special tokens, in order; `specials` sorted by
// sort_special_tokens(). The views point into `text`.
std::vector<TextPiece> split_at_special_tokens(std::string_view text,
                                               std::span<const SpecialToken> specials);

}  // namespace dwell
