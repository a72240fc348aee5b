// GgufWriter: what it writes, GgufFile reads back unchanged, laid out as
// the format requires; malformed tensors are refused at add time.
#include "dwell/tools/gguf_writer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

template <typename T>
std::span<const uint8_t> as_bytes(const std::vector<T>& v) {
    return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

uint32_t read_u32(const std::vector<uint8_t>& b, size_t at) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{b[at + i]} << (8 * i);
    return v;
}

uint64_t read_u64(const std::vector<uint8_t>& b, size_t at) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{b[at + i]} << (8 * i);
    return v;
}

// Tensors in each format the runtime loads first, filled with values that
// make a misplaced byte visible.
struct Fixture {
    std::vector<float> f32;
    std::vector<uint16_t> f16;
    std::vector<dwell_block_q8_0> q8;
    std::vector<dwell_block_q4_0> q4;
    std::vector<int32_t> i32;

    Fixture() {
        for (int i = 0; i < 8 * 3; ++i) f32.push_back(0.25f * static_cast<float>(i) - 3.f);
        for (int i = 0; i < 16 * 2; ++i) {
            f16.push_back(dwell_fp32_to_fp16(static_cast<float>(i) / 8.f));
        }
        for (int b = 0; b < 2 * 2; ++b) {
            dwell_block_q8_0 blk{};
            blk.d = dwell_fp32_to_fp16(0.5f + static_cast<float>(b));
            for (int j = 0; j < DWELL_QK8_0; ++j) blk.qs[j] = static_cast<int8_t>(j - 16 + b);
            q8.push_back(blk);
        }
        for (int b = 0; b < 3; ++b) {
            dwell_block_q4_0 blk{};
            blk.d = dwell_fp32_to_fp16(0.125f * static_cast<float>(b + 1));
            for (int j = 0; j < DWELL_QK4_0 / 2; ++j) {
                blk.qs[j] = static_cast<uint8_t>((j + b) & 0xf) |
                            static_cast<uint8_t>(((15 - j) & 0xf) << 4);
            }
            q4.push_back(blk);
        }
        for (int i = 0; i < 6; ++i) i32.push_back(i * 1000 - 2500);
    }

    void add_to(GgufWriter& w) const {
        w.add_tensor("t.f32", DWELL_F32, std::vector<int64_t>{8, 3}, as_bytes(f32));
        w.add_tensor("t.f16", DWELL_F16, std::vector<int64_t>{16, 2}, as_bytes(f16));
        w.add_tensor("t.q8_0", DWELL_Q8_0, std::vector<int64_t>{64, 2}, as_bytes(q8));
        w.add_tensor("t.q4_0", DWELL_Q4_0, std::vector<int64_t>{32, 1, 3}, as_bytes(q4));
        w.add_tensor("t.i32", DWELL_I32, std::vector<int64_t>{1, 2, 1, 3}, as_bytes(i32));
    }
};

class GgufWriterTest : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("dwell_gguf_writer_test_" + std::to_string(::getpid()) + "_" + info->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    fs::path dir_;
};

void expect_tensor(const GgufFile& f, const std::string& name, dwell_dtype dtype,
                   std::vector<int64_t> ne, std::span<const uint8_t> data) {
    SCOPED_TRACE(name);
    const GgufFile::TensorInfo* t = f.find_tensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, dtype);
    EXPECT_EQ(t->ggml_type, ggml_from_dtype(dtype));
    EXPECT_EQ(t->n_dims, static_cast<int32_t>(ne.size()));
    ne.resize(DWELL_MAX_DIMS, 1);
    for (int d = 0; d < DWELL_MAX_DIMS; ++d) EXPECT_EQ(t->ne[d], ne[d]) << "dim " << d;
    EXPECT_EQ(t->offset % f.alignment(), 0u);
    ASSERT_EQ(t->size, data.size());
    EXPECT_EQ(std::memcmp(t->data, data.data(), data.size()), 0);
}

