// The words the gpt-4o and smollm pre-tokenizers make, worked out by hand
// from llama.cpp's patterns (src/llama-vocab.cpp at de3ff81); the ids that
// follow from them are checked against llama-tokenize in
// bpe_tokenizer_test.cpp.
#include "dwell/core/text/bpe_pre_tokenizer.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dwell::bpe {
namespace {

std::vector<std::string> words(PreTokenizerKind kind, std::string_view text) {
    std::vector<std::string> out;
    PreTokenizer(kind).split(text, [&](std::string_view w) { out.emplace_back(w); });
    return out;
}

TEST(BpePreTokenizer, Gpt4oWords) {
    // Camel case splits before an upper-case letter that lower-case ones
    // follow; a contraction stays with its word; digits go in threes; a
    // newline and '/' stay with the punctuation before them; a Cyrillic
    // case change does not split (llama.cpp gives only ASCII letters a case).
    const std::vector<std::string> expected = {
        "Hello",   "World",
        " don't",  " XMLHttp",
        "Request", " \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82\xD0\x9C\xD0\xB8\xD1\x80",
        " ",       "123",
        "45",      " a",
        ".\n/",    "b"};
    EXPECT_EQ(words(PreTokenizerKind::gpt4o,
                    "HelloWorld don't XMLHttpRequest "
                    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82\xD0\x9C\xD0\xB8\xD1\x80"
                    " 12345 a.\n/b"),
              expected);
    EXPECT_EQ(pre_tokenizer_kind("gpt-4o"), PreTokenizerKind::gpt4o);
}

TEST(BpePreTokenizer, SmollmDigitsAlone) {
    // Every digit a word, and the GPT-2 pattern on the text between them.
    EXPECT_EQ(words(PreTokenizerKind::smollm, "a 12 b1"),
              (std::vector<std::string>{"a", " ", "1", "2", " b", "1"}));
    EXPECT_EQ(words(PreTokenizerKind::gpt2, "a 12 b1"),
              (std::vector<std::string>{"a", " 12", " b", "1"}));
    EXPECT_EQ(pre_tokenizer_kind("smollm"), PreTokenizerKind::smollm);
}

TEST(BpePreTokenizer, Lfm2IsLlama3) {
    EXPECT_EQ(pre_tokenizer_kind("lfm2"), PreTokenizerKind::llama3);
}

}  // namespace
}  // namespace dwell::bpe
