// GgufFile: the real stories260K model, metadata getters, the ggml type
// table, and hostile files, each of which must be refused with a one-line
// message naming the file and the fault rather than crash or over-allocate.
#include "dwell/core/formats/gguf_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include "dwell/core/base/error.hpp"
#include "dwell/tools/gguf_writer.hpp"
#include "test_paths.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF"
constexpr uint32_t kTypeU32 = 4;
constexpr uint32_t kTypeString = 8;
constexpr uint32_t kTypeArray = 9;
constexpr uint32_t kGgmlF32 = 0;
constexpr uint32_t kGgmlQ8_0 = 8;

// Builds GGUF bytes by hand, so tests can say exactly what is wrong.
class Raw {
public:
    Raw& u8(uint8_t v) {
        b.push_back(v);
        return *this;
    }
    Raw& u16(uint16_t v) { return le(v, 2); }
    Raw& u32(uint32_t v) { return le(v, 4); }
    Raw& u64(uint64_t v) { return le(v, 8); }
    Raw& f32(float v) { return u32(std::bit_cast<uint32_t>(v)); }
    Raw& f64(double v) { return u64(std::bit_cast<uint64_t>(v)); }
    Raw& str(std::string_view s) {
        u64(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
        return u32(kMagic).u32(version).u64(n_tensors).u64(n_kv);
    }
    Raw& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(kTypeU32).u32(v); }
    Raw& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
        str(name).u32(static_cast<uint32_t>(dims.size()));
        for (uint64_t d : dims) u64(d);
        return u32(type).u64(offset);
    }
    Raw& pad(uint64_t alignment = 32) {
        b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
        return *this;
    }
    Raw& zeros(size_t n) {
        b.resize(b.size() + n, 0);
        return *this;
    }
    std::vector<uint8_t> b;

private:
    Raw& le(uint64_t v, int n) {
        for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
        return *this;
    }
};

// One F32 tensor of `dims` at `offset`, followed by `data_bytes` of data.
std::vector<uint8_t> one_tensor(std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                                size_t data_bytes) {
    Raw r;
    r.header(1, 0).tensor("t", std::move(dims), type, offset).pad().zeros(data_bytes);
    return r.b;
}

// A small valid file with metadata of several kinds and three tensors.
std::vector<uint8_t> small_valid_file() {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_uint32("llama.block_count", 2);
    const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "a", "b"};
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    const std::vector<float> scores = {0.f, -1.f, -2.f, -3.f, -4.f};
    w.add_float32_array("tokenizer.ggml.scores", scores);
    const std::vector<float> a(8 * 2, 1.5f);
    w.add_tensor("a", DWELL_F32, std::vector<int64_t>{8, 2},
                 {reinterpret_cast<const uint8_t*>(a.data()), a.size() * sizeof(float)});
    const std::vector<uint8_t> q(2 * sizeof(dwell_block_q8_0), 7);
    w.add_tensor("q", DWELL_Q8_0, std::vector<int64_t>{64}, q);
    const std::vector<float> c(5, 2.f);
    w.add_tensor("c", DWELL_F32, std::vector<int64_t>{5},
                 {reinterpret_cast<const uint8_t*>(c.data()), c.size() * sizeof(float)});
    return w.bytes();
}

class GgufFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("dwell_gguf_file_test_" + std::to_string(::getpid()) + "_" + info->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }

    fs::path put(const std::vector<uint8_t>& bytes) {
        const fs::path p = dir_ / ("f" + std::to_string(counter_++) + ".gguf");
        std::ofstream f(p, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
        return p;
    }

    // Opening `bytes` must fail with `status` and one line that starts with
    // the path and contains `phrase`.
    ::testing::AssertionResult fails_with(const std::vector<uint8_t>& bytes,
                                          std::string_view phrase,
                                          dwell_status status = DWELL_ERR_CORRUPT,
                                          const GgufLimits& limits = {}) {
        const fs::path p = put(bytes);
        try {
            GgufFile::open(p, limits);
        } catch (const Error& e) {
            const std::string msg = e.what();
            if (e.status() != status) {
                return ::testing::AssertionFailure()
                       << "status " << e.status() << " instead of " << status << ": " << msg;
            }
            if (msg.rfind(p.string() + ": ", 0) != 0) {
                return ::testing::AssertionFailure() << "message does not start with path: " << msg;
            }
            if (msg.find(phrase) == std::string::npos) {
                return ::testing::AssertionFailure() << "'" << phrase << "' not in: " << msg;
            }
            if (msg.find('\n') != std::string::npos) {
                return ::testing::AssertionFailure() << "message spans lines: " << msg;
            }
            return ::testing::AssertionSuccess() << msg;
        }
        return ::testing::AssertionFailure() << "opened without error; expected '" << phrase << "'";
    }

    fs::path dir_;
    int counter_ = 0;
};

