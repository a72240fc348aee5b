// Tokenizer and StreamDecoder: ids must equal llama.cpp's SPM tokenizer
// (reference ids from shared/reference/stories260K.md), both when the
// vocabulary comes from a sentencepiece .model file and when it comes from a
// GGUF file, and decoding must give back the exact input text.
#include "dwell/core/text/tokenizer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/status.h"
#include "dwell/tools/gguf_writer.hpp"
#include "test_paths.hpp"

namespace dwell {
namespace {

using Ids = std::vector<int32_t>;

Tokenizer load_tokenizer(const std::filesystem::path& path) {
    if (path.extension() == ".gguf") return Tokenizer::from_gguf(GgufFile::open(path));
    return Tokenizer::from_model_file(path);
}

// Texts whose round trip exercises the normaliser (spaces must survive) and
// byte fallback (none of é, ü, 日本語 or 🙂 is a piece of the 512 vocab).
const std::vector<std::string>& round_trip_texts() {
    static const std::vector<std::string> texts = {
        "",
        "Hello world",
        "The dog ran",
        "a  b",
        "a     b   c",
        " ",
        "   ",
        "  leading spaces",
        "trailing spaces   ",
        " both ",
        "line one\nline two\n\n",
        "\n",
        "\ttab\tseparated\t",
        "mixed \t\n whitespace \n\t ",
        "The café was",
        "über straße",
        "日本語",
        "🙂",
        "Emoji 🙂 and 日本語 in é text ü!",
        "Sara said, \"Hello!\"",
        "1234567890 + 42 = 1276",
        "<s> and </s> are only text here",
        "Once upon a time, there was a little girl named Lily. She loved to play outside.",
    };
    return texts;
}

bool is_valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<uint8_t>(s[i]);
        size_t n = b < 0x80           ? 1
                   : (b >> 5) == 0x6  ? 2
                   : (b >> 4) == 0xE  ? 3
                   : (b >> 3) == 0x1E ? 4
                                      : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k) {
            if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
        }
        i += n;
    }
    return true;
}

int32_t find_piece(const Tokenizer& tok, std::string_view piece) {
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
        if (tok.piece(id) == piece) return id;
    }
    ADD_FAILURE() << "no piece " << piece;
    return -1;
}

// Pushes ids one at a time and checks every chunk is whole UTF-8.
std::string stream_decode(const Tokenizer& tok, const Ids& ids) {
    StreamDecoder dec(tok);
    std::string out;
    for (int32_t id : ids) {
        const std::string chunk = dec.push(id);
        EXPECT_TRUE(is_valid_utf8(chunk)) << "chunk after id " << id;
        out += chunk;
    }
    const std::string rest = dec.finish();
    EXPECT_TRUE(is_valid_utf8(rest));
    return out + rest;
}

// A file in the temp folder, removed when the test ends.
class TempFile {
public:
    explicit TempFile(const std::string& suffix) {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string name = std::string("dwell_tok_") + std::to_string(::getpid()) + "_" +
                           info->test_suite_name() + "_" + info->name() + suffix;
        for (char& c : name) {
            if (c == '/') c = '_';
        }
        path_ = std::filesystem::temp_directory_path() / name;
    }
    ~TempFile() {
        std::error_code ec;
        std::filesystem::remove(path_, ec);
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// Expects `fn` to throw dwell::Error with `status` and a message containing
// every one of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, dwell_status status, const std::vector<std::string>& parts) {
    try {
        fn();
        ADD_FAILURE() << "no dwell::Error thrown";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), status) << e.what();
        const std::string msg = e.what();
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
        for (const std::string& part : parts) {
            EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
        }
    }
}

// ---------------------------------------------------------------------------
// The stories260K vocabulary, from both of its sources.

class TokenizerVocab : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override {
        DWELL_REQUIRE_MODEL(path, GetParam());
        tok_.emplace(load_tokenizer(path));
    }
    const Tokenizer& tok() const { return *tok_; }

private:
    std::optional<Tokenizer> tok_;
};

