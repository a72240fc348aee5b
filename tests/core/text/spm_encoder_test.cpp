// SpmEncoder on hand-made vocabularies: the merge order and the byte
// fallback, worked out by hand.
#include "dwell/core/text/spm_encoder.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace dwell {
namespace {

using Ids = std::vector<int32_t>;

// Tokens 0..255 are <0x00>..<0xFF>; `extra` follows from 256 with `scores`.
SpmEncoder make(const std::vector<std::string>& extra, const std::vector<float>& scores) {
    std::vector<std::string> pieces;
    std::vector<float> all_scores;
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        pieces.emplace_back(name);
        all_scores.push_back(0.0f);
    }
    pieces.insert(pieces.end(), extra.begin(), extra.end());
    all_scores.insert(all_scores.end(), scores.begin(), scores.end());
    return SpmEncoder(pieces, all_scores, 0);
}

Ids encode(const SpmEncoder& e, const std::string& text) {
    Ids out;
    e.encode(text, out);
    return out;
}

TEST(SpmEncoder, HighestScoreFirst) {
    //                      256  257  258  259   260   261
    const SpmEncoder e = make({"a", "b", "c", "ab", "bc", "abc"}, {0, 0, 0, -2, -1, -3});
    // "bc" (-1) beats "ab" (-2); then "a"+"bc" = "abc".
    EXPECT_EQ(encode(e, "abc"), (Ids{261}));
    const SpmEncoder f = make({"a", "b", "c", "ab", "bc", "abc"}, {0, 0, 0, -1, -2, -3});
    // "ab" first; "ab"+"c" is "abc" too.
    EXPECT_EQ(encode(f, "abc"), (Ids{261}));
    const SpmEncoder g = make({"a", "b", "c", "ab", "bc"}, {0, 0, 0, -1, -2});
    EXPECT_EQ(encode(g, "abc"), (Ids{259, 258}));
    EXPECT_EQ(encode(g, "bcab"), (Ids{260, 259}));
}

TEST(SpmEncoder, EqualScoresLeftmostFirst) {
    const SpmEncoder e = make({"a", "aa"}, {0, -1});
    EXPECT_EQ(encode(e, "aaa"), (Ids{257, 256}));
    EXPECT_EQ(encode(e, "aaaaa"), (Ids{257, 257, 256}));
}

TEST(SpmEncoder, CharactersWithoutATokenBecomeBytes) {
    const SpmEncoder e = make({"a"}, {0});
    // "é" = C3 A9: no token, so its two byte tokens.
    EXPECT_EQ(encode(e, "a\xC3\xA9"), (Ids{256, 0xC3, 0xA9}));
    // A continuation byte with no lead is a symbol of its own.
    EXPECT_EQ(encode(e,
                     "\x80"
                     "a"),
              (Ids{0x80, 256}));
    // A lead byte takes the bytes its top bits announce, continuations or
    // not (as llama.cpp reads it): 0xFF announces four, so the "a" after it
    // comes out as a byte too.
    EXPECT_EQ(encode(e,
                     "\xFF"
                     "a"),
              (Ids{0xFF, 'a'}));
    // A lead byte whose character is cut short takes what is left.
    EXPECT_EQ(encode(e, "a\xE4\xBD"), (Ids{256, 0xE4, 0xBD}));
    EXPECT_TRUE(encode(e, "").empty());
}

TEST(SpmEncoder, WithoutByteTokensUnknown) {
    // No <0xNN> tokens: a byte falls back to its one-byte token, else to
    // the unknown id.
    const SpmEncoder e(std::vector<std::string>{"<unk>", "a", "\xC3"}, {0, 0, 0}, 0);
    Ids out;
    e.encode("a\xC3\xA9", out);
    EXPECT_EQ(out, (Ids{1, 2, 0}));
}

}  // namespace
}  // namespace dwell