// ---------------------------------------------------------------------------
// The real model

TEST_F(GgufFileTest, OpensRealStories260K) {
    DWELL_REQUIRE_MODEL(path, "stories260K.gguf");
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.file_size(), fs::file_size(path));
    ASSERT_EQ(f.tensors().size(), 48u);
    for (const auto& t : f.tensors()) {
        EXPECT_EQ(t.ggml_type, kGgmlF32) << t.name;
        EXPECT_EQ(t.dtype, DWELL_F32) << t.name;
        EXPECT_EQ(t.offset % 32, 0u) << t.name;
        EXPECT_LE(t.offset + t.size, f.file_size()) << t.name;
    }
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
    EXPECT_EQ(f.get_int("llama.block_count"), 5);
    EXPECT_EQ(f.get_int("llama.context_length"), 512);
    EXPECT_EQ(f.array_length("tokenizer.ggml.tokens"), 512u);
    EXPECT_EQ(f.array_type("tokenizer.ggml.tokens"), GgufType::STRING);
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.size(), 512u);
    EXPECT_EQ(tokens[0], "<unk>");
    EXPECT_EQ(tokens[1], "<s>");
    EXPECT_EQ(tokens[2], "</s>");
    EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores").size(), 512u);
    EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type").size(), 512u);
    EXPECT_TRUE(f.get_float("llama.attention.layer_norm_rms_epsilon").has_value());

    const auto* emb = f.find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->n_dims, 2);
    EXPECT_EQ(emb->ne[0], 64);
    EXPECT_EQ(emb->ne[1], 512);
    EXPECT_EQ(emb->ne[2], 1);
    EXPECT_EQ(emb->ne[3], 1);
    EXPECT_EQ(emb->size, 64u * 512u * 4u);
    EXPECT_EQ(f.find_tensor("no.such.tensor"), nullptr);
}

// ---------------------------------------------------------------------------
// Getters and the ggml type table