TEST_F(GgufWriterTest, RoundTripEveryTypeAndTensor) {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_uint32("u32", 4000000000u);
    w.add_int32("i32", -123456);
    w.add_uint64("u64", uint64_t{1} << 50);
    w.add_float32("f32", 1e-5f);
    w.add_bool("yes", true);
    w.add_bool("no", false);
    w.add_string("empty", "");
    w.add_string("utf8", "h\xc3\xa9llo \xe2\x96\x81world");
    const std::vector<std::string> tokens = {"<unk>", "", "\xe2\x96\x81the", std::string(300, 'x')};
    w.add_string_array("tokens", tokens);
    const std::vector<float> scores = {0.f, -1.5f, 3.25f, -INFINITY};
    w.add_float32_array("scores", scores);
    const std::vector<int32_t> types = {1, 2, -3, 2147483647};
    w.add_int32_array("types", types);
    w.add_int32_array("no_ints", {});
    const Fixture fx;
    fx.add_to(w);

    const fs::path path = dir_ / "round.gguf";
    w.write(path);
    const GgufFile f = GgufFile::open(path);

    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_FALSE(f.has("general.alignment")) << "default alignment is implied";
    const std::vector<std::string> keys = {"general.architecture",
                                           "u32",
                                           "i32",
                                           "u64",
                                           "f32",
                                           "yes",
                                           "no",
                                           "empty",
                                           "utf8",
                                           "tokens",
                                           "scores",
                                           "types",
                                           "no_ints"};
    EXPECT_EQ(f.keys(), keys);

    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.type_of("u32"), GgufType::UINT32);
    EXPECT_EQ(f.get_int("u32"), 4000000000);
    EXPECT_EQ(f.type_of("i32"), GgufType::INT32);
    EXPECT_EQ(f.get_int("i32"), -123456);
    EXPECT_EQ(f.type_of("u64"), GgufType::UINT64);
    EXPECT_EQ(f.get_int("u64"), int64_t{1} << 50);
    EXPECT_EQ(f.type_of("f32"), GgufType::FLOAT32);
    EXPECT_EQ(f.get_float("f32"), static_cast<double>(1e-5f));
    EXPECT_EQ(f.type_of("yes"), GgufType::BOOL);
    EXPECT_EQ(f.get_int("yes"), 1);
    EXPECT_EQ(f.get_int("no"), 0);
    EXPECT_EQ(f.get_string("empty"), "");
    EXPECT_EQ(f.get_string("utf8"), "h\xc3\xa9llo \xe2\x96\x81world");

    EXPECT_EQ(f.array_type("tokens"), GgufType::STRING);
    const auto got_tokens = f.get_string_array("tokens");
    ASSERT_EQ(got_tokens.size(), tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(got_tokens[i], tokens[i]) << i;
    EXPECT_EQ(f.array_type("scores"), GgufType::FLOAT32);
    EXPECT_EQ(f.get_float_array("scores"), scores);
    EXPECT_EQ(f.array_type("types"), GgufType::INT32);
    EXPECT_EQ(f.get_int_array("types"), types);
    EXPECT_EQ(f.array_length("no_ints"), 0u);
    EXPECT_TRUE(f.get_int_array("no_ints").empty());

    ASSERT_EQ(f.tensors().size(), 5u);
    EXPECT_EQ(f.tensors()[0].name, "t.f32");
    EXPECT_EQ(f.tensors()[4].name, "t.i32");
    expect_tensor(f, "t.f32", DWELL_F32, {8, 3}, as_bytes(fx.f32));
    expect_tensor(f, "t.f16", DWELL_F16, {16, 2}, as_bytes(fx.f16));
    expect_tensor(f, "t.q8_0", DWELL_Q8_0, {64, 2}, as_bytes(fx.q8));
    expect_tensor(f, "t.q4_0", DWELL_Q4_0, {32, 1, 3}, as_bytes(fx.q4));
    expect_tensor(f, "t.i32", DWELL_I32, {1, 2, 1, 3}, as_bytes(fx.i32));

    // Decoded values, not only bytes, survive.
    const auto* q8 = f.find_tensor("t.q8_0");
    dwell_block_q8_0 blk;
    std::memcpy(&blk, q8->data + 3 * sizeof blk, sizeof blk);
    EXPECT_EQ(dwell_fp16_to_fp32(blk.d), 3.5f);
    EXPECT_EQ(blk.qs[0], -16 + 3);
    float first;
    std::memcpy(&first, f.find_tensor("t.f32")->data, sizeof first);
    EXPECT_EQ(first, -3.f);
}

