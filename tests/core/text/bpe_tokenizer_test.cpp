// Byte-level BPE: token ids must equal llama.cpp's for the same GGUF file.
//
// The vocabulary is the synthetic one (make_synthetic_bpe_vocab), written to
// vocab-only GGUF files, one per tokenizer.ggml.pre of kPres; the
// reference ids in tests/data/bpe/reference_ids.txt were computed from those
// very files by llama.cpp's llama-tokenize (tests/data/bpe/README.md), with
// and without parsing special tokens. The file records the vocabulary's
// fingerprint, so a change to the generator shows up as a stale reference
// rather than as wrong ids.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/text/bpe_byte_map.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/status.h"
#include "dwell/tools/gguf_writer.hpp"
#include "dwell/tools/synthetic_bpe_vocab.hpp"
#include "reference_texts.hpp"
#include "test_paths.hpp"

namespace dwell {
namespace {

using Ids = std::vector<int32_t>;
using reference_texts::data_dir;
using reference_texts::is_valid_utf8;
using reference_texts::read_lines;
using reference_texts::texts;

constexpr int64_t kVocabSize = 2000;
constexpr uint64_t kVocabSeed = 1;
// Every tokenizer.ggml.pre with reference ids; "lfm2" is Llama 3's pattern
// and merge rule under LFM2's name, "gpt-4o" the one Phi-4-mini files name.
const char* const kPres[] = {"qwen2", "gpt-2", "llama-bpe", "lfm2", "smollm", "gpt-4o"};

// The vocabularies that take the llama3 kind (ignore_merges) get the
// whole-word tokens that show it.
bool uses_llama3_vocab(std::string_view pre) {
    return pre == "llama-bpe" || pre == "lfm2";
}
bool uses_split_vocab(std::string_view pre) {
    return pre == "smollm" || pre == "gpt-4o";
}

// One line naming the generator's arguments and a hash of what it made.
std::string fingerprint(const BpeVocab& v) {
    reference_texts::Fnv1a64 h;
    for (size_t i = 0; i < v.tokens.size(); ++i) {
        h.mix(v.tokens[i]);
        h.mix(std::to_string(v.types[i]));
    }
    for (const std::string& m : v.merges) h.mix(m);
    std::ostringstream out;
    out << "vocab n_vocab=" << kVocabSize << " seed=" << kVocabSeed << " tokens=" << v.tokens.size()
        << " merges=" << v.merges.size() << " fnv1a64=" << std::hex << h.value();
    return out.str();
}

void write_vocab_file(const BpeVocab& v, const std::string& pre,
                      const std::filesystem::path& path) {
    GgufWriter w;
    // llama.cpp loads a vocabulary-only file with no hyperparameters.
    w.add_string("general.architecture", "qwen2");
    write_bpe_vocab(w, v, pre);
    w.write(path);
}

// The llama-bpe file's vocabulary: the synthetic one plus digit runs of two
// and three with their merges (what \p{N}{1,3} lets merge) and whole words
// no merge reaches (what ignore_merges takes as they are), appended so that
// the other ids stay.
BpeVocab llama3_vocab(BpeVocab v) {
    const auto has = [&](const std::string& t) {
        return std::find(v.tokens.begin(), v.tokens.end(), t) != v.tokens.end();
    };
    for (const auto& [left, right] : {std::pair<std::string, std::string>{"1", "2"},
                                      {"12", "3"},
                                      {"4", "5"},
                                      {"45", "6"},
                                      {"0", "0"},
                                      {"00", "0"}}) {
        if (has(left + right)) continue;
        v.tokens.push_back(left + right);
        v.types.push_back(1);
        v.merges.push_back(left + " " + right);
    }
    const std::string space = "\xC4\xA0";  // the byte alphabet's space
    for (const std::string& word : {std::string("multiple"), space + "between", space + "and"}) {
        if (has(word)) continue;
        v.tokens.push_back(word);
        v.types.push_back(1);
    }
    return v;
}

// The smollm and gpt-4o files' vocabulary: the synthetic one plus merges
// across the places where their patterns split otherwise than qwen2's and
// gpt-2's (digit runs; camel case and contractions; a newline and '/' after
// punctuation; a case change within Cyrillic, which llama.cpp's gpt-4o split
// does not see), ranked first so
// that they apply wherever their halves meet within a word. The tokens are
// appended, so that the other ids stay.
BpeVocab split_vocab(BpeVocab v) {
    std::vector<std::string> merges;
    for (const auto& [left, right] : {std::pair<std::string, std::string>{"1", "2"},
                                      {"12", "3"},
                                      {"4", "5"},
                                      {"o", "W"},
                                      {"p", "R"},
                                      {"n", "'"},
                                      {"N", "'"},
                                      {"\n", "/"},
                                      // "т" and "М" from their bytes, then "тМ"
                                      {"\xD1", "\x82"},
                                      {"\xD0", "\x9C"},
                                      {"\xD1\x82", "\xD0\x9C"}}) {
        const std::string l = bpe::bytes_to_alphabet(left);
        const std::string r = bpe::bytes_to_alphabet(right);
        if (std::find(v.tokens.begin(), v.tokens.end(), l + r) == v.tokens.end()) {
            v.tokens.push_back(l + r);
            v.types.push_back(1);
        }
        merges.push_back(l + " " + r);
    }
    merges.insert(merges.end(), v.merges.begin(), v.merges.end());
    v.merges = std::move(merges);
    return v;
}

// The synthetic vocabulary as GGUF files and tokenizers, made once; the
// files are removed with it.
struct SharedVocab {
    BpeVocab vocab = make_synthetic_bpe_vocab(kVocabSize, kVocabSeed);
    BpeVocab llama3 = llama3_vocab(vocab);
    BpeVocab split = split_vocab(vocab);
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("dwell_bpe_" + std::to_string(::getpid()));
    std::map<std::string, Tokenizer> tokenizers;

