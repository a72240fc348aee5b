// Session files: the writer lays out the documented bytes, the reader gives
// them back, and a hostile header (another model, an unknown KV type, sizes
// out of range or larger than the file) is refused with one line before
// anything sized by it is allocated. Also the context a session may ask for.
#include "dwell/core/session/session_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/session/session.hpp"

namespace fs = std::filesystem;

namespace {

// 2 layers, KV width 4 in f16: 8-byte rows; weights fingerprint 777.
const dwell::SessionFileModel kModel{2, 4, 10, 12345, 777, "model.gguf"};

// Whether `dir` is free of writers' temporaries (output_file.hpp).
bool no_temporary(const fs::path& dir) {
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".dwell-tmp.") != std::string::npos) return false;
    return true;
}

// The header bytes as the format documents them, built without the writer.
struct RawHeader {
    std::string magic = "DWELLSES";
    uint32_t version = 4, dtype = DWELL_F16, n_layer = 2, n_ctx = 16;
    uint64_t kv_width = 4, n_vocab = 10, weight_bytes = 12345;
    uint32_t n_past = 3, n_logits = 10;
    // Version 3 on: the fingerprint, the pending token, the host data.
    uint64_t fingerprint = 777;
    int32_t pending = -1;
    std::string host_data;
    std::optional<uint32_t> host_bytes;  // what the header says, if not host_data.size()
    // Version 4 on: the recurrent state sizes (values per layer).
    uint64_t state_elems[2] = {0, 0};

    size_t header_size() const { return version >= 4 ? 88 : version >= 3 ? 72 : 56; }
};

template <typename T>
void append_le(std::string& out, T v) {
    for (size_t i = 0; i < sizeof(T); ++i)
        out.push_back(static_cast<char>(static_cast<uint64_t>(v) >> (8 * i)));
}

std::string header_bytes(const RawHeader& h) {
    std::string out = h.magic;
    append_le(out, h.version);
    append_le(out, h.dtype);
    append_le(out, h.n_layer);
    append_le(out, h.n_ctx);
    append_le(out, h.kv_width);
    append_le(out, h.n_vocab);
    append_le(out, h.weight_bytes);
    append_le(out, h.n_past);
    append_le(out, h.n_logits);
    if (h.version >= 3) {
        append_le(out, h.fingerprint);
        append_le(out, h.pending);
        append_le(out, h.host_bytes.value_or(static_cast<uint32_t>(h.host_data.size())));
    }
    if (h.version >= 4) {
        append_le(out, h.state_elems[0]);
        append_le(out, h.state_elems[1]);
    }
    return out;
}

// Bytes of a KV row of the header's type (8 for a type dwell does not know).
size_t row_bytes(const RawHeader& h) {
    const uint64_t n =
        dwell_row_bytes(static_cast<dwell_dtype>(h.dtype), static_cast<int64_t>(h.kv_width));
    return n != 0 ? static_cast<size_t>(n) : 8;
}

// A complete file: header, tokens 1..n_past, logits 0.5 * i, rows of byte
// value (layer * 2 + which) * 16 + pos, the states (value k of layer l:
// l * 100 + k, state 0 then 1), then the checksum.
std::string file_bytes(const RawHeader& h) {
    std::string out = header_bytes(h);
    for (uint32_t i = 0; i < h.n_past; ++i) append_le<int32_t>(out, static_cast<int32_t>(i + 1));
    for (uint32_t i = 0; i < h.n_logits; ++i) {
        const float f = 0.5f * static_cast<float>(i);
        uint32_t bits = 0;
        std::memcpy(&bits, &f, 4);
        append_le(out, bits);
    }
    if (h.version >= 3) out += h.host_data;
    for (uint32_t l = 0; l < h.n_layer; ++l)
        for (uint32_t which = 0; which < 2; ++which)
            for (uint32_t pos = 0; pos < h.n_past; ++pos)
                out.append(row_bytes(h), static_cast<char>((l * 2 + which) * 16 + pos));
    if (h.version >= 4) {
        for (uint32_t l = 0; l < h.n_layer; ++l) {
            for (uint64_t k = 0; k < h.state_elems[0] + h.state_elems[1]; ++k) {
                const float f = static_cast<float>(l * 100 + k);
                uint32_t bits = 0;
                std::memcpy(&bits, &f, 4);
                append_le(out, bits);
            }
        }
    }
    append_le<uint64_t>(out, XXH3_64bits(out.data(), out.size()));
    return out;
}

class SessionFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("dwell_session_file_" + std::to_string(::getpid()) + "_" + info->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    fs::path write(const std::string& bytes) {
        const fs::path p = dir_ / "s.dwses";
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }
    // Opening (and reading all of) `bytes` fails with `status` and a
    // one-line message naming the file and holding `phrase`.
    void expect_refused(const std::string& bytes, dwell_status status, const std::string& phrase) {
        const fs::path p = write(bytes);
        try {
            dwell::SessionFileReader r(p, kModel);
            (void)r.read_tokens();
            (void)r.read_logits();
            (void)r.read_host_data();
            std::vector<uint8_t> row(r.header().row_bytes);
            for (int i = 0; i < 2 * 2 * r.header().n_past; ++i) r.read_row(row);
            r.finish();
            ADD_FAILURE() << "accepted; expected: " << phrase;
        } catch (const dwell::Error& e) {
            const std::string msg = e.what();
            EXPECT_EQ(e.status(), status) << msg;
            EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << msg;
            EXPECT_NE(msg.find(phrase), std::string::npos) << msg << "\nexpected: " << phrase;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        }
    }
    fs::path dir_;
};

TEST_F(SessionFileTest, WriterLaysOutTheDocumentedBytes) {
    const fs::path p = dir_ / "w.dwses";
    dwell::SessionFileHeader h;
    h.kv_dtype = DWELL_F16;
    h.n_ctx = 16;
    h.n_past = 3;
    h.n_logits = 10;
    {
        dwell::SessionFileWriter w(p, kModel, h);
        const int32_t tokens[] = {1, 2, 3};
        w.write(tokens, sizeof tokens);
        for (int i = 0; i < 10; ++i) {
            const float f = 0.5f * static_cast<float>(i);
            w.write(&f, 4);
        }
        for (int l = 0; l < 2; ++l)
            for (int which = 0; which < 2; ++which)
                for (int pos = 0; pos < 3; ++pos) {
                    const std::string row(8, static_cast<char>((l * 2 + which) * 16 + pos));
                    w.write(row.data(), row.size());
                }
        EXPECT_FALSE(fs::exists(p)) << "visible before finish()";
        w.finish();
    }
    std::ifstream in(p, std::ios::binary);
    const std::string got{std::istreambuf_iterator<char>(in), {}};
    EXPECT_EQ(got, file_bytes(RawHeader{}));
    EXPECT_TRUE(no_temporary(dir_));
}

TEST_F(SessionFileTest, UnfinishedWriterLeavesNoFile) {
    const fs::path p = dir_ / "w.dwses";
    {
        dwell::SessionFileWriter w(p, kModel, dwell::SessionFileHeader{DWELL_F16, 16, 0, 0, 0});
        w.write("x", 1);
    }
    EXPECT_FALSE(fs::exists(p));
    EXPECT_TRUE(no_temporary(dir_));
}

TEST_F(SessionFileTest, ReaderGivesBackEveryPart) {
    dwell::SessionFileReader r(write(file_bytes(RawHeader{})), kModel);
    EXPECT_EQ(r.header().kv_dtype, DWELL_F16);
    EXPECT_EQ(r.header().n_ctx, 16);
    EXPECT_EQ(r.header().n_past, 3);
    EXPECT_EQ(r.header().row_bytes, 8u);
    EXPECT_EQ(r.read_tokens(), (std::vector<int32_t>{1, 2, 3}));
    const std::vector<float> logits = r.read_logits();
    ASSERT_EQ(logits.size(), 10u);
    EXPECT_EQ(logits[7], 3.5f);
    std::vector<uint8_t> row(8);
    for (int l = 0; l < 2; ++l)
        for (int which = 0; which < 2; ++which)
            for (int pos = 0; pos < 3; ++pos) {
                r.read_row(row);
                EXPECT_EQ(
                    row, std::vector<uint8_t>(8, static_cast<uint8_t>((l * 2 + which) * 16 + pos)));
            }
    r.finish();
}

TEST_F(SessionFileTest, FileOfAnotherModelIsRefused) {
    RawHeader h;
    h.kv_width = 8;
    expect_refused(file_bytes(h), DWELL_ERR_INVALID_ARGUMENT,
                   "saved with another model than model.gguf");
    h = RawHeader{};
    h.weight_bytes = 1;
    expect_refused(file_bytes(h), DWELL_ERR_INVALID_ARGUMENT, "another model");
}

TEST_F(SessionFileTest, UnknownKvTypeIsRefused) {
    RawHeader h;
    h.dtype = 1000;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "KV type 1000 is not one dwell stores");
    h.dtype = DWELL_Q4_0;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "is not one dwell stores");
}