TEST_F(GgufFileTest, ReadsEveryScalarAndArrayType) {
    Raw r;
    r.header(0, 17);
    r.str("u8").u32(0).u8(200);
    r.str("i8").u32(1).u8(0x80);
    r.str("u16").u32(2).u16(60000);
    r.str("i16").u32(3).u16(0x8000);
    r.str("u32").u32(4).u32(4000000000u);
    r.str("i32").u32(5).u32(static_cast<uint32_t>(-5));
    r.str("f32").u32(6).f32(1.25f);
    r.str("b").u32(7).u8(1);
    r.str("s").u32(8).str("hello");
    r.str("u64").u32(10).u64(~uint64_t{0});
    r.str("i64").u32(11).u64(static_cast<uint64_t>(int64_t{-7000000000}));
    r.str("f64").u32(12).f64(-2.5);
    r.str("a_u8").u32(kTypeArray).u32(0).u64(3).u8(1).u8(2).u8(3);
    r.str("a_i16").u32(kTypeArray).u32(3).u64(2).u16(0xffff).u16(7);
    r.str("a_f64").u32(kTypeArray).u32(12).u64(2).f64(0.5).f64(-1.0);
    r.str("a_u64").u32(kTypeArray).u32(10).u64(1).u64(uint64_t{1} << 40);
    r.str("a_empty").u32(kTypeArray).u32(kTypeString).u64(0);
    const GgufFile f = GgufFile::open(put(r.b));

    EXPECT_EQ(f.get_int("u8"), 200);
    EXPECT_EQ(f.get_int("i8"), -128);
    EXPECT_EQ(f.get_int("u16"), 60000);
    EXPECT_EQ(f.get_int("i16"), -32768);
    EXPECT_EQ(f.get_int("u32"), 4000000000);
    EXPECT_EQ(f.get_int("i32"), -5);
    EXPECT_EQ(f.get_int("b"), 1);
    EXPECT_EQ(f.get_int("i64"), -7000000000);
    EXPECT_EQ(f.get_int("u64"), std::nullopt) << "does not fit int64";
    EXPECT_EQ(f.get_int("f32"), std::nullopt);
    EXPECT_EQ(f.get_int("s"), std::nullopt);
    EXPECT_EQ(f.get_int("missing"), std::nullopt);

    EXPECT_EQ(f.get_float("f32"), 1.25);
    EXPECT_EQ(f.get_float("f64"), -2.5);
    EXPECT_EQ(f.get_float("i32"), -5.0);
    EXPECT_EQ(f.get_float("u64"), 18446744073709551615.0);
    EXPECT_EQ(f.get_float("s"), std::nullopt);
    EXPECT_EQ(f.get_float("b"), std::nullopt);

    EXPECT_EQ(f.get_string("s"), "hello");
    EXPECT_EQ(f.get_string("u8"), std::nullopt);
    EXPECT_EQ(f.type_of("f64"), GgufType::FLOAT64);
    EXPECT_EQ(f.type_of("a_u8"), GgufType::ARRAY);
    EXPECT_EQ(f.type_of("missing"), std::nullopt);
    EXPECT_TRUE(f.has("b"));
    EXPECT_FALSE(f.has("B"));

    EXPECT_EQ(f.array_type("a_u8"), GgufType::UINT8);
    EXPECT_EQ(f.array_length("a_u8"), 3u);
    EXPECT_EQ(f.array_length("u8"), std::nullopt);
    EXPECT_EQ(f.get_int_array("a_u8"), (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(f.get_int_array("a_i16"), (std::vector<int32_t>{-1, 7}));
    EXPECT_EQ(f.get_float_array("a_f64"), (std::vector<float>{0.5f, -1.0f}));
    EXPECT_TRUE(f.get_string_array("a_empty").empty());
    EXPECT_TRUE(f.get_string_array("missing").empty());
    EXPECT_THROW(f.get_int_array("a_u64"), Error) << "2^40 does not fit int32";
    EXPECT_THROW(f.get_string_array("a_u8"), Error);
    EXPECT_THROW(f.get_float_array("a_u8"), Error);
    EXPECT_THROW(f.get_int_array("a_f64"), Error);
    EXPECT_THROW(f.get_int_array("u32"), Error) << "not an array";

    const std::vector<std::string> expected_keys = {
        "u8",  "i8",  "u16", "i16",  "u32",   "i32",   "f32",   "b",      "s",
        "u64", "i64", "f64", "a_u8", "a_i16", "a_f64", "a_u64", "a_empty"};
    EXPECT_EQ(f.keys(), expected_keys);
}

TEST_F(GgufFileTest, TypeErrorsNameFileAndKey) {
    Raw r;
    r.header(0, 1).str("arr").u32(kTypeArray).u32(0).u64(1).u8(5);
    const fs::path p = put(r.b);
    const GgufFile f = GgufFile::open(p);
    try {
        f.get_string_array("arr");
        FAIL() << "no throw";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << msg;
        EXPECT_NE(msg.find("'arr' is an array of uint8"), std::string::npos) << msg;
    }
}

TEST_F(GgufFileTest, GgmlTypeTable) {
    EXPECT_EQ(dtype_from_ggml(0), DWELL_F32);
    EXPECT_EQ(dtype_from_ggml(1), DWELL_F16);
    EXPECT_EQ(dtype_from_ggml(2), DWELL_Q4_0);
    EXPECT_EQ(dtype_from_ggml(8), DWELL_Q8_0);
    EXPECT_EQ(dtype_from_ggml(12), DWELL_Q4_K);
    EXPECT_EQ(dtype_from_ggml(14), DWELL_Q6_K);
    EXPECT_EQ(dtype_from_ggml(3), DWELL_Q4_1);
    EXPECT_EQ(dtype_from_ggml(6), DWELL_Q5_0);
    EXPECT_EQ(dtype_from_ggml(7), DWELL_Q5_1);
    EXPECT_EQ(dtype_from_ggml(13), DWELL_Q5_K);
    EXPECT_EQ(dtype_from_ggml(26), DWELL_I32);
    EXPECT_EQ(dtype_from_ggml(30), DWELL_BF16);
    for (uint32_t id : {9u, 10u, 11u, 15u, 20u, 24u, 28u, 34u, 35u}) {
        EXPECT_EQ(dtype_from_ggml(id), DWELL_DTYPE_COUNT) << id;
        EXPECT_GT(ggml_block_elems(id), 0) << id;
    }
    for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u, 0xffffffffu}) {
        EXPECT_EQ(dtype_from_ggml(id), DWELL_DTYPE_COUNT) << id;
        EXPECT_STREQ(ggml_type_name(id), "unknown") << id;
        EXPECT_EQ(ggml_block_elems(id), 0) << id;
        EXPECT_EQ(ggml_block_bytes(id), 0u) << id;
    }
    for (dwell_dtype d : {DWELL_F32, DWELL_F16, DWELL_BF16, DWELL_Q8_0, DWELL_Q4_0, DWELL_Q4_K,
                          DWELL_Q6_K, DWELL_I32, DWELL_Q4_1, DWELL_Q5_0, DWELL_Q5_1, DWELL_Q5_K}) {
        EXPECT_EQ(dtype_from_ggml(ggml_from_dtype(d)), d) << dwell_dtype_name(d);
        if (dwell_dtype_block_elems(d) != 0) {
            // The SDK's own block geometry and ggml's must agree.
            EXPECT_EQ(ggml_block_elems(ggml_from_dtype(d)), dwell_dtype_block_elems(d));
            EXPECT_EQ(ggml_block_bytes(ggml_from_dtype(d)), dwell_dtype_block_bytes(d));
        }
    }
    EXPECT_THROW(ggml_from_dtype(DWELL_I4_G), Error);
    EXPECT_THROW(ggml_from_dtype(DWELL_FP8_E4M3), Error);
    EXPECT_THROW(ggml_from_dtype(DWELL_DTYPE_COUNT), Error);

    EXPECT_STREQ(ggml_type_name(12), "q4_K");
    EXPECT_EQ(ggml_block_elems(12), 256);
    EXPECT_EQ(ggml_block_bytes(12), 144u);
    EXPECT_EQ(ggml_block_bytes(14), 210u);
    EXPECT_EQ(ggml_block_bytes(10), 84u);
    EXPECT_EQ(ggml_block_bytes(11), 110u);
    EXPECT_EQ(ggml_block_bytes(13), 176u);
    EXPECT_EQ(ggml_block_bytes(15), 292u);
    EXPECT_EQ(ggml_block_bytes(23), 136u);
    EXPECT_EQ(ggml_block_bytes(29), 56u);
    EXPECT_EQ(ggml_block_bytes(34), 54u);
    EXPECT_EQ(ggml_block_bytes(35), 66u);
}