TEST_F(GgufWriterTest, HeaderLayout) {
    GgufWriter w;
    w.add_uint32("k", 7);
    const std::vector<float> x(4, 1.f);
    w.add_tensor("x", DWELL_F32, std::vector<int64_t>{4}, as_bytes(x));
    const std::vector<uint8_t> b = w.bytes();
    EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "GGUF");
    EXPECT_EQ(read_u32(b, 4), 3u);
    EXPECT_EQ(read_u64(b, 8), 1u);   // tensors
    EXPECT_EQ(read_u64(b, 16), 1u);  // metadata pairs
    EXPECT_EQ(read_u64(b, 24), 1u);  // key length
    EXPECT_EQ(b[32], 'k');
    EXPECT_EQ(read_u32(b, 33), 4u);  // uint32
    EXPECT_EQ(read_u32(b, 37), 7u);
    // Tensor info: name, n_dims, ne[0], type, offset; then padding to 32.
    EXPECT_EQ(read_u64(b, 41), 1u);
    EXPECT_EQ(b[49], 'x');
    EXPECT_EQ(read_u32(b, 50), 1u);
    EXPECT_EQ(read_u64(b, 54), 4u);
    EXPECT_EQ(read_u32(b, 62), 0u);  // ggml f32
    EXPECT_EQ(read_u64(b, 66), 0u);
    for (size_t i = 74; i < 96; ++i) EXPECT_EQ(b[i], 0) << "header padding at " << i;
    ASSERT_EQ(b.size(), 128u) << "data at 96, padded to 128";
    float v;
    std::memcpy(&v, b.data() + 96, sizeof v);
    EXPECT_EQ(v, 1.f);
}

TEST_F(GgufWriterTest, BytesMatchWrittenFile) {
    GgufWriter w;
    w.add_string("a", "b");
    Fixture().add_to(w);
    const fs::path path = dir_ / "same.gguf";
    w.write(path);
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
    EXPECT_EQ(on_disk, w.bytes());
}

// A writer that spills its tensors to a temporary (synth's files larger than
// memory) writes the same bytes as one that holds them, at odd alignments
// too, and leaves nothing behind in the folder but the file.
TEST_F(GgufWriterTest, SpilledTensorsWriteTheSameFile) {
    for (uint64_t alignment : {32u, 4096u}) {
        SCOPED_TRACE(alignment);
        GgufWriter held(alignment), spilled(alignment);
        spilled.spill_tensors_to(dir_);
        for (GgufWriter* w : {&held, &spilled}) {
            w->add_string("a", "b");
            Fixture().add_to(*w);
        }
        EXPECT_THROW(spilled.bytes(), Error);
        const fs::path path = dir_ / "spilled.gguf";
        spilled.write(path);
        std::ifstream in(path, std::ios::binary);
        const std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(in)),
                                           std::istreambuf_iterator<char>());
        EXPECT_EQ(on_disk, held.bytes());
        EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
        fs::remove(path);
    }
    GgufWriter late;
    Fixture().add_to(late);
    EXPECT_THROW(late.spill_tensors_to(dir_), Error);
}

TEST_F(GgufWriterTest, CustomAlignmentWritesKey) {
    for (uint64_t alignment : {1u, 8u, 64u, 4096u}) {
        SCOPED_TRACE(alignment);
        GgufWriter w(alignment);
        w.add_uint32("k", 1);
        const Fixture fx;
        fx.add_to(w);
        const fs::path path = dir_ / ("a" + std::to_string(alignment) + ".gguf");
        w.write(path);
        const GgufFile f = GgufFile::open(path);
        EXPECT_EQ(f.alignment(), alignment);
        EXPECT_EQ(f.type_of("general.alignment"), GgufType::UINT32);
        EXPECT_EQ(f.get_int("general.alignment"), static_cast<int64_t>(alignment));
        EXPECT_EQ(f.get_int("k"), 1);
        for (const auto& t : f.tensors()) EXPECT_EQ(t.offset % alignment, 0u) << t.name;
        expect_tensor(f, "t.q4_0", DWELL_Q4_0, {32, 1, 3}, as_bytes(fx.q4));
        expect_tensor(f, "t.i32", DWELL_I32, {1, 2, 1, 3}, as_bytes(fx.i32));
    }
}

