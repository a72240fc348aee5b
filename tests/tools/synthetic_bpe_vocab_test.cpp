// The synthetic byte-level BPE vocabulary at a real model's size: the tokens
// the training text cannot yield are reserved tokens after the special ones,
// which a tokenizer loads and text never encodes to.
#include "dwell/tools/synthetic_bpe_vocab.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/gguf_writer.hpp"

namespace dwell {
namespace {

TEST(SyntheticBpeVocab, RealSizesArePaddedWithReservedTokens) {
    const BpeVocab small = make_synthetic_bpe_vocab(1024, 1);
    const BpeVocab big = make_synthetic_bpe_vocab(151936, 1);
    ASSERT_EQ(big.tokens.size(), 151936u);
    ASSERT_EQ(big.types.size(), 151936u);
    // What the training text yields comes first, then the special tokens,
    // then the reserved ones: the special ids do not depend on the size.
    const size_t n_special = small.tokens.size() - static_cast<size_t>(small.eos);
    const auto first_reserved = static_cast<size_t>(big.eos) + n_special;
    ASSERT_LT(first_reserved, big.tokens.size());
    EXPECT_EQ(big.tokens[static_cast<size_t>(big.eos)], "<|endoftext|>");
    EXPECT_EQ(big.tokens[first_reserved - 1], "</tool_call>");
    EXPECT_EQ(big.tokens[first_reserved], "<|reserved_0|>");
    EXPECT_EQ(big.tokens.back(),
              "<|reserved_" + std::to_string(big.tokens.size() - first_reserved - 1) + "|>");
    for (size_t i = first_reserved; i < big.types.size(); ++i) ASSERT_EQ(big.types[i], 5) << i;

    GgufWriter w;
    w.add_string("general.architecture", "qwen2");
    write_bpe_vocab(w, big, "qwen2");
    const auto path = std::filesystem::temp_directory_path() /
                      ("dwell_big_vocab_" + std::to_string(getpid()) + ".gguf");
    w.write(path);
    const Tokenizer t = Tokenizer::from_gguf(GgufFile::open(path));
    std::filesystem::remove(path);
    EXPECT_EQ(t.n_vocab(), 151936);
    const std::string text = "Hello <|reserved_7|> world, 12345 and \xe4\xbd\xa0\xe5\xa5\xbd";
    for (int32_t id : t.encode(text, false))
        EXPECT_LT(static_cast<size_t>(id), first_reserved) << "text encoded to a reserved token";

    EXPECT_THROW(make_synthetic_bpe_vocab(1'000'001, 1), Error);
}

}  // namespace
}  // namespace dwell