TEST_P(TokenizerVocab, MatchesLlamaCppReferenceIds) {
    EXPECT_EQ(tok().encode("The dog ran", true), (Ids{1, 291, 400, 428, 352, 303}));
    EXPECT_EQ(tok().encode("Sara said, \"Hello!\"", true),
              (Ids{1, 301, 295, 412, 336, 432, 313, 440, 411, 306, 414, 443, 436}));
    EXPECT_EQ(tok().encode("The café was", true), (Ids{1, 291, 280, 412, 431, 485, 286}));
    EXPECT_EQ(tok().encode("Once upon a time", true), (Ids{1, 403, 407, 261, 378}));
    EXPECT_EQ(tok().encode("Lily went to the park", true),
              (Ids{1, 317, 263, 377, 267, 265, 282, 295, 433}));
    EXPECT_EQ(tok().encode("Once upon a time", false), (Ids{403, 407, 261, 378}));
    EXPECT_EQ(tok().encode("", true), (Ids{1}));
    EXPECT_TRUE(tok().encode("", false).empty());
}

TEST_P(TokenizerVocab, SpecialIdsAndPieces) {
    EXPECT_EQ(tok().n_vocab(), 512);
    EXPECT_EQ(tok().bos(), 1);
    EXPECT_EQ(tok().eos(), 2);
    EXPECT_EQ(tok().unk(), 0);
    EXPECT_EQ(tok().piece(1), "<s>");
    EXPECT_EQ(tok().piece(2), "</s>");
    EXPECT_TRUE(tok().is_control(1));
    EXPECT_TRUE(tok().is_control(2));
    EXPECT_FALSE(tok().is_control(0));
    EXPECT_FALSE(tok().is_control(291));
    EXPECT_EQ(tok().token_bytes(1), "");
    EXPECT_EQ(tok().token_bytes(2), "");

    // ids 3..258 are the byte-fallback pieces <0x00>..<0xFF>.
    EXPECT_EQ(tok().piece(3 + 0x0A), "<0x0A>");
    EXPECT_EQ(tok().token_bytes(3 + 0x0A), "\n");
    EXPECT_EQ(tok().token_bytes(3 + 0xE6), "\xE6");
    EXPECT_EQ(tok().token_bytes(3), std::string(1, '\0'));

    const int32_t space = find_piece(tok(), "\xE2\x96\x81");
    EXPECT_EQ(tok().token_bytes(space), " ");
    const int32_t the = find_piece(tok(), "\xE2\x96\x81The");
    EXPECT_EQ(the, 291);
    EXPECT_EQ(tok().token_bytes(the), " The");
}

TEST_P(TokenizerVocab, DecodeDropsDummyPrefixAndControlTokens) {
    EXPECT_EQ(tok().decode(Ids{1, 291, 400, 428, 352, 303}), "The dog ran");
    EXPECT_EQ(tok().decode(Ids{1, 291, 400, 428, 352, 303, 2}), "The dog ran");
    EXPECT_EQ(tok().decode(Ids{291, 400, 428, 352, 303}), "The dog ran");
    EXPECT_EQ(tok().decode(Ids{}), "");
    EXPECT_EQ(tok().decode(Ids{1, 2}), "");
}

TEST_P(TokenizerVocab, RoundTripsText) {
    for (const std::string& text : round_trip_texts()) {
        const Ids ids = tok().encode(text, true);
        EXPECT_EQ(tok().decode(ids), text) << "text: '" << text << "'";
        EXPECT_EQ(tok().decode(tok().encode(text, false)), text) << "text: '" << text << "'";
    }
}

TEST_P(TokenizerVocab, KeepsRepeatedSpaces) {
    // A normaliser that collapses whitespace (sentencepiece's default) would
    // give "a b" the same ids.
    EXPECT_NE(tok().encode("a  b", false), tok().encode("a b", false));
    EXPECT_NE(tok().encode(" a", false), tok().encode("a", false));
    EXPECT_NE(tok().encode("a ", false), tok().encode("a", false));
}

TEST_P(TokenizerVocab, UsesByteFallbackForUnknownCharacters) {
    // "🙂" = F0 9F 99 82: after the dummy-prefix piece, one byte token each.
    const Ids ids = tok().encode("🙂", false);
    ASSERT_EQ(ids.size(), 5u);
    EXPECT_EQ(tok().token_bytes(ids[0]), " ");
    EXPECT_EQ(ids[1], 3 + 0xF0);
    EXPECT_EQ(ids[2], 3 + 0x9F);
    EXPECT_EQ(ids[3], 3 + 0x99);
    EXPECT_EQ(ids[4], 3 + 0x82);
    for (int32_t id : tok().encode("日本語 🙂 é ü", false)) EXPECT_NE(id, tok().unk());
}