TEST_F(GgufFileTest, UnsupportedGgmlTypeStillOpens) {
    // q2_K: known to ggml, not to dwell; the model loader decides later.
    const GgufFile f = GgufFile::open(put(one_tensor({256, 2}, 10, 0, 2 * 84)));
    ASSERT_EQ(f.tensors().size(), 1u);
    EXPECT_EQ(f.tensors()[0].ggml_type, 10u);
    EXPECT_EQ(f.tensors()[0].dtype, DWELL_DTYPE_COUNT);
    EXPECT_EQ(f.tensors()[0].size, 2u * 84u);
}

TEST_F(GgufFileTest, AcceptsVersion2) {
    Raw r;
    r.header(1, 1, 2).kv_u32("k", 9).tensor("t", {4}, kGgmlF32, 0).pad().zeros(16);
    const GgufFile f = GgufFile::open(put(r.b));
    EXPECT_EQ(f.version(), 2u);
    EXPECT_EQ(f.get_int("k"), 9);
    EXPECT_EQ(f.tensors().at(0).ne[0], 4);
}

TEST_F(GgufFileTest, HeaderOnlyFileWithoutPaddingOpens) {
    Raw r;
    r.header(0, 1).kv_u32("k", 1);
    const GgufFile f = GgufFile::open(put(r.b));
    EXPECT_TRUE(f.tensors().empty());
}

