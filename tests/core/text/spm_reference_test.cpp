// SPM as Gemma 3's files use it: token ids must equal llama.cpp's for the
// same GGUF file.
//
// The vocabulary is the synthetic Gemma-3-like one (make_synthetic_spm_vocab:
// byte fallback, control and user-defined tokens, no dummy prefix, BOS
// added), written to a vocab-only GGUF file; the reference ids in
// tests/data/bpe/reference_ids.txt (lines "spm-gemma3 ...") were computed
// from that very file by llama-tokenize (tests/data/bpe/README.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/gguf_writer.hpp"
#include "dwell/tools/synthetic_spm_vocab.hpp"
#include "reference_texts.hpp"

namespace dwell {
namespace {

using Ids = std::vector<int32_t>;
using reference_texts::texts;

constexpr int64_t kBpeVocabSize = 2000;
constexpr uint64_t kVocabSeed = 1;
constexpr const char* kName = "spm-gemma3";

std::string fingerprint(const SpmVocab& v) {
    reference_texts::Fnv1a64 h;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        h.mix(v.tokens[i]);
        h.mix(std::to_string(v.types[i]));
        h.mix(std::to_string(v.scores[i]));
    }
    std::ostringstream out;
    out << "spm_vocab n_bpe=" << kBpeVocabSize << " seed=" << kVocabSeed
        << " tokens=" << v.tokens.size() << " fnv1a64=" << std::hex << h.value();
    return out.str();
}

void write_vocab_file(const SpmVocab& v, const std::filesystem::path& path) {
    GgufWriter w;
    // llama.cpp loads a vocabulary-only file with no hyperparameters.
    w.add_string("general.architecture", "gemma3");
    write_spm_vocab(w, v);
    w.write(path);
}

class SpmReference : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        vocab_ = std::make_unique<SpmVocab>(make_synthetic_spm_vocab(kBpeVocabSize, kVocabSeed));
        path_ = std::filesystem::temp_directory_path() /
                ("dwell_spm_" + std::to_string(::getpid()) + ".gguf");
        write_vocab_file(*vocab_, path_);
        tok_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(GgufFile::open(path_)));
        // DWELL_BPE_EXPORT_DIR: where tests/data/bpe/regenerate.sh wants the
        // file that llama-tokenize is to read.
        if (const char* dir = std::getenv("DWELL_BPE_EXPORT_DIR")) {
            write_vocab_file(*vocab_, std::filesystem::path(dir) / "vocab_spm-gemma3.gguf");
            std::ofstream(std::filesystem::path(dir) / "spm_fingerprint.txt")
                << fingerprint(*vocab_) << "\n";
        }
    }
    static void TearDownTestSuite() {
        tok_.reset();
        std::error_code ec;
        std::filesystem::remove(path_, ec);
    }
    static const Tokenizer& tok() { return *tok_; }
    static const SpmVocab& vocab() { return *vocab_; }

private:
    static inline std::unique_ptr<SpmVocab> vocab_;
    static inline std::unique_ptr<Tokenizer> tok_;
    static inline std::filesystem::path path_;
};

TEST_F(SpmReference, IdsEqualLlamaCpp) {
    ASSERT_GE(texts().size(), 50u);
    bool saw_fingerprint = false;
    for (const std::string& line :
         reference_texts::read_lines(reference_texts::data_dir() / "reference_ids.txt")) {
        if (line.rfind("spm_vocab ", 0) == 0) {
            ASSERT_EQ(line, fingerprint(vocab()))
                << "the synthetic SPM vocabulary changed: recompute reference_ids.txt with "
                   "tests/data/bpe/regenerate.sh";
            saw_fingerprint = true;
        }
    }
    EXPECT_TRUE(saw_fingerprint);
    size_t compared = 0;
    size_t equal = 0;
    for (const auto& r : reference_texts::reference_lines(kName)) {
        const Ids got = tok().encode(texts()[r.index], /*add_bos=*/true, r.special);
        EXPECT_EQ(got, r.ids) << (r.special ? "special" : "plain") << " text " << r.index << ": '"
                              << texts()[r.index] << "'";
        ++compared;
        equal += got == r.ids ? 1 : 0;
    }
    EXPECT_EQ(compared, texts().size() * 2);
    std::printf("[ reference ] %s: %zu of %zu encodings equal llama-tokenize's\n", kName, equal,
                compared);
}

// What the references rest on, stated directly.
TEST_F(SpmReference, GemmaConventions) {
    const Tokenizer& t = tok();
    EXPECT_EQ(t.bos(), 2);
    EXPECT_EQ(t.eos(), 1);
    EXPECT_EQ(t.unk(), 3);
    EXPECT_TRUE(t.wants_bos());
    // No dummy prefix: "a" is not "▁a".
    const Ids a = t.encode("a", false);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(t.piece(a[0]), "a");
    // Control tokens only with parse_special; user-defined ones always.
    const int32_t start = 4, table = 8;
    EXPECT_EQ(t.piece(start), "<start_of_turn>");
    EXPECT_EQ(t.piece(table), "<table>");
    EXPECT_EQ(t.encode("<start_of_turn>", false, true), (Ids{start}));
    EXPECT_NE(t.encode("<start_of_turn>", false, false), (Ids{start}));
    EXPECT_EQ(t.encode("<table>", false, false), (Ids{table}));
    EXPECT_TRUE(t.is_control(start));
    EXPECT_FALSE(t.is_control(table));
    // A character with no piece is its UTF-8 bytes' <0xNN> tokens.
    const Ids emoji = t.encode("\xF0\x9F\xA7\x91", false);  // U+1F9D1
    ASSERT_EQ(emoji.size(), 4u);
    EXPECT_EQ(t.piece(emoji[0]), "<0xF0>");
    EXPECT_EQ(t.piece(emoji[3]), "<0x91>");
    EXPECT_EQ(t.decode(emoji), "\xF0\x9F\xA7\x91");
    // So is a byte that starts no character (not U+FFFD's bytes).
    const Ids bad = t.encode("\xFF", false);
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_EQ(t.piece(bad[0]), "<0xFF>");
}

TEST_F(SpmReference, BosOnlyWhenTheVocabularyAsksForIt) {
    SpmVocab v = vocab();
    v.add_bos = false;
    const auto path = std::filesystem::temp_directory_path() /
                      ("dwell_spm_nobos_" + std::to_string(::getpid()) + ".gguf");
    write_vocab_file(v, path);
    const Tokenizer t = Tokenizer::from_gguf(GgufFile::open(path));
    std::error_code ec;
    std::filesystem::remove(path, ec);
    EXPECT_FALSE(t.wants_bos());
    EXPECT_EQ(t.encode("Hello", true), t.encode("Hello", false));
    const Ids with = tok().encode("Hello", true);
    ASSERT_FALSE(with.empty());
    EXPECT_EQ(with.front(), v.bos);
    EXPECT_EQ(Ids(with.begin() + 1, with.end()), t.encode("Hello", false));
}

TEST_F(SpmReference, DecodeGivesBackTheText) {
    for (const std::string& text : texts()) {
        if (!reference_texts::is_valid_utf8(text)) continue;  // decodes to U+FFFD
        // A U+2581 of the text's own is a space to SPM, as it is to llama.cpp.
        if (text.find("\xE2\x96\x81") != std::string::npos) continue;
        EXPECT_EQ(tok().decode(tok().encode(text, true)), text) << "'" << text << "'";
    }
}

}  // namespace
}  // namespace dwell