TEST_F(SessionFileTest, ContextOutsideTheLimitIsRefused) {
    RawHeader h;
    h.n_ctx = (1u << 24) + 1;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT,
                   "context of 16777217 tokens is outside 1..16777216");
    h.n_ctx = 0;
    h.n_past = 0;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "context of 0 tokens");
    // An n_ctx that reads negative as int32.
    h.n_ctx = 0x80000000u;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "context of 2147483648 tokens");
}

TEST_F(SessionFileTest, MoreTokensThanTheContextAreRefused) {
    RawHeader h;
    h.n_ctx = 2;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "3 tokens do not fit its context of 2");
}

TEST_F(SessionFileTest, LogitsNotOnePerTokenIdAreRefused) {
    RawHeader h;
    h.n_logits = 9;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "9 logits for a vocabulary of 10");
}

// The header asks for 16M tokens of KV rows; the file holds a few bytes.
// This must fail on the size, before 16M tokens are allocated.
TEST_F(SessionFileTest, SizesLargerThanTheFileAreRefusedBeforeAllocation) {
    RawHeader h;
    h.n_ctx = 1u << 24;
    h.n_past = 1u << 24;
    const std::string bytes = header_bytes(h) + std::string(16, '\0');
    const uint64_t asked = 88 + 8 + 4ull * h.n_past + 4ull * 10 + 2ull * 2 * h.n_past * 8;
    expect_refused(
        bytes, DWELL_ERR_CORRUPT,
        "the file is truncated (104 bytes; its header asks for " + std::to_string(asked) + ")");
}

TEST_F(SessionFileTest, TrailingBytesAreRefused) {
    expect_refused(file_bytes(RawHeader{}) + "xy", DWELL_ERR_CORRUPT,
                   "2 bytes follow the checksum");
}

TEST_F(SessionFileTest, TruncatedHeaderIsRefused) {
    expect_refused(header_bytes(RawHeader{}).substr(0, 20), DWELL_ERR_CORRUPT, "truncated");
}

TEST_F(SessionFileTest, DamageFailsTheChecksum) {
    std::string bytes = file_bytes(RawHeader{});
    bytes[bytes.size() - 20] ^= 0x10;  // inside a KV row
    expect_refused(bytes, DWELL_ERR_CORRUPT, "the checksum does not match");
}

TEST_F(SessionFileTest, TokenOutsideTheVocabularyIsRefused) {
    std::string bytes = file_bytes(RawHeader{});
    bytes[88] = 10;  // the first token id becomes n_vocab
    expect_refused(bytes, DWELL_ERR_CORRUPT, "token id 10 is outside the vocabulary (0..9)");
}

TEST_F(SessionFileTest, BadMagicAndVersion) {
    RawHeader h;
    h.magic = "DWELLSEX";
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "bad magic");
    h = RawHeader{};
    h.version = 5;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "version 5, this dwell reads 1 to 4");
    h.version = 0;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "version 0, this dwell reads 1 to 4");
}

// Version 1 differs only in FP8 keys (plain codes then, offset keys now):
// other KV types still restore, FP8 ones are refused in one line.
TEST_F(SessionFileTest, VersionOneIsReadUnlessItsKeysAreFp8) {
    RawHeader h;
    h.version = 1;
    const fs::path p = write(file_bytes(h));
    dwell::SessionFileReader r(p, kModel);
    EXPECT_EQ(r.read_tokens(), (std::vector<int32_t>{1, 2, 3}));
    (void)r.read_logits();
    std::vector<uint8_t> row(r.header().row_bytes);
    for (int i = 0; i < 2 * 2 * 3; ++i) r.read_row(row);
    EXPECT_EQ(row[0], (1 * 2 + 1) * 16 + 2);
    r.finish();

    h.dtype = DWELL_FP8_E4M3;
    expect_refused(file_bytes(h), DWELL_ERR_UNSUPPORTED,
                   "FP8 keys are in the plain encoding of dwell ABI 1.3 and earlier");
    h.version = 2;
    const fs::path fp8 = write(file_bytes(h));
    EXPECT_NO_THROW(dwell::SessionFileReader(fp8, kModel));
}

// Two models of one shape and size (a fine-tune) differ in their weights'
// fingerprint: a version 3 file of the other is refused in one line.
TEST_F(SessionFileTest, OtherWeightsOfTheSameShapeAreRefused) {
    RawHeader h;
    h.fingerprint = 778;
    expect_refused(file_bytes(h), DWELL_ERR_INVALID_ARGUMENT,
                   "the session was saved with other weights than model.gguf (same shape");
}