TEST_P(TokenizerVocab, RejectsOutOfRangeIds) {
    expect_error([&] { tok().decode(Ids{1, 600}); }, DWELL_ERR_INVALID_ARGUMENT, {"600", "512"});
    expect_error([&] { tok().decode(Ids{-1}); }, DWELL_ERR_INVALID_ARGUMENT, {"-1", "512"});
    expect_error([&] { tok().token_bytes(512); }, DWELL_ERR_INVALID_ARGUMENT, {"512"});
    expect_error([&] { tok().piece(512); }, DWELL_ERR_INVALID_ARGUMENT, {"512"});
    expect_error([&] { tok().is_control(-5); }, DWELL_ERR_INVALID_ARGUMENT, {"-5"});
    StreamDecoder dec(tok());
    expect_error([&] { dec.push(512); }, DWELL_ERR_INVALID_ARGUMENT, {"512"});
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, TokenizerVocab,
                         ::testing::Values("tok512.model", "stories260K.gguf"),
                         [](const auto& info) {
                             return std::string(info.param).find(".gguf") != std::string::npos
                                        ? std::string("gguf")
                                        : std::string("model_file");
                         });

// ---------------------------------------------------------------------------
// StreamDecoder on the same vocabularies.

using StreamDecoderVocab = TokenizerVocab;

TEST_P(StreamDecoderVocab, ConcatenationEqualsDecode) {
    for (const std::string& text : round_trip_texts()) {
        for (bool bos : {true, false}) {
            const Ids ids = tok().encode(text, bos);
            EXPECT_EQ(stream_decode(tok(), ids), tok().decode(ids)) << "text: '" << text << "'";
            EXPECT_EQ(stream_decode(tok(), ids), text) << "text: '" << text << "'";
        }
    }
}

TEST_P(StreamDecoderVocab, HoldsBackIncompleteCharacters) {
    const Ids ids = tok().encode("🙂!", true);  // BOS, "▁", 4 bytes, "!"
    ASSERT_EQ(ids.size(), 7u);
    StreamDecoder dec(tok());
    EXPECT_EQ(dec.push(ids[0]), "");
    EXPECT_EQ(dec.push(ids[1]), "");  // the dummy prefix is dropped
    EXPECT_EQ(dec.push(ids[2]), "");
    EXPECT_EQ(dec.push(ids[3]), "");
    EXPECT_EQ(dec.push(ids[4]), "");
    EXPECT_EQ(dec.push(ids[5]), "🙂");
    EXPECT_EQ(dec.push(ids[6]), "!");
    EXPECT_EQ(dec.finish(), "");
}

TEST_P(StreamDecoderVocab, StripsOnlyTheFirstLeadingSpace) {
    const Ids ids = tok().encode("The dog", true);
    StreamDecoder stripped(tok());
    StreamDecoder kept(tok(), /*strip_leading_space=*/false);
    std::string a;
    std::string b;
    for (int32_t id : ids) {
        a += stripped.push(id);
        b += kept.push(id);
    }
    EXPECT_EQ(a + stripped.finish(), "The dog");
    EXPECT_EQ(b + kept.finish(), " The dog");
}

TEST_P(StreamDecoderVocab, FlushesInvalidBytesAsReplacementCharacters) {
    const std::string fffd = "\xEF\xBF\xBD";
    // A truncated 4-byte sequence: held back, then one U+FFFD per byte.
    const Ids truncated{1, 3 + 0xF0, 3 + 0x9F};
    StreamDecoder dec(tok());
    std::string out;
    for (int32_t id : truncated) out += dec.push(id);
    EXPECT_EQ(out, "");
    out += dec.finish();
    EXPECT_EQ(out, fffd + fffd);
    EXPECT_EQ(tok().decode(truncated), out);

    // An interrupted sequence is replaced as soon as it cannot complete.
    const int32_t the = 291;  // "▁The"
    const Ids interrupted{3 + 0xE6, the, 3 + 0x80};
    StreamDecoder dec2(tok());
    EXPECT_EQ(dec2.push(interrupted[0]), "");
    EXPECT_EQ(dec2.push(interrupted[1]), fffd + " The");
    EXPECT_EQ(dec2.push(interrupted[2]), fffd);
    EXPECT_EQ(dec2.finish(), "");
    EXPECT_EQ(tok().decode(interrupted), fffd + " The" + fffd);
}

