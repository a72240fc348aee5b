// The text the synthetic byte-level BPE vocabulary is trained on
// (synthetic_bpe_vocab.hpp): English prose with contractions, punctuation
// and numbers, Chinese, Japanese, Korean, accented Latin, Cyrillic, Arabic,
// emoji and some code, so that merges of every kind exist, multi-byte
// characters included.
#pragma once

#include <span>
#include <string_view>

namespace dwell {

// The corpus as paragraphs, in a fixed order.
std::span<const std::string_view> synthetic_bpe_corpus();

}  // namespace dwell