// Version 2 files have no fingerprint: read as before, on the shape alone.
TEST_F(SessionFileTest, VersionTwoIsReadWithoutAFingerprint) {
    RawHeader h;
    h.version = 2;
    h.fingerprint = 0;
    dwell::SessionFileReader r(write(file_bytes(h)), kModel);
    EXPECT_EQ(r.header().version, 2u);
    EXPECT_EQ(r.header().pending_token, -1);
    EXPECT_EQ(r.read_tokens(), (std::vector<int32_t>{1, 2, 3}));
    (void)r.read_logits();
    EXPECT_EQ(r.read_host_data(), "");
    std::vector<uint8_t> row(r.header().row_bytes);
    for (int i = 0; i < 2 * 2 * 3; ++i) r.read_row(row);
    r.finish();
}

TEST_F(SessionFileTest, PendingTokenAndHostDataRoundTrip) {
    const fs::path p = dir_ / "w.dwses";
    dwell::SessionFileHeader h;
    h.kv_dtype = DWELL_F16;
    h.n_ctx = 16;
    h.n_past = 3;
    h.n_logits = 10;
    h.pending_token = 7;
    const std::string host = "{\"messages\":[]}";
    h.host_data_bytes = static_cast<uint32_t>(host.size());
    {
        dwell::SessionFileWriter w(p, kModel, h);
        const int32_t tokens[] = {1, 2, 3};
        w.write(tokens, sizeof tokens);
        for (int i = 0; i < 10; ++i) {
            const float f = 0.5f * static_cast<float>(i);
            w.write(&f, 4);
        }
        w.write(host.data(), host.size());
        for (int l = 0; l < 2; ++l)
            for (int which = 0; which < 2; ++which)
                for (int pos = 0; pos < 3; ++pos) {
                    const std::string row(8, static_cast<char>((l * 2 + which) * 16 + pos));
                    w.write(row.data(), row.size());
                }
        w.finish();
    }
    RawHeader raw;
    raw.pending = 7;
    raw.host_data = host;
    std::ifstream in(p, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), file_bytes(raw));
    dwell::SessionFileReader r(p, kModel);
    EXPECT_EQ(r.header().pending_token, 7);
    EXPECT_EQ(r.header().version, 4u);
    (void)r.read_tokens();
    (void)r.read_logits();
    EXPECT_EQ(r.read_host_data(), host);
    std::vector<uint8_t> row(8);
    for (int i = 0; i < 2 * 2 * 3; ++i) r.read_row(row);
    r.finish();
}

// A hybrid model (ABI 1.6): 3 + 2 state values per layer.
dwell::SessionFileModel hybrid_model() {
    dwell::SessionFileModel m = kModel;
    m.state_elems[0] = 3;
    m.state_elems[1] = 2;
    return m;
}

TEST_F(SessionFileTest, RecurrentStatesFollowTheKvRows) {
    RawHeader h;
    h.state_elems[0] = 3;
    h.state_elems[1] = 2;
    const fs::path p = write(file_bytes(h));
    dwell::SessionFileReader r(p, hybrid_model());
    EXPECT_EQ(r.read_tokens(), (std::vector<int32_t>{1, 2, 3}));
    (void)r.read_logits();
    (void)r.read_host_data();
    std::vector<uint8_t> row(r.header().row_bytes);
    for (int i = 0; i < 2 * 2 * 3; ++i) r.read_row(row);
    std::vector<float> states(2 * 5);
    r.read_states(states);
    EXPECT_EQ(states, (std::vector<float>{0, 1, 2, 3, 4, 100, 101, 102, 103, 104}));
    r.finish();

    // The writer lays out the same bytes.
    const fs::path w = dir_ / "w.dwses";
    {
        dwell::SessionFileHeader wh;
        wh.kv_dtype = DWELL_F16;
        wh.n_ctx = 16;
        wh.n_past = 3;
        wh.n_logits = 10;
        dwell::SessionFileWriter out(w, hybrid_model(), wh);
        const int32_t tokens[] = {1, 2, 3};
        out.write(tokens, sizeof tokens);
        for (int i = 0; i < 10; ++i) {
            const float f = 0.5f * static_cast<float>(i);
            out.write(&f, 4);
        }
        for (int l = 0; l < 2; ++l)
            for (int which = 0; which < 2; ++which)
                for (int pos = 0; pos < 3; ++pos) {
                    const std::string bytes(8, static_cast<char>((l * 2 + which) * 16 + pos));
                    out.write(bytes.data(), bytes.size());
                }
        out.write(states.data(), states.size() * sizeof(float));
        out.finish();
    }
    std::ifstream in(w, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), file_bytes(h));
}