TEST_F(GgufFileTest, StaysValidAfterMove) {
    GgufFile a = GgufFile::open(put(small_valid_file()));
    const uint8_t* data = a.find_tensor("q")->data;
    GgufFile b = std::move(a);
    EXPECT_EQ(b.find_tensor("q")->data, data);
    EXPECT_EQ(data[0], 7);
    EXPECT_EQ(b.get_string("general.architecture"), "llama");
    GgufFile c = GgufFile::open(put(small_valid_file()));
    c = std::move(b);
    EXPECT_EQ(c.get_string_array("tokenizer.ggml.tokens").at(4), "b");
}

// ---------------------------------------------------------------------------
// I/O failures

TEST_F(GgufFileTest, MissingFileIsIoError) {
    const fs::path p = dir_ / "does_not_exist.gguf";
    try {
        GgufFile::open(p);
        FAIL() << "no throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_IO);
        EXPECT_EQ(std::string(e.what()).rfind(p.string() + ": cannot open", 0), 0u) << e.what();
    }
}

TEST_F(GgufFileTest, EmptyFileIsIoError) {
    EXPECT_TRUE(fails_with({}, "empty file", DWELL_ERR_IO));
}

TEST_F(GgufFileTest, DirectoryIsIoError) {
    try {
        GgufFile::open(dir_);
        FAIL() << "no throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_IO);
        EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos);
    }
}

// ---------------------------------------------------------------------------
// Header faults

TEST_F(GgufFileTest, BadMagic) {
    Raw r;
    r.u32(0x12345678).u32(3).u64(0).u64(0);
    EXPECT_TRUE(fails_with(r.b, "not a GGUF file (bad magic 0x12345678)"));
}

TEST_F(GgufFileTest, UnsupportedVersion) {
    for (uint32_t v : {0u, 1u, 4u, 99u}) {
        Raw r;
        r.header(0, 0, v);
        EXPECT_TRUE(fails_with(r.b, "unsupported GGUF version " + std::to_string(v)));
    }
    Raw be;
    be.header(0, 0, 0x03000000);
    EXPECT_TRUE(fails_with(be.b, "big-endian"));
}

TEST_F(GgufFileTest, TooShortForMagic) {
    EXPECT_TRUE(fails_with({'G', 'G'}, "truncated: magic runs past the end of the file (2 bytes)"));
}

TEST_F(GgufFileTest, AbsurdTensorCount) {
    Raw r;
    r.header(uint64_t{1} << 40, 0);
    EXPECT_TRUE(fails_with(r.b, "tensor count 1099511627776 exceeds the limit of 65536"));
}

TEST_F(GgufFileTest, AbsurdKvCount) {
    Raw r;
    r.header(0, ~uint64_t{0});
    EXPECT_TRUE(fails_with(r.b, "metadata pair count 18446744073709551615 exceeds the limit"));
}

TEST_F(GgufFileTest, CountsWithinLimitsButPastEnd) {
    // Large but allowed counts must not make the reader reserve for them.
    Raw kv;
    kv.header(0, 65536);
    EXPECT_TRUE(fails_with(kv.b, "truncated: metadata pair 1 of 65536 key runs past the end"));
    Raw t;
    t.header(65536, 0);
    EXPECT_TRUE(fails_with(t.b, "truncated: tensor info 1 of 65536 name runs past the end"));
}

TEST_F(GgufFileTest, CustomLimits) {
    GgufLimits limits;
    limits.max_kv = 1;
    Raw r;
    r.header(0, 2).kv_u32("a", 1).kv_u32("b", 2);
    EXPECT_TRUE(
        fails_with(r.b, "metadata pair count 2 exceeds the limit of 1", DWELL_ERR_CORRUPT, limits));
    limits = {};
    limits.max_string = 3;
    Raw s;
    s.header(0, 1).kv_u32("long_key", 1);
    EXPECT_TRUE(
        fails_with(s.b, "string length 8 exceeds the limit of 3", DWELL_ERR_CORRUPT, limits));
}

// ---------------------------------------------------------------------------
// Metadata faults