    SharedVocab() {
        std::filesystem::create_directories(dir);
        // DWELL_BPE_EXPORT_DIR: where tests/data/bpe/regenerate.sh wants the
        // files that llama-tokenize is to read.
        const char* env = std::getenv("DWELL_BPE_EXPORT_DIR");
        const std::string export_dir = env != nullptr ? env : "";
        for (const char* pre : kPres) {
            const auto path = dir / ("vocab_" + std::string(pre) + ".gguf");
            const BpeVocab& v = uses_llama3_vocab(pre)  ? llama3
                                : uses_split_vocab(pre) ? split
                                                        : vocab;
            write_vocab_file(v, pre, path);
            tokenizers.emplace(pre, Tokenizer::from_gguf(GgufFile::open(path)));
            if (!export_dir.empty()) {
                write_vocab_file(v, pre, std::filesystem::path(export_dir) / path.filename());
            }
        }
        if (!export_dir.empty()) {
            std::ofstream(std::filesystem::path(export_dir) / "fingerprint.txt")
                << fingerprint(vocab) << "\n";
        }
    }
    ~SharedVocab() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    SharedVocab(const SharedVocab&) = delete;
    SharedVocab& operator=(const SharedVocab&) = delete;
};

class BpeReference : public ::testing::Test {
protected:
    static void SetUpTestSuite() { shared_ = std::make_unique<SharedVocab>(); }
    static void TearDownTestSuite() { shared_.reset(); }
    static const Tokenizer& tok(const std::string& pre) { return shared_->tokenizers.at(pre); }
    static const BpeVocab& vocab() { return shared_->vocab; }
    static const std::filesystem::path& dir() { return shared_->dir; }

private:
    static inline std::unique_ptr<SharedVocab> shared_;
};

TEST_F(BpeReference, IdsEqualLlamaCpp) {
    ASSERT_GE(texts().size(), 50u);
    bool saw_fingerprint = false;
    for (const std::string& line : read_lines(data_dir() / "reference_ids.txt")) {
        if (line.rfind("vocab ", 0) == 0) {
            ASSERT_EQ(line, fingerprint(vocab()))
                << "the synthetic vocabulary changed: recompute reference_ids.txt with "
                   "tests/data/bpe/regenerate.sh";
            saw_fingerprint = true;
        }
    }
    EXPECT_TRUE(saw_fingerprint);
    for (const char* pre : kPres) {
        size_t compared = 0;
        size_t equal = 0;
        for (const auto& r : reference_texts::reference_lines(pre)) {
            const Ids got = tok(pre).encode(texts()[r.index], /*add_bos=*/true, r.special);
            EXPECT_EQ(got, r.ids) << pre << (r.special ? " special" : " plain") << " text "
                                  << r.index << ": '" << texts()[r.index] << "'";
            ++compared;
            equal += got == r.ids ? 1 : 0;
        }
        // Every text, with and without special-token parsing.
        EXPECT_EQ(compared, texts().size() * 2) << pre;
        std::printf("[ reference ] %s: %zu of %zu encodings equal llama-tokenize's\n", pre, equal,
                    compared);
    }
}

TEST_F(BpeReference, DecodeGivesBackTheText) {
    for (const char* pre : kPres) {
        for (const std::string& text : texts()) {
            if (!is_valid_utf8(text)) continue;  // MalformedUtf8ReadsLikeLlamaCpp
            EXPECT_EQ(tok(pre).decode(tok(pre).encode(text, false)), text) << pre;
            // Control tokens decode to nothing; the other texts survive
            // special-token parsing too.
            if (text.find("<|") == std::string::npos) {
                EXPECT_EQ(tok(pre).decode(tok(pre).encode(text, false, true)), text) << pre;
            }
        }
    }
}

TEST_F(BpeReference, MalformedUtf8ReadsLikeLlamaCpp) {
    // Each byte that starts no character becomes U+FFFD; an overlong form
    // reads as the character it spells; a surrogate stays three bytes, which
    // decode() then prints as three U+FFFD.
    const std::string fffd = "\xEF\xBF\xBD";
    const std::pair<std::string, std::string> cases[] = {
        {"bad \xFF byte \xC3 end", "bad " + fffd + " byte " + fffd + " end"},
        {"cut \xE4\xBD", "cut " + fffd + fffd},
        {"\xC0\xAFslash", "/slash"},
        {"\xED\xA0\x80x", fffd + fffd + fffd + "x"},
    };
    for (const char* pre : kPres) {
        for (const auto& [text, decoded] : cases) {
            EXPECT_EQ(tok(pre).decode(tok(pre).encode(text, false)), decoded) << pre;
        }
    }
}

TEST_F(BpeReference, StreamDecoderHoldsBackSplitCharacters) {
    const Tokenizer& t = tok("qwen2");
    // An emoji ZWJ sequence and Korean: characters the vocabulary splits.
    const std::string text =
        "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 \xEC\x95\x88\xEB\x85\x95 \xF0\x9F\x87\xAF";
    const Ids ids = t.encode(text, false);
    size_t partial_tokens = 0;
    StreamDecoder dec(t);
    std::string out;
    for (int32_t id : ids) {
        const std::string bytes = t.token_bytes(id);
        const std::string chunk = dec.push(id);
        EXPECT_TRUE(is_valid_utf8(chunk)) << "chunk after id " << id;
        if (!is_valid_utf8(bytes)) ++partial_tokens;
        out += chunk;
    }
    out += dec.finish();
    EXPECT_GT(partial_tokens, 0u) << "no token splits a character: the test shows nothing";
    EXPECT_EQ(out, text);

    // The text is held back until its character is whole: the first
    // emoji's four bytes arrive in more than one token.
    StreamDecoder first(t);
    EXPECT_EQ(first.push(ids[0]), "");
}

TEST_F(BpeReference, StreamDecoderKeepsALeadingSpace) {
    // BPE has no dummy prefix: a leading space is the text's own.
    for (const char* pre : kPres) {
        const Ids ids = tok(pre).encode(" leading space", false);
        StreamDecoder dec(tok(pre));  // strip_leading_space defaults to true
        std::string out;
        for (int32_t id : ids) out += dec.push(id);
        out += dec.finish();
        EXPECT_EQ(out, " leading space") << pre;
        EXPECT_EQ(tok(pre).decode(ids), " leading space") << pre;
    }
}

TEST_F(BpeReference, SpecialTokens) {
    const Tokenizer& t = tok("qwen2");
    const int32_t n = t.n_vocab();
    ASSERT_EQ(n, kVocabSize);
    const int32_t endoftext = n - 5, im_start = n - 4, im_end = n - 3, tool_call = n - 2;
    EXPECT_EQ(t.piece(im_start), "<|im_start|>");
    EXPECT_EQ(t.piece(tool_call), "<tool_call>");
    EXPECT_EQ(t.eos(), endoftext);
    EXPECT_EQ(t.bos(), endoftext);
    EXPECT_EQ(t.unk(), -1);
    EXPECT_TRUE(t.is_control(im_start));
    EXPECT_TRUE(t.is_control(endoftext));
    EXPECT_FALSE(t.is_control(tool_call));  // user-defined: printed as text
    EXPECT_FALSE(t.wants_bos());
    EXPECT_TRUE(t.is_byte_level_bpe());

    const Ids ids = t.encode("<|im_start|>user<tool_call><|im_end|>", false, true);
    ASSERT_EQ(ids.size(), 4u);
    EXPECT_EQ(ids.front(), im_start);
    EXPECT_EQ(ids[2], tool_call);
    EXPECT_EQ(ids.back(), im_end);
    EXPECT_EQ(t.decode(ids), "user<tool_call>");
    // Without parse_special control text is text, user-defined still a token.
    const Ids plain = t.encode("<|im_start|><tool_call>", false);
    EXPECT_EQ(plain.back(), tool_call);
    EXPECT_GT(plain.size(), 2u);
    EXPECT_EQ(t.decode(plain), "<|im_start|><tool_call>");

    // The byte alphabet: "Ġ" is a space, "Ċ" a newline.
    for (int32_t id = 0; id < 256; ++id) EXPECT_EQ(t.token_bytes(id).size(), 1u) << id;
    const Ids space = t.encode(" ", false);
    ASSERT_EQ(space.size(), 1u);
    EXPECT_EQ(t.piece(space[0]), "\xC4\xA0");
    EXPECT_EQ(t.token_bytes(space[0]), " ");
    const Ids newline = t.encode("\n", false);
    ASSERT_EQ(newline.size(), 1u);
    EXPECT_EQ(t.piece(newline[0]), "\xC4\x8A");
    EXPECT_EQ(t.token_bytes(newline[0]), "\n");
}

TEST_F(BpeReference, BosOnlyWhenTheVocabularyAsksForIt) {
    EXPECT_EQ(tok("qwen2").encode("Hello", true), tok("qwen2").encode("Hello", false));
    BpeVocab v = vocab();
    v.add_bos = true;
    const auto path = dir() / "add_bos.gguf";
    write_vocab_file(v, "qwen2", path);
    const Tokenizer t = Tokenizer::from_gguf(GgufFile::open(path));
    EXPECT_TRUE(t.wants_bos());
    const Ids with = t.encode("Hello", true);
    ASSERT_FALSE(with.empty());
    EXPECT_EQ(with.front(), v.bos);
    EXPECT_EQ(Ids(with.begin() + 1, with.end()), t.encode("Hello", false));
}

TEST_F(BpeReference, LongRunsOfOneKind) {
    // One word each, far longer than any in the references: the pattern
    // matcher and the merge loop must cope.
    for (const char* pre : kPres) {
        for (const std::string& text :
             {std::string(1 << 16, ' '), std::string(1 << 16, 'a'), std::string(1 << 14, '7')}) {
            EXPECT_EQ(tok(pre).decode(tok(pre).encode(text, false)), text) << pre;
        }
    }
}

TEST_F(BpeReference, NoPackForm) {
    try {
        (void)tok("qwen2").serialized_model();
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_UNSUPPORTED);
        EXPECT_NE(std::string(e.what()).find("byte-level BPE"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("vocab_qwen2.gguf"), std::string::npos) << e.what();
    }
}

// ---------------------------------------------------------------------------
// Merge order on a hand-made vocabulary: lowest rank first, not longest.

// A vocabulary file of `tokens` and `merges` (gpt-2 pre-tokenizer).
// No merges key when `merges` is nullopt, no pre key when `pre` is empty.
std::filesystem::path write_small_vocab(const std::string& name,
                                        const std::vector<std::string>& tokens,
                                        const std::optional<std::vector<std::string>>& merges,
                                        const std::string& pre = "gpt-2") {
    const auto path = std::filesystem::temp_directory_path() /
                      ("dwell_bpe_small_" + std::to_string(::getpid()) + "_" + name + ".gguf");
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    if (!pre.empty()) w.add_string("tokenizer.ggml.pre", pre);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    if (merges) w.add_string_array("tokenizer.ggml.merges", *merges);
    w.write(path);
    return path;
}

struct RemoveOnExit {
    std::filesystem::path path;
    ~RemoveOnExit() {
        std::error_code ec;
        std::filesystem::remove(path, ec);
    }
};

TEST(BpeMerges, LowestRankFirst) {
    const std::vector<std::string> tokens = {"a", "b", "c", "ab", "bc", "abc", "\xC4\xA0"};
    {
        RemoveOnExit f{write_small_vocab("bc_first", tokens, {{"b c", "a b", "a bc"}})};
        const Tokenizer t = Tokenizer::from_gguf(GgufFile::open(f.path));
        EXPECT_EQ(t.encode("abc", false), (Ids{5}));  // "b c" first, then "a bc"
        EXPECT_EQ(t.encode("ab", false), (Ids{3}));
        EXPECT_EQ(t.encode("cab", false), (Ids{2, 3}));  // one word: c ab
        EXPECT_EQ(t.encode("a bc", false), (Ids{0, 6, 4}));
    }
    {
        RemoveOnExit f{write_small_vocab("ab_first", tokens, {{"a b", "b c", "a bc"}})};
        const Tokenizer t = Tokenizer::from_gguf(GgufFile::open(f.path));
        EXPECT_EQ(t.encode("abc", false), (Ids{3, 2}));  // ab+c has no merge
        EXPECT_EQ(t.encode("bcab", false), (Ids{4, 3}));
        EXPECT_EQ(t.encode("ababab", false), (Ids{3, 3, 3}));
    }
    {
        // Equal ranks (one merge, overlapping places): leftmost first.
        RemoveOnExit f{write_small_vocab("aa", {"a", "aa"}, {{"a a"}})};
        const Tokenizer t = Tokenizer::from_gguf(GgufFile::open(f.path));
        EXPECT_EQ(t.encode("aaa", false), (Ids{1, 0}));
        EXPECT_EQ(t.encode("aaaaa", false), (Ids{1, 1, 0}));
    }
}

// LFM2 files say "lfm2": Llama 3's pre-tokenizer, whole words found in the
// vocabulary before any merge, BOS added unless the file says otherwise.
TEST(BpeMerges, Lfm2PreTokenizerIsLlama3s) {
    const std::vector<std::string> tokens = {"a", "b", "c", "ab", "abc"};
    auto load = [&](const std::string& pre) {
        RemoveOnExit f{write_small_vocab("pre_" + pre, tokens, {{"a b"}}, pre)};
        return Tokenizer::from_gguf(GgufFile::open(f.path));
    };
    const Tokenizer lfm2 = load("lfm2");
    EXPECT_EQ(lfm2.encode("abc", false), (Ids{4}));  // the word, though no merge makes it
    EXPECT_EQ(lfm2.encode("abc", false), load("llama-bpe").encode("abc", false));
    EXPECT_EQ(load("gpt-2").encode("abc", false), (Ids{3, 2}));
    EXPECT_TRUE(lfm2.wants_bos());
}

TEST(BpeErrors, OneLineMessages) {
    auto expect_error = [](const std::filesystem::path& path, dwell_status status,
                           const std::vector<std::string>& parts) {
        try {
            (void)Tokenizer::from_gguf(GgufFile::open(path));
            ADD_FAILURE() << "no error for " << path;
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_EQ(e.status(), status) << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
            EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
            for (const std::string& p : parts) {
                EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
            }
        }
    };
    const std::vector<std::string> tokens = {"a", "b", "ab"};
    {
        RemoveOnExit f{write_small_vocab("bad_pre", tokens, {{"a b"}}, "deepseek-llm")};
        expect_error(f.path, DWELL_ERR_UNSUPPORTED,
                     {"tokenizer.ggml.pre", "'deepseek-llm'", "'qwen2'", "'gpt-2'", "'llama-bpe'"});
    }
    {
        RemoveOnExit f{write_small_vocab("no_pre", tokens, {{"a b"}}, "")};
        expect_error(f.path, DWELL_ERR_UNSUPPORTED, {"tokenizer.ggml.pre", "'qwen2'"});
    }
    {
        RemoveOnExit f{write_small_vocab("no_merges", tokens, std::nullopt)};
        expect_error(f.path, DWELL_ERR_CORRUPT, {"tokenizer.ggml.merges"});
    }
    {
        const auto path = std::filesystem::temp_directory_path() /
                          ("dwell_bpe_small_" + std::to_string(::getpid()) + "_types.gguf");
        RemoveOnExit f{path};
        GgufWriter w;
        w.add_string("tokenizer.ggml.model", "gpt2");
        w.add_string("tokenizer.ggml.pre", "qwen2");
        w.add_string_array("tokenizer.ggml.tokens", tokens);
        w.add_string_array("tokenizer.ggml.merges", std::vector<std::string>{"a b"});
        w.add_int32_array("tokenizer.ggml.token_type", std::vector<int32_t>{1, 9, 1});
        w.add_uint32("tokenizer.ggml.eos_token_id", 3);
        w.write(path);
        expect_error(path, DWELL_ERR_CORRUPT, {"tokenizer.ggml.token_type[1] = 9"});
    }
    {
        GgufWriter w;
        BpeVocab v = make_synthetic_bpe_vocab(300, 1);
        try {
            write_bpe_vocab(w, v, "gpt2");
            ADD_FAILURE() << "no error";
        } catch (const Error& e) {
            EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT);
            EXPECT_NE(std::string(e.what()).find("'gpt-2'"), std::string::npos) << e.what();
        }
    }
}

// ---------------------------------------------------------------------------
// The generator.

TEST(SyntheticBpeVocab, DeterministicAndSized) {
    const BpeVocab a = make_synthetic_bpe_vocab(1024, 5);
    const BpeVocab b = make_synthetic_bpe_vocab(1024, 5);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.merges, b.merges);
    EXPECT_EQ(a.tokens.size(), 1024u);
    EXPECT_EQ(a.types.size(), 1024u);
    EXPECT_NE(make_synthetic_bpe_vocab(1024, 6).merges, a.merges);
    EXPECT_EQ(a.tokens[static_cast<size_t>(a.eos)], "<|endoftext|>");
    EXPECT_EQ(a.tokens.back(), "</tool_call>");
    EXPECT_EQ(a.types.back(), 4);
    EXPECT_EQ(a.types[static_cast<size_t>(a.eos)], 3);
    // Every merge result is a token, and no text is listed twice.
    std::map<std::string, int> seen;
    for (const std::string& t : a.tokens) EXPECT_EQ(++seen[t], 1) << t;
    for (const std::string& m : a.merges) {
        const size_t sp = m.find(' ');
        ASSERT_NE(sp, std::string::npos);
        EXPECT_TRUE(seen.count(m.substr(0, sp) + m.substr(sp + 1))) << m;
    }
    EXPECT_THROW(make_synthetic_bpe_vocab(100, 1), Error);
    EXPECT_THROW(make_synthetic_bpe_vocab(1 << 20, 1), Error);
}