INSTANTIATE_TEST_SUITE_P(StreamDecoder, StreamDecoderVocab,
                         ::testing::Values("tok512.model", "stories260K.gguf"),
                         [](const auto& info) {
                             return std::string(info.param).find(".gguf") != std::string::npos
                                        ? std::string("gguf")
                                        : std::string("model_file");
                         });

// ---------------------------------------------------------------------------

TEST(TokenizerSources, GgufVocabularyMatchesModelFile) {
    DWELL_REQUIRE_MODEL(model_path, "tok512.model");
    DWELL_REQUIRE_MODEL(gguf_path, "stories260K.gguf");
    const Tokenizer from_model = Tokenizer::from_model_file(model_path);
    const Tokenizer from_gguf = Tokenizer::from_gguf(GgufFile::open(gguf_path));

    std::vector<std::string> texts = round_trip_texts();
    texts.insert(texts.end(), {
                                  "Tom and Sue played with the ball in the garden.",
                                  "\"Why?\" asked the little bird. 'Because!'",
                                  "She smiled: it was a happy day... The end.",
                                  "UPPER lower MiXeD 3.14159 $5 #tag @you 50%",
                                  "naïve façade coöperate résumé",
                                  "Привет мир",
                                  "a\r\nb",
                              });
    for (const std::string& text : texts) {
        EXPECT_EQ(from_gguf.encode(text, true), from_model.encode(text, true))
            << "text: '" << text << "'";
    }
    for (int32_t id = 0; id < from_model.n_vocab(); ++id) {
        EXPECT_EQ(from_gguf.piece(id), from_model.piece(id)) << "id " << id;
        EXPECT_EQ(from_gguf.token_bytes(id), from_model.token_bytes(id)) << "id " << id;
        EXPECT_EQ(from_gguf.is_control(id), from_model.is_control(id)) << "id " << id;
    }
}

TEST(TokenizerLlama2, MatchesReferenceIds) {
    DWELL_REQUIRE_MODEL(path, "tokenizer.model");
    const Tokenizer tok = Tokenizer::from_model_file(path);
    EXPECT_EQ(tok.n_vocab(), 32000);
    EXPECT_EQ(tok.encode("Once upon a time", true), (Ids{1, 9038, 2501, 263, 931}));
    for (const std::string& text : round_trip_texts()) {
        const Ids ids = tok.encode(text, true);
        EXPECT_EQ(tok.decode(ids), text) << "text: '" << text << "'";
        EXPECT_EQ(stream_decode(tok, ids), text) << "text: '" << text << "'";
    }
}

// ---------------------------------------------------------------------------
// Vocabularies built here with GgufWriter.

// <unk>, <s>, </s>, the 256 byte pieces, then `extra` as NORMAL pieces.
void add_small_vocab(GgufWriter& w, const std::vector<std::string>& extra) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        tokens.emplace_back(buf);
        types.push_back(6);
    }
    for (const std::string& t : extra) {
        tokens.push_back(t);
        types.push_back(1);
    }
    std::vector<float> scores(tokens.size(), 0.0f);
    for (size_t i = 259; i < tokens.size(); ++i) scores[i] = -static_cast<float>(i - 259);
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_float32_array("tokenizer.ggml.scores", scores);
    w.add_int32_array("tokenizer.ggml.token_type", types);
}

TEST(TokenizerGgufVocab, HonoursAddSpacePrefix) {
    const std::vector<std::string> extra = {"\xE2\x96\x81", "a", "b",
                                            "\xE2\x96\x81"
                                            "a"};
    const int32_t space = 259, a = 260, b = 261, space_a = 262;
    for (bool prefix : {true, false}) {
        SCOPED_TRACE(prefix ? "add_space_prefix = true" : "add_space_prefix = false");
        TempFile file(prefix ? "_prefix.gguf" : "_noprefix.gguf");
        GgufWriter w;
        add_small_vocab(w, extra);
        w.add_bool("tokenizer.ggml.add_space_prefix", prefix);
        w.write(file.path());
        const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(file.path()));

        EXPECT_EQ(tok.n_vocab(), 263);
        if (prefix) {
            EXPECT_EQ(tok.encode("a b", true), (Ids{1, space_a, space, b}));
        } else {
            EXPECT_EQ(tok.encode("a b", true), (Ids{1, a, space, b}));
        }
        EXPECT_EQ(tok.encode(" a", false).back(), space_a);
        for (const std::string& text : round_trip_texts()) {
            const Ids ids = tok.encode(text, true);
            EXPECT_EQ(tok.decode(ids), text) << "text: '" << text << "'";
            EXPECT_EQ(stream_decode(tok, ids), text) << "text: '" << text << "'";
        }
    }
}