TEST_F(GgufFileTest, AbsurdStringLength) {
    Raw key;
    key.header(0, 1).u64(uint64_t{1} << 62);
    EXPECT_TRUE(fails_with(key.b,
                           "metadata pair 1 of 1 key: string length 4611686018427387904 "
                           "exceeds the limit of 1048576"));
    Raw value;
    value.header(0, 1).str("name").u32(kTypeString).u64(uint64_t{1} << 62);
    EXPECT_TRUE(fails_with(value.b, "('name') value: string length 4611686018427387904"));
    Raw past_end;  // within the limit, beyond the file
    past_end.header(0, 1).str("name").u32(kTypeString).u64(1000).zeros(10);
    EXPECT_TRUE(fails_with(past_end.b, "truncated: metadata pair 1 of 1 ('name') value runs past"));
}

TEST_F(GgufFileTest, AbsurdArrayLength) {
    Raw r;
    r.header(0, 1).str("arr").u32(kTypeArray).u32(kTypeU32).u64(uint64_t{1} << 62);
    EXPECT_TRUE(fails_with(r.b, "('arr'): array length 4611686018427387904 exceeds the limit"));
    // Within the limit: 2^24 uint64 elements need 128 MiB the file lacks.
    Raw big;
    big.header(0, 1).str("arr").u32(kTypeArray).u32(10).u64(uint64_t{1} << 24).zeros(64);
    EXPECT_TRUE(fails_with(big.b, "truncated: metadata pair 1 of 1 ('arr') (16777216 x uint64)"));
    // Strings: each element is checked as it is walked.
    Raw strs;
    strs.header(0, 1).str("arr").u32(kTypeArray).u32(kTypeString).u64(1000).str("x").str("y");
    EXPECT_TRUE(fails_with(strs.b, "('arr') element 3 of 1000 runs past the end"));
}

TEST_F(GgufFileTest, NestedArrayRejected) {
    Raw r;
    r.header(0, 1).str("arr").u32(kTypeArray).u32(kTypeArray).u64(1).u32(0).u64(0);
    EXPECT_TRUE(fails_with(r.b, "('arr'): arrays of arrays are not supported"));
}

TEST_F(GgufFileTest, UnknownValueType) {
    Raw r;
    r.header(0, 1).str("k").u32(13).u32(0);
    EXPECT_TRUE(fails_with(r.b, "metadata pair 1 of 1 ('k'): unknown value type 13"));
    Raw a;
    a.header(0, 1).str("k").u32(kTypeArray).u32(0xffffffff).u64(0);
    EXPECT_TRUE(fails_with(a.b, "('k'): unknown array element type 4294967295"));
}

TEST_F(GgufFileTest, BadBool) {
    Raw r;
    r.header(0, 1).str("flag").u32(7).u8(2);
    EXPECT_TRUE(fails_with(r.b, "('flag') value: bool value 2 is not 0 or 1"));
    Raw a;
    a.header(0, 1).str("flags").u32(kTypeArray).u32(7).u64(3).u8(0).u8(1).u8(255);
    EXPECT_TRUE(fails_with(a.b, "('flags'): element 3: bool value 255 is not 0 or 1"));
}

TEST_F(GgufFileTest, DuplicateKey) {
    Raw r;
    r.header(0, 3).kv_u32("a", 1).kv_u32("b", 2).kv_u32("a", 3);
    EXPECT_TRUE(fails_with(r.b, "duplicate metadata key 'a' (pairs 1 and 3)"));
}

TEST_F(GgufFileTest, KeyWithControlCharactersStaysOneLine) {
    Raw r;
    r.header(0, 1).str("bad\nkey").u32(99);
    EXPECT_TRUE(fails_with(r.b, "('bad\\x0akey'): unknown value type 99"));
}

TEST_F(GgufFileTest, BadAlignment) {
    for (uint32_t a : {0u, 3u, 48u}) {
        Raw r;
        r.header(0, 1).kv_u32("general.alignment", a);
        EXPECT_TRUE(
            fails_with(r.b, "general.alignment " + std::to_string(a) + " is not a power of two"));
    }
    Raw s;
    s.header(0, 1).str("general.alignment").u32(kTypeString).str("32");
    EXPECT_TRUE(fails_with(s.b, "general.alignment has type string, expected uint32"));
}