TEST_F(GgufWriterTest, EmptyWriterMakesValidFile) {
    const fs::path path = dir_ / "empty.gguf";
    GgufWriter().write(path);
    const GgufFile f = GgufFile::open(path);
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_TRUE(f.keys().empty());
}

TEST_F(GgufWriterTest, KQuantTensorsRoundTrip) {
    GgufWriter w;
    const std::vector<uint8_t> q4k(2 * 144, 0x5a);
    const std::vector<uint8_t> q6k(3 * 210, 0xa5);
    const std::vector<uint16_t> bf16(4, 0x3f80);
    w.add_tensor("q4k", DWELL_Q4_K, std::vector<int64_t>{512}, q4k);
    w.add_tensor("q6k", DWELL_Q6_K, std::vector<int64_t>{256, 3}, q6k);
    w.add_tensor("bf16", DWELL_BF16, std::vector<int64_t>{4}, as_bytes(bf16));
    const fs::path path = dir_ / "k.gguf";
    w.write(path);
    const GgufFile f = GgufFile::open(path);
    expect_tensor(f, "q4k", DWELL_Q4_K, {512}, q4k);
    expect_tensor(f, "q6k", DWELL_Q6_K, {256, 3}, q6k);
    expect_tensor(f, "bf16", DWELL_BF16, {4}, as_bytes(bf16));
}

TEST_F(GgufWriterTest, RejectsMalformedTensors) {
    GgufWriter w;
    const std::vector<float> x(8, 0.f);
    const auto bytes = as_bytes(x);
    auto expect_invalid = [&](dwell_dtype dtype, std::vector<int64_t> ne,
                              std::span<const uint8_t> data, const std::string& phrase) {
        try {
            w.add_tensor("bad", dtype, ne, data);
            ADD_FAILURE() << "no throw; expected '" << phrase << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
            EXPECT_NE(e.status(), DWELL_OK);
        }
    };
    expect_invalid(DWELL_F32, {8}, bytes.first(28), "28 bytes of data, expected 32");
    expect_invalid(DWELL_F32, {4}, bytes, "32 bytes of data, expected 16");
    expect_invalid(DWELL_F32, {}, bytes, "0 dimensions");
    expect_invalid(DWELL_F32, {1, 1, 1, 1, 8}, bytes, "5 dimensions");
    expect_invalid(DWELL_F32, {0}, {}, "ne[0] = 0");
    expect_invalid(DWELL_F32, {8, -1}, bytes, "ne[1] is not positive");
    expect_invalid(DWELL_Q8_0, {16}, bytes, "not a positive multiple of the q8_0 block size 32");
    expect_invalid(DWELL_F32, {int64_t{1} << 62, 8}, bytes, "size overflows");
    expect_invalid(DWELL_I4_G, {8}, bytes, "no GGUF");
    // Nothing half-added: the file has no tensors.
    const fs::path path = dir_ / "none.gguf";
    w.write(path);
    EXPECT_TRUE(GgufFile::open(path).tensors().empty());
}

TEST_F(GgufWriterTest, RejectsBadAlignment) {
    for (uint64_t a : {uint64_t{0}, uint64_t{3}, uint64_t{48}, uint64_t{1} << 40}) {
        EXPECT_THROW(GgufWriter{a}, Error) << a;
    }
}

TEST_F(GgufWriterTest, WriteFailureNamesPath) {
    const fs::path path = dir_ / "no_such_dir" / "x.gguf";
    try {
        GgufWriter().write(path);
        FAIL() << "no throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_IO);
        EXPECT_EQ(std::string(e.what()).rfind(path.string() + ": cannot create", 0), 0u)
            << e.what();
    }
}

}  // namespace
}  // namespace dwell