TEST_F(BpeReference, LearnsMultiByteCharacters) {
    // Whole CJK characters and words, and a whole emoji, are tokens of
    // their own.
    const Tokenizer& t = tok("qwen2");
    auto has = [&](const std::string& bytes) {
        for (int32_t id = 0; id < t.n_vocab(); ++id) {
            if (t.token_bytes(id) == bytes) return true;
        }
        return false;
    };
    EXPECT_TRUE(has("\xE5\xA4\xA9"));                                      // 天
    EXPECT_TRUE(has("\xE6\x97\xA5\xE6\x9C\xAC"));                          // 日本
    EXPECT_TRUE(has("\xE3\x82\xAB\xE3\x82\xBF\xE3\x82\xAB\xE3\x83\x8A"));  // カタカナ
    EXPECT_TRUE(has(" \xF0\x9F\x99\x82"));                                 // " 🙂"
    EXPECT_TRUE(has("\xD0\xB8"));                                          // и
}

// ---------------------------------------------------------------------------
// SPM with special-token parsing, against llama-tokenize on stories260K.

TEST(SpmSpecialTokens, ParsesSpecialTokensLikeLlamaCpp) {
    DWELL_REQUIRE_MODEL(path, "stories260K.gguf");
    const Tokenizer t = Tokenizer::from_gguf(GgufFile::open(path));
    size_t compared = 0;
    for (const auto& r : reference_texts::reference_lines("stories260K")) {
        EXPECT_EQ(t.encode(texts()[r.index], true, r.special), r.ids)
            << (r.special ? "special" : "plain") << " text " << r.index << ": '" << texts()[r.index]
            << "'";
        ++compared;
    }
    EXPECT_GT(compared, 0u);
}

}  // namespace
}  // namespace dwell