TEST(TokenizerErrors, MissingModelFile) {
    const std::filesystem::path path = "/nonexistent/dwell/tok.model";
    expect_error([&] { Tokenizer::from_model_file(path); }, DWELL_ERR_IO, {path.string()});
    const std::filesystem::path dir = std::filesystem::temp_directory_path();
    expect_error([&] { Tokenizer::from_model_file(dir); }, DWELL_ERR_IO, {dir.string()});
}

TEST(TokenizerErrors, GarbageModelFile) {
    TempFile file(".model");
    {
        std::ofstream out(file.path(), std::ios::binary);
        out << "this is not a sentencepiece model \xFF\xFE\x01\x02";
    }
    expect_error([&] { Tokenizer::from_model_file(file.path()); }, DWELL_ERR_CORRUPT,
                 {file.path().string()});

    TempFile empty(".empty.model");
    { std::ofstream out(empty.path(), std::ios::binary); }
    expect_error([&] { Tokenizer::from_model_file(empty.path()); }, DWELL_ERR_CORRUPT,
                 {empty.path().string()});

    // Well-formed protobuf, but pieces that sentencepiece rejects (no <unk>).
    TempFile bad(".bad.model");
    {
        std::ofstream out(bad.path(), std::ios::binary);
        out << std::string("\x0a\x03\x0a\x01x", 5);  // pieces { piece: "x" }
    }
    expect_error([&] { Tokenizer::from_model_file(bad.path()); }, DWELL_ERR_CORRUPT,
                 {bad.path().string()});
}

// Found by tokenizer_model_fuzzer: sentencepiece throws, rather than
// returning a status, for a piece that starts with a NUL byte; that must
// come back as a corrupt-model error, not abort the process.
TEST(TokenizerErrors, PieceStartingWithNulIsACorruptModel) {
    // pieces { piece: "<unk>" type: UNKNOWN } pieces { piece: "\0b" type: NORMAL }
    const std::string proto("\x0a\x09\x0a\x05<unk>\x18\x02\x0a\x06\x0a\x02\x00\x62\x18\x01", 19);
    expect_error([&] { Tokenizer::from_serialized_model(proto, "fuzz.model"); }, DWELL_ERR_CORRUPT,
                 {"fuzz.model", "not a usable sentencepiece model"});
}

// sentencepiece's messages carry its source location and the failed check
// ("./src/sentencepiece_processor.cc(1101) [model_proto->ParseFromArray(...)]"):
// a user sees what is wrong instead.
TEST(TokenizerErrors, SentencepieceFailuresReadWithoutItsInternals) {
    const std::string garbage("\x07\x07\x07\x07", 4);  // wire type 7 does not exist
    expect_error([&] { Tokenizer::from_serialized_model(garbage, "garbage.model"); },
                 DWELL_ERR_CORRUPT, {"garbage.model: not a sentencepiece model"});
    try {
        Tokenizer::from_serialized_model(garbage, "garbage.model");
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).find(".cc("), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find("ParseFrom"), std::string::npos) << e.what();
    }
}

// llama.cpp merges into any token, control ones too, and writes a byte that
// has no token of its own as the unknown token (where llama.cpp itself
// stops): a vocabulary of control tokens still encodes.
TEST(TokenizerGgufVocab, MergesIntoControlTokensAndWritesMissingBytesAsUnknown) {
    TempFile file("_allctrl.gguf");
    GgufWriter w;
    const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a", "b", "ab"};
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_float32_array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
    const std::vector<int32_t> types = {2, 3, 3, 3, 3, 3};
    w.add_int32_array("tokenizer.ggml.token_type", types);
    w.write(file.path());
    const Tokenizer tok = Tokenizer::from_gguf(GgufFile::open(file.path()));
    // The dummy prefix U+2581 is three bytes with no token.
    EXPECT_EQ(tok.encode("ab", false), (Ids{0, 0, 0, 5}));
    EXPECT_EQ(tok.encode("ba", false), (Ids{0, 0, 0, 4, 3}));
}