// A state of other sizes, none where the model has one, or one where it
// has none: refused in one line, before anything is read.
TEST_F(SessionFileTest, RecurrentStatesThatDisagreeWithTheModelAreRefused) {
    RawHeader h;
    h.state_elems[0] = 3;
    h.state_elems[1] = 1;
    const auto refused = [&](const std::string& bytes, const dwell::SessionFileModel& model,
                             const std::string& phrase) {
        const fs::path p = write(bytes);
        try {
            dwell::SessionFileReader r(p, model);
            ADD_FAILURE() << "accepted; expected: " << phrase;
        } catch (const dwell::Error& e) {
            const std::string msg = e.what();
            EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT) << msg;
            EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << msg;
            EXPECT_NE(msg.find(phrase), std::string::npos) << msg << "\nexpected: " << phrase;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        }
    };
    refused(file_bytes(h), hybrid_model(),
            "the session's recurrent state (3 and 1 values per layer) does not match model.gguf "
            "(3 and 2 values per layer): run the conversation's prompt again");
    refused(file_bytes(h), kModel, "does not match model.gguf (0 and 0 values per layer)");
    h.state_elems[1] = 2;
    h.version = 3;
    refused(file_bytes(h), hybrid_model(),
            "a version 3 session file, from before dwell saved the recurrent state that "
            "model.gguf has (3 and 2 values per layer): run the conversation's prompt again");
}

// Version 3 files have no state: a model without one still restores them.
TEST_F(SessionFileTest, VersionThreeIsReadForModelsWithoutState) {
    RawHeader h;
    h.version = 3;
    dwell::SessionFileReader r(write(file_bytes(h)), kModel);
    EXPECT_EQ(r.header().version, 3u);
    EXPECT_EQ(r.read_tokens(), (std::vector<int32_t>{1, 2, 3}));
    (void)r.read_logits();
    (void)r.read_host_data();
    std::vector<uint8_t> row(r.header().row_bytes);
    for (int i = 0; i < 2 * 2 * 3; ++i) r.read_row(row);
    r.read_states({});
    r.finish();
}

TEST_F(SessionFileTest, PendingTokenOutsideTheVocabularyIsRefused) {
    RawHeader h;
    h.pending = 10;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "pending token 10 is outside the vocabulary");
    h.pending = -2;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "pending token -2");
}

TEST_F(SessionFileTest, HostDataBeyondTheFileOrTheLimitIsRefused) {
    RawHeader h;
    h.host_bytes = 1000;  // the header says 1000 bytes, the file holds none
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "the file is truncated");
    h.host_bytes = dwell::kSessionMaxHostData + 1;
    expect_refused(file_bytes(h), DWELL_ERR_CORRUPT, "bytes of host data exceed the limit");
}

TEST_F(SessionFileTest, FolderIsNotASessionFile) {
    try {
        dwell::SessionFileReader r(dir_, kModel);
        ADD_FAILURE() << "a folder was opened";
    } catch (const dwell::Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_IO);
        EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
}

dwell_model_info info_with_train(int64_t n_ctx_train) {
    dwell_model_info info{};
    info.struct_size = sizeof info;
    info.n_vocab = 32;
    info.n_ctx_train = n_ctx_train;
    info.n_layer = 1;
    info.kv_width = 8;
    return info;
}

TEST(SessionContextSize, DefaultIsTheTrainingContextCappedAt4096) {
    EXPECT_EQ(dwell::session_context_size(info_with_train(512), 0), 512);
    EXPECT_EQ(dwell::session_context_size(info_with_train(131072), 0), 4096);
    EXPECT_EQ(dwell::session_context_size(info_with_train(0), 0), 2048);
}

TEST(SessionContextSize, LongerThanTrainingIsAllowed) {
    EXPECT_EQ(dwell::session_context_size(info_with_train(512), 8192), 8192);
}

TEST(SessionContextSize, OutOfRangeIsRefusedNamingCtx) {
    for (const int32_t bad : {-1, (1 << 24) + 1, INT32_MAX}) {
        try {
            (void)dwell::session_context_size(info_with_train(512), bad);
            ADD_FAILURE() << bad << " was accepted";
        } catch (const dwell::Error& e) {
            EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT);
            EXPECT_EQ(std::string(e.what()), "--ctx " + std::to_string(bad) +
                                                 " is not a context size (use 1..16777216, or 0 "
                                                 "for the model's)");
        }
    }
}

}  // namespace