TEST_F(GgufFileTest, HonoursAlignmentKey) {
    Raw r;
    r.header(1, 1).kv_u32("general.alignment", 64).tensor("t", {4}, kGgmlF32, 0).pad(64).zeros(16);
    const GgufFile f = GgufFile::open(put(r.b));
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.tensors()[0].offset % 64, 0u);
    // Offsets must then be multiples of 64, not merely 32.
    Raw m;
    m.header(1, 1).kv_u32("general.alignment", 64).tensor("t", {4}, kGgmlF32, 32).pad(64).zeros(64);
    EXPECT_TRUE(fails_with(m.b, "offset 32 is not a multiple of the alignment 64"));
}

// ---------------------------------------------------------------------------
// Tensor info faults

TEST_F(GgufFileTest, NDimsOutOfRange) {
    Raw zero;
    zero.header(1, 0).str("t").u32(0).u32(kGgmlF32).u64(0).pad().zeros(32);
    EXPECT_TRUE(fails_with(zero.b, "tensor info 1 of 1 ('t'): n_dims 0 is out of range 1..4"));
    EXPECT_TRUE(fails_with(one_tensor({1, 1, 1, 1, 1}, kGgmlF32, 0, 32),
                           "('t'): n_dims 5 is out of range 1..4"));
}

TEST_F(GgufFileTest, ZeroDim) {
    EXPECT_TRUE(fails_with(one_tensor({4, 0}, kGgmlF32, 0, 32), "('t'): dimension 1 is 0"));
}

TEST_F(GgufFileTest, DimOverLimit) {
    EXPECT_TRUE(fails_with(one_tensor({4, (uint64_t{1} << 40) + 1}, kGgmlF32, 0, 32),
                           "dimension 1 is 1099511627777, over the limit of 1099511627776"));
    EXPECT_TRUE(fails_with(one_tensor({~uint64_t{0}}, kGgmlF32, 0, 32), "over the limit"));
}

TEST_F(GgufFileTest, DimProductOverflow) {
    const uint64_t big = uint64_t{1} << 40;
    EXPECT_TRUE(fails_with(one_tensor({big, big}, kGgmlF32, 0, 32),
                           "('t'): element count overflows (dimension 1"));
    // 2^63 elements wraps no uint64 but is past int64.
    EXPECT_TRUE(fails_with(one_tensor({big, uint64_t{1} << 23}, kGgmlF32, 0, 32),
                           "element count overflows"));
    EXPECT_TRUE(fails_with(one_tensor({1 << 16, 1 << 16, 1 << 16, 1 << 16}, kGgmlF32, 0, 32),
                           "element count overflows (dimension 3"));
}

TEST_F(GgufFileTest, HugeButRepresentableTensorIsPastEnd) {
    // 2^62 f32 elements: the element count fits, the byte size (2^64) does not.
    EXPECT_TRUE(fails_with(one_tensor({uint64_t{1} << 31, uint64_t{1} << 31}, kGgmlF32, 0, 32),
                           "data size overflows"));
    EXPECT_TRUE(fails_with(one_tensor({uint64_t{1} << 30, uint64_t{1} << 30}, kGgmlF32, 0, 32),
                           "runs past the end of the file"));
}

TEST_F(GgufFileTest, UnknownGgmlType) {
    for (uint32_t type : {4u, 5u, 31u, 33u, 36u, 38u, 40u, 0xffffffffu}) {
        EXPECT_TRUE(fails_with(one_tensor({32}, type, 0, 256),
                               "('t'): unknown ggml type " + std::to_string(type)));
    }
}

TEST_F(GgufFileTest, RowNotWholeBlocks) {
    EXPECT_TRUE(fails_with(one_tensor({33, 2}, kGgmlQ8_0, 0, 256),
                           "('t'): ne[0] = 33 is not a multiple of the q8_0 block size 32"));
    EXPECT_TRUE(fails_with(one_tensor({128}, 12, 0, 256),
                           "ne[0] = 128 is not a multiple of the q4_K block size 256"));
}

TEST_F(GgufFileTest, TensorOffsetPastEnd) {
    EXPECT_TRUE(fails_with(one_tensor({8}, kGgmlF32, 64, 32),
                           "truncated: tensor 't' data [offset 128, 32 bytes] runs past the end "
                           "of the file (96 bytes)"));
}

TEST_F(GgufFileTest, TensorOffsetPlusSizeOverflows) {
    const uint64_t off = ~uint64_t{0} - 31;  // a multiple of 32
    EXPECT_TRUE(fails_with(one_tensor({8}, kGgmlF32, off, 32),
                           "tensor 't': offset " + std::to_string(off) + " + size 32 overflows"));
}