// An optional integer key stored as a string is an error naming it, not
// the default.
TEST(TokenizerErrors, GgufOptionalIntegerKeyOfAnotherType) {
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_space_prefix"}) {
        TempFile file(".gguf");
        GgufWriter w;
        add_small_vocab(w, {"a"});
        w.add_string(key, "1");
        w.write(file.path());
        expect_error([&] { Tokenizer::from_gguf(GgufFile::open(file.path())); }, DWELL_ERR_CORRUPT,
                     {file.path().string(),
                      std::string("metadata key ") + key + " is not an integer (it is a string)"});
    }
}

TEST(TokenizerErrors, GgufMismatchedArrayLengths) {
    TempFile file(".gguf");
    GgufWriter w;
    const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a"};
    const std::vector<float> scores = {0, 0, 0};
    const std::vector<int32_t> types = {2, 3, 3, 1};
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_float32_array("tokenizer.ggml.scores", scores);
    w.add_int32_array("tokenizer.ggml.token_type", types);
    w.write(file.path());
    const GgufFile gguf = GgufFile::open(file.path());
    expect_error([&] { Tokenizer::from_gguf(gguf); }, DWELL_ERR_CORRUPT,
                 {file.path().string(), "tokenizer.ggml.scores", "3", "4"});
}

TEST(TokenizerErrors, GgufTokenTypeLengthMismatch) {
    TempFile file(".gguf");
    GgufWriter w;
    const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a"};
    const std::vector<float> scores = {0, 0, 0, 0};
    const std::vector<int32_t> types = {2, 3, 3, 1, 1};
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_float32_array("tokenizer.ggml.scores", scores);
    w.add_int32_array("tokenizer.ggml.token_type", types);
    w.write(file.path());
    expect_error([&] { Tokenizer::from_gguf(GgufFile::open(file.path())); }, DWELL_ERR_CORRUPT,
                 {file.path().string(), "tokenizer.ggml.token_type", "5", "4"});
}

TEST(TokenizerErrors, GgufNonSpmVocabulary) {
    TempFile file(".gguf");
    GgufWriter w;
    const std::vector<std::string> tokens = {"a", "b"};
    w.add_string("tokenizer.ggml.model", "bert");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.write(file.path());
    expect_error([&] { Tokenizer::from_gguf(GgufFile::open(file.path())); }, DWELL_ERR_UNSUPPORTED,
                 {file.path().string(), "'bert'",
                  "only SPM ('llama') and byte-level BPE ('gpt2') vocabularies are supported"});
}

TEST(TokenizerErrors, GgufWithoutVocabulary) {
    TempFile file(".gguf");
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.write(file.path());
    expect_error([&] { Tokenizer::from_gguf(GgufFile::open(file.path())); }, DWELL_ERR_CORRUPT,
                 {file.path().string(), "tokenizer.ggml.model"});
}

TEST(TokenizerErrors, GgufSpecialIdOutOfRange) {
    TempFile file(".gguf");
    GgufWriter w;
    add_small_vocab(w, {"a"});
    w.add_uint32("tokenizer.ggml.bos_token_id", 9999);
    w.write(file.path());
    expect_error([&] { Tokenizer::from_gguf(GgufFile::open(file.path())); }, DWELL_ERR_CORRUPT,
                 {file.path().string(), "tokenizer.ggml.bos_token_id", "9999"});
}

TEST(TokenizerFile, AModelFileOverTheLimitIsRefusedBeforeItIsRead) {
    const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                    ("dwell-huge-" + std::to_string(::getpid()) + ".model");
    std::ofstream(p) << "x";
    std::filesystem::resize_file(p, (uint64_t{64} << 20) + 1);  // sparse
    try {
        Tokenizer::from_model_file(p);
        ADD_FAILURE() << "a tokenizer model over the limit was read";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(p.string() + ": sentencepiece model is 64.0 MiB (67108865 bytes)"),
                  std::string::npos)
            << m;
        EXPECT_NE(m.find("limit of 64.0 MiB"), std::string::npos) << m;
    }
    std::filesystem::remove(p);
}

}  // namespace
}  // namespace dwell