TEST_F(GgufFileTest, MisalignedOffset) {
    EXPECT_TRUE(fails_with(one_tensor({4}, kGgmlF32, 17, 64),
                           "('t'): offset 17 is not a multiple of the alignment 32"));
}

TEST_F(GgufFileTest, DuplicateTensorName) {
    Raw r;
    r.header(2, 0).tensor("w", {8}, kGgmlF32, 0).tensor("w", {8}, kGgmlF32, 32).pad().zeros(64);
    EXPECT_TRUE(fails_with(r.b, "duplicate tensor name 'w' (tensors 1 and 2)"));
}

TEST_F(GgufFileTest, NulInTensorName) {
    Raw r;
    r.header(1, 0).tensor(std::string("w\0x", 3), {8}, kGgmlF32, 0).pad().zeros(32);
    EXPECT_TRUE(fails_with(r.b, "tensor info 1 of 1 ('w\\x00x'): name contains a NUL byte"));
}

// ---------------------------------------------------------------------------
// Truncation and random damage

TEST_F(GgufFileTest, TruncatedAtEveryCut) {
    const std::vector<uint8_t> full = small_valid_file();
    uint64_t data_end = 0;
    {
        const GgufFile f = GgufFile::open(put(full));
        ASSERT_EQ(f.tensors().size(), 3u);
        for (const auto& t : f.tensors()) data_end = std::max(data_end, t.offset + t.size);
    }
    ASSERT_LE(data_end, full.size());
    // Every prefix short of the last tensor's end, cuts in tensor data included.
    for (size_t cut = 0; cut < data_end; ++cut) {
        const std::vector<uint8_t> prefix(full.begin(), full.begin() + cut);
        if (cut == 0) {
            EXPECT_TRUE(fails_with(prefix, "empty file", DWELL_ERR_IO));
        } else {
            EXPECT_TRUE(fails_with(prefix, "truncated: ")) << "cut at " << cut;
        }
        fs::remove(dir_ / ("f" + std::to_string(counter_ - 1) + ".gguf"));
    }
    // Cuts in the trailing padding leave every tensor whole.
    for (size_t cut = data_end; cut <= full.size(); ++cut) {
        const std::vector<uint8_t> prefix(full.begin(), full.begin() + cut);
        EXPECT_NO_THROW(GgufFile::open(put(prefix))) << "cut at " << cut;
    }
}

TEST_F(GgufFileTest, RandomDamageNeverCrashes) {
    const std::vector<uint8_t> full = small_valid_file();
    std::mt19937 rng(12345);
    int opened = 0;
    int refused = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        std::vector<uint8_t> bytes = full;
        const int n_flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < n_flips; ++k) {
            const size_t at = rng() % bytes.size();
            // Mostly small ints and all-ones, the values that break lengths.
            switch (rng() % 4) {
                case 0:
                    bytes[at] = static_cast<uint8_t>(rng());
                    break;
                case 1:
                    bytes[at] = 0xff;
                    break;
                case 2:
                    bytes[at] = 0;
                    break;
                default:
                    bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
                    break;
            }
        }
        if (rng() % 8 == 0) bytes.resize(rng() % bytes.size() + 1);
        const fs::path p = put(bytes);
        try {
            const GgufFile f = GgufFile::open(p);
            ++opened;
            // Whatever opened must be safe to read in full.
            for (const std::string& key : f.keys()) {
                f.get_int(key);
                f.get_float(key);
                f.get_string(key);
                try {
                    f.get_string_array(key);
                    f.get_float_array(key);
                    f.get_int_array(key);
                } catch (const Error&) {
                }
            }
            uint64_t sum = 0;
            for (const auto& t : f.tensors()) {
                ASSERT_LE(t.offset + t.size, f.file_size());
                for (uint64_t i = 0; i < t.size; ++i) sum += t.data[i];
            }
            (void)sum;
        } catch (const Error& e) {
            ++refused;
            const std::string msg = e.what();
            EXPECT_EQ(msg.rfind(p.string() + ": ", 0), 0u) << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        }
        fs::remove(p);
    }
    EXPECT_GT(opened, 0);
    EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace dwell
