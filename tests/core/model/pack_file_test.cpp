// dwell packs: PackWriter -> open_pack_source round trips (raw and zstd,
// several dtypes, metadata of every type, the tokenizer), conversion of the
// real stories260K model, and hostile files: each corruption must be refused
// with one line naming the file and, where it applies, the tensor.
#include "dwell/core/model/pack_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/tools/pack_writer.hpp"
#include "test_paths.hpp"

// Header-only xxHash, so the test can re-seal deliberately edited packs
// without linking the library itself.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace dwell {
namespace {

namespace fs = std::filesystem;

// Header field offsets, as documented in pack_file.cpp and hosts/cli/docs/pack-format.md.
constexpr size_t kOffVersion = 8;
constexpr size_t kOffFileSize = 16;
constexpr size_t kOffMetadata = 24;
constexpr size_t kOffTokenizer = 40;
constexpr size_t kOffDirectory = 56;
constexpr size_t kOffFrames = 72;
constexpr size_t kOffTensorCount = 88;
constexpr size_t kOffChecksum = 120;
// Directory entry fields, from the end of the name.
constexpr size_t kEntDataOffset = 40;
constexpr size_t kEntStored = 48;
constexpr size_t kEntFrameCount = 80;
constexpr size_t kEntryAfterName = 104;

uint64_t get64(const std::vector<uint8_t>& b, size_t off) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; ++i) v |= uint64_t{b[off + i]} << (8 * i);
    return v;
}
void set64(std::vector<uint8_t>& b, size_t off, uint64_t v) {
    for (size_t i = 0; i < 8; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get32(const std::vector<uint8_t>& b, size_t off) {
    return static_cast<uint32_t>(get64(b, off) & 0xffffffffu);
}

// Recomputes the header checksum, so a test can reach the checks behind it.
void reseal(std::vector<uint8_t>& b) {
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, b.data(), kOffChecksum);
    for (size_t sec : {kOffMetadata, kOffTokenizer, kOffDirectory, kOffFrames}) {
        XXH3_64bits_update(st, b.data() + get64(b, sec), get64(b, sec + 8));
    }
    set64(b, kOffChecksum, XXH3_64bits_digest(st));
    XXH3_freeState(st);
}

// Byte offset of the fields of directory entry `index` (just past its name).
size_t entry_fields(const std::vector<uint8_t>& b, size_t index) {
    size_t pos = get64(b, kOffDirectory);
    for (size_t i = 0;; ++i) {
        const uint32_t name_len = get32(b, pos);
        if (i == index) return pos + 4 + name_len;
        pos += 4 + name_len + kEntryAfterName;
    }
}

// Whether `dir` holds a writer's temporary (output_file.hpp) of any target.
bool holds_temporary(const fs::path& dir) {
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".dwell-tmp.") != std::string::npos) return true;
    return false;
}

std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed, bool compressible) {
    std::vector<uint8_t> v(n);
    std::mt19937 rng(seed);
    for (size_t i = 0; i < n; ++i) {
        v[i] = compressible ? static_cast<uint8_t>((i * 7 + seed) % 13 + (i / 64) % 3)
                            : static_cast<uint8_t>(rng());
    }
    return v;
}

struct TestTensor {
    std::string name;
    dwell_dtype dtype;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
};

std::vector<TestTensor> sample_tensors(bool compressible) {
    std::vector<TestTensor> t = {
        {"tok_embd.weight", DWELL_F32, {7, 3}, {}},          // 84 bytes
        {"blk.0.attn_norm.weight", DWELL_F16, {13, 5}, {}},  // 130 bytes
        {"blk.0.attn_q.weight", DWELL_Q8_0, {64, 3}, {}},    // 204 bytes
        {"blk.0.ffn_up.weight", DWELL_Q4_0, {96, 5, 1}, {}},
        {"output.weight", DWELL_F32, {1001, 7}, {}},  // 28028 bytes: many frames
    };
    uint32_t seed = 1;
    for (TestTensor& x : t) {
        size_t bytes = dwell_row_bytes(x.dtype, x.ne[0]);
        for (size_t d = 1; d < x.ne.size(); ++d) bytes *= static_cast<size_t>(x.ne[d]);
        x.data = pattern_bytes(bytes, seed++, compressible);
    }
    return t;
}

class PackFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("dwell-pack-test-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }

    fs::path write_pack(const std::string& name, PackWriter::Options options,
                        const std::vector<TestTensor>& tensors,
                        const std::string& tokenizer = "tokenizer\0bytes") {
        const fs::path path = dir_ / name;
        PackWriter w(path, options);
        GgufWriter& m = w.metadata();
        m.add_string("general.architecture", "llama");
        m.add_uint32("llama.block_count", 1);
        m.add_int32("test.negative", -42);
        m.add_uint64("test.big", uint64_t{1} << 40);
        m.add_float32("test.eps", 1e-5f);
        m.add_bool("test.flag", true);
        const std::vector<std::string> strings = {"a", "", "\xe2\x96\x81hello"};
        m.add_string_array("test.strings", strings);
        const std::vector<float> floats = {0.5f, -1.25f};
        m.add_float32_array("test.floats", floats);
        const std::vector<int32_t> ints = {1, -2, 3};
        m.add_int32_array("test.ints", ints);
        w.set_tokenizer(tokenizer);
        for (const TestTensor& t : tensors) w.add_tensor(t.name, t.dtype, t.ne, t.data);
        storage_ = w.finish();
        return path;
    }

    static std::vector<uint8_t> read_bytes(const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }
    static void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
        std::ofstream out(p, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }

    // Opening `bytes` fails with DWELL_ERR_CORRUPT (or IO) and a one-line
    // message that starts with the path and contains every one of `parts`.
    void expect_rejected(const std::vector<uint8_t>& bytes, std::vector<std::string> parts,
                         const PackLimits& limits = {}) {
        const fs::path p = dir_ / "bad.dwell";
        write_bytes(p, bytes);
        try {
            auto src = open_pack_source(p, limits);
            ADD_FAILURE() << "opened a corrupt pack";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_TRUE(e.status() == DWELL_ERR_CORRUPT || e.status() == DWELL_ERR_IO) << msg;
            EXPECT_EQ(msg.rfind(p.string() + ":", 0), 0u) << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
            for (const std::string& part : parts) {
                EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
            }
        }
    }

    PackWriter::Options zstd_options(uint64_t frame_bytes = 100) const {
        PackWriter::Options o;
        o.compression = PackCompression::Zstd;
        o.zstd_level = 3;
        o.frame_bytes = frame_bytes;
        return o;
    }

    fs::path dir_;
    std::vector<PackTensorStorage> storage_;
};

void expect_same_tensors(const ModelSource& src, const std::vector<TestTensor>& tensors) {
    ASSERT_EQ(src.tensors().size(), tensors.size());
    for (const TestTensor& t : tensors) {
        SCOPED_TRACE(t.name);
        const SourceTensor* s = src.find_tensor(t.name);
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(s->dtype, t.dtype);
        EXPECT_EQ(s->type_name, dwell_dtype_name(t.dtype));
        EXPECT_EQ(s->n_dims, static_cast<int32_t>(t.ne.size()));
        for (int d = 0; d < DWELL_MAX_DIMS; ++d) {
            EXPECT_EQ(s->ne[d], d < static_cast<int>(t.ne.size()) ? t.ne[d] : 1);
        }
        ASSERT_EQ(s->size, t.data.size());
        EXPECT_EQ(std::memcmp(s->data, t.data.data(), t.data.size()), 0);
    }
}

void expect_metadata(const ModelSource& src) {
    const dwell_metadata& m = src.metadata();
    int64_t i = 0;
    double f = 0;
    const char* s = nullptr;
    size_t len = 0;
    uint64_t n = 0;
    ASSERT_TRUE(m.get_string(m.self, "general.architecture", &s, &len));
    EXPECT_EQ(std::string(s, len), "llama");
    ASSERT_TRUE(m.get_int(m.self, "llama.block_count", &i));
    EXPECT_EQ(i, 1);
    ASSERT_TRUE(m.get_int(m.self, "test.negative", &i));
    EXPECT_EQ(i, -42);
    ASSERT_TRUE(m.get_int(m.self, "test.big", &i));
    EXPECT_EQ(i, int64_t{1} << 40);
    ASSERT_TRUE(m.get_float(m.self, "test.eps", &f));
    EXPECT_FLOAT_EQ(static_cast<float>(f), 1e-5f);
    ASSERT_TRUE(m.get_int(m.self, "test.flag", &i));
    EXPECT_EQ(i, 1);
    ASSERT_TRUE(m.get_array_length(m.self, "test.strings", &n));
    EXPECT_EQ(n, 3u);
    ASSERT_TRUE(m.get_array_length(m.self, "test.floats", &n));
    EXPECT_EQ(n, 2u);
    ASSERT_TRUE(m.get_array_length(m.self, "test.ints", &n));
    EXPECT_EQ(n, 3u);
    EXPECT_FALSE(m.get_int(m.self, "test.absent", &i));
    // Tensor shapes come from the directory, not the metadata blob.
    dwell_dtype dt{};
    int32_t nd = 0;
    int64_t ne[DWELL_MAX_DIMS] = {};
    ASSERT_TRUE(m.get_tensor(m.self, "blk.0.attn_q.weight", &dt, &nd, ne));
    EXPECT_EQ(dt, DWELL_Q8_0);
    EXPECT_EQ(nd, 2);
    EXPECT_EQ(ne[0], 64);
    EXPECT_EQ(ne[1], 3);
    EXPECT_FALSE(m.get_tensor(m.self, "absent.weight", &dt, &nd, ne));
}

TEST_F(PackFileTest, RoundTripRaw) {
    const auto tensors = sample_tensors(false);
    const std::string tok("tokenizer\0bytes\xff", 16);
    const fs::path p = write_pack("raw.dwell", {}, tensors, tok);
    EXPECT_FALSE(holds_temporary(p.parent_path()));
    auto src = open_pack_source(p);
    EXPECT_EQ(src->format(), "dwell pack");
    EXPECT_EQ(src->path(), p);
    expect_same_tensors(*src, tensors);
    expect_metadata(*src);
    EXPECT_EQ(src->tokenizer_model(), tok);
    ASSERT_EQ(src->storage().size(), tensors.size());
    for (const PackTensorStorage& s : src->storage()) {
        EXPECT_EQ(s.compression, PackCompression::None);
        EXPECT_EQ(s.stored_bytes, s.raw_bytes);
        EXPECT_EQ(s.frames, 0u);
    }
    // open_model_source picks the pack reader by magic.
    auto any = open_model_source(p);
    EXPECT_EQ(any->format(), "dwell pack");
    expect_same_tensors(*any, tensors);
}

TEST_F(PackFileTest, RoundTripZstdManyFrames) {
    const auto tensors = sample_tensors(true);
    const fs::path p = write_pack("zstd.dwell", zstd_options(100), tensors);
    auto src = open_pack_source(p);
    expect_same_tensors(*src, tensors);
    expect_metadata(*src);
    ASSERT_EQ(src->storage().size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
        const PackTensorStorage& s = src->storage()[i];
        SCOPED_TRACE(s.name);
        EXPECT_EQ(s.name, tensors[i].name);
        EXPECT_EQ(s.compression, PackCompression::Zstd);
        EXPECT_EQ(s.raw_bytes, tensors[i].data.size());
        EXPECT_LT(s.stored_bytes, s.raw_bytes);
        EXPECT_EQ(s.frames, (tensors[i].data.size() + 99) / 100);
        if (s.raw_bytes > 100) {
            EXPECT_GT(s.frames, 1u);
        }
    }
    // What finish() reported is what the reader finds.
    ASSERT_EQ(storage_.size(), src->storage().size());
    for (size_t i = 0; i < storage_.size(); ++i) {
        EXPECT_EQ(storage_[i].stored_bytes, src->storage()[i].stored_bytes);
        EXPECT_EQ(storage_[i].frames, src->storage()[i].frames);
    }
}

TEST_F(PackFileTest, FrameLargerThanTensorIsOneFrame) {
    const auto tensors = sample_tensors(true);
    const fs::path p = write_pack("one.dwell", zstd_options(1 << 20), tensors);
    auto src = open_pack_source(p);
    expect_same_tensors(*src, tensors);
    for (const PackTensorStorage& s : src->storage()) {
        if (s.compression == PackCompression::Zstd) {
            EXPECT_EQ(s.frames, 1u);
        }
    }
}

TEST_F(PackFileTest, IncompressibleTensorIsStoredRaw) {
    const auto tensors = sample_tensors(false);
    const fs::path p = write_pack("rnd.dwell", zstd_options(4096), tensors);
    auto src = open_pack_source(p);
    expect_same_tensors(*src, tensors);
    for (const PackTensorStorage& s : src->storage()) {
        EXPECT_EQ(s.compression, PackCompression::None) << s.name;
    }
}

TEST_F(PackFileTest, DataOffsetsAreMultiplesOf16KiB) {
    const auto tensors = sample_tensors(true);
    for (bool zstd : {false, true}) {
        const fs::path p = write_pack(zstd ? "z.dwell" : "r.dwell",
                                      zstd ? zstd_options() : PackWriter::Options{}, tensors);
        const std::vector<uint8_t> b = read_bytes(p);
        ASSERT_EQ(get64(b, kOffTensorCount), tensors.size());
        for (size_t i = 0; i < tensors.size(); ++i) {
            const uint64_t off = get64(b, entry_fields(b, i) + kEntDataOffset);
            EXPECT_GT(off, 0u);
            EXPECT_EQ(off % kPackAlignment, 0u) << tensors[i].name;
        }
        // Raw tensors are used in place from the mapping: page aligned.
        if (!zstd) {
            auto src = open_pack_source(p);
            for (const SourceTensor& t : src->tensors()) {
                EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4096, 0u) << t.name;
            }
        }
    }
}

TEST_F(PackFileTest, ZstdPackIsSmallerForCompressibleData) {
    std::vector<TestTensor> tensors = sample_tensors(true);
    tensors.push_back({"big.weight", DWELL_F32, {4096, 16}, pattern_bytes(4096 * 16 * 4, 9, true)});
    const fs::path raw = write_pack("raw.dwell", {}, tensors);
    const fs::path z = write_pack("zstd.dwell", zstd_options(64 * 1024), tensors);
    EXPECT_LT(fs::file_size(z), fs::file_size(raw));
    expect_same_tensors(*open_pack_source(z), tensors);
}

TEST_F(PackFileTest, EmptyPackAndNoTokenizer) {
    const fs::path p = dir_ / "empty.dwell";
    {
        PackWriter w(p, {});
        w.metadata().add_string("general.architecture", "llama");
        w.finish();
    }
    auto src = open_pack_source(p);
    EXPECT_TRUE(src->tensors().empty());
    EXPECT_TRUE(src->tokenizer_model().empty());
    EXPECT_THROW(src->tokenizer(), Error);
}

TEST_F(PackFileTest, UnfinishedWriterRemovesItsTempFile) {
    const fs::path p = dir_ / "unfinished.dwell";
    fs::path temp;
    {
        PackWriter w(p, {});
        const auto t = sample_tensors(false);
        w.add_tensor(t[0].name, t[0].dtype, t[0].ne, t[0].data);
        EXPECT_TRUE(fs::exists(w.temporary()));
        EXPECT_EQ(w.temporary().parent_path(), p.parent_path());
        EXPECT_EQ(w.temporary().filename().string().rfind(".unfinished.dwell.dwell-tmp.", 0), 0u)
            << w.temporary();
        temp = w.temporary();
    }
    EXPECT_FALSE(fs::exists(temp));
    EXPECT_FALSE(fs::exists(p));
}

TEST_F(PackFileTest, WriterRejectsBadTensors) {
    const fs::path p = dir_ / "w.dwell";
    PackWriter w(p, {});
    const std::vector<uint8_t> data(84);
    const std::vector<int64_t> ne = {7, 3};
    const std::vector<int64_t> bad_q = {33, 1};
    const std::vector<int64_t> zero = {7, 0};
    try {
        w.add_tensor("short", DWELL_F32, ne, std::span(data).first(80));
        ADD_FAILURE() << "accepted a short tensor";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("'short'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(w.add_tensor("q", DWELL_Q8_0, bad_q, data), Error);
    EXPECT_THROW(w.add_tensor("z", DWELL_F32, zero, data), Error);
    EXPECT_THROW(w.add_tensor("", DWELL_F32, ne, data), Error);
    EXPECT_THROW(w.add_tensor(std::string_view("a\0b", 3), DWELL_F32, ne, data), Error);
    EXPECT_THROW(w.add_tensor("d", DWELL_DTYPE_COUNT, ne, data), Error);
    w.add_tensor("ok", DWELL_F32, ne, data);
    EXPECT_THROW(w.add_tensor("ok", DWELL_F32, ne, data), Error);
    PackWriter::Options bad;
    bad.compression = PackCompression::Zstd;
    bad.frame_bytes = 0;
    EXPECT_THROW(PackWriter(dir_ / "x.dwell", bad), Error);
}

// ---------------------------------------------------------------------------
// The real model

// Copies every metadata key of `f` into `w`, by type; integer widths the
// writer lacks widen to a type the getters read back as the same value.
void copy_metadata(const GgufFile& f, GgufWriter& w) {
    for (const std::string& key : f.keys()) {
        switch (*f.type_of(key)) {
            case GgufType::STRING:
                w.add_string(key, *f.get_string(key));
                break;
            case GgufType::FLOAT32:
            case GgufType::FLOAT64:
                w.add_float32(key, static_cast<float>(*f.get_float(key)));
                break;
            case GgufType::BOOL:
                w.add_bool(key, *f.get_int(key) != 0);
                break;
            case GgufType::UINT32:
                w.add_uint32(key, static_cast<uint32_t>(*f.get_int(key)));
                break;
            case GgufType::UINT64:
                w.add_uint64(key, static_cast<uint64_t>(*f.get_int(key)));
                break;
            case GgufType::ARRAY: {
                const GgufType et = *f.array_type(key);
                if (et == GgufType::STRING) {
                    const auto v = f.get_string_array(key);
                    w.add_string_array(key, std::vector<std::string>(v.begin(), v.end()));
                } else if (et == GgufType::FLOAT32 || et == GgufType::FLOAT64) {
                    w.add_float32_array(key, f.get_float_array(key));
                } else {
                    w.add_int32_array(key, f.get_int_array(key));
                }
                break;
            }
            default:
                w.add_int32(key, static_cast<int32_t>(*f.get_int(key)));
                break;
        }
    }
}

TEST_F(PackFileTest, ConvertsStories260K) {
    DWELL_REQUIRE_MODEL(model, "stories260K.gguf");
    const GgufFile gguf = GgufFile::open(model);
    auto src = open_model_source(model);
    ASSERT_EQ(src->format(), "GGUF");
    const Tokenizer tok = Tokenizer::from_gguf(gguf);

    for (bool zstd : {false, true}) {
        SCOPED_TRACE(zstd ? "zstd" : "raw");
        const fs::path p = dir_ / (zstd ? "stories-z.dwell" : "stories.dwell");
        {
            PackWriter w(p, zstd ? zstd_options(16 * 1024) : PackWriter::Options{});
            copy_metadata(gguf, w.metadata());
            w.set_tokenizer(tok.serialized_model());
            for (const SourceTensor& t : src->tensors()) {
                w.add_tensor(t.name, t.dtype, std::span(t.ne, static_cast<size_t>(t.n_dims)),
                             {t.data, t.size});
            }
            w.finish();
        }
        auto pack = open_model_source(p);
        ASSERT_EQ(pack->format(), "dwell pack");
        ASSERT_EQ(pack->tensors().size(), src->tensors().size());
        for (const SourceTensor& t : src->tensors()) {
            const SourceTensor* q = pack->find_tensor(t.name);
            ASSERT_NE(q, nullptr) << t.name;
            EXPECT_EQ(q->dtype, t.dtype);
            EXPECT_EQ(q->n_dims, t.n_dims);
            EXPECT_TRUE(std::equal(t.ne, t.ne + DWELL_MAX_DIMS, q->ne)) << t.name;
            ASSERT_EQ(q->size, t.size);
            EXPECT_EQ(std::memcmp(q->data, t.data, t.size), 0) << t.name;
        }
        // Every key the llama plugin reads answers the same.
        const dwell_metadata& a = src->metadata();
        const dwell_metadata& b = pack->metadata();
        for (const std::string& key : gguf.keys()) {
            int64_t ia = 0, ib = 0;
            double fa = 0, fb = 0;
            uint64_t na = 0, nb = 0;
            const char* sa = nullptr;
            const char* sb = nullptr;
            size_t la = 0, lb = 0;
            EXPECT_EQ(a.get_int(a.self, key.c_str(), &ia), b.get_int(b.self, key.c_str(), &ib));
            EXPECT_EQ(ia, ib) << key;
            EXPECT_EQ(a.get_float(a.self, key.c_str(), &fa), b.get_float(b.self, key.c_str(), &fb));
            EXPECT_FLOAT_EQ(static_cast<float>(fa), static_cast<float>(fb)) << key;
            EXPECT_EQ(a.get_array_length(a.self, key.c_str(), &na),
                      b.get_array_length(b.self, key.c_str(), &nb));
            EXPECT_EQ(na, nb) << key;
            if (a.get_string(a.self, key.c_str(), &sa, &la)) {
                ASSERT_TRUE(b.get_string(b.self, key.c_str(), &sb, &lb)) << key;
                EXPECT_EQ(std::string_view(sa, la), std::string_view(sb, lb)) << key;
            }
        }
        for (const char* name : {"token_embd.weight", "output.weight"}) {
            dwell_dtype da{}, db{};
            int32_t nda = 0, ndb = 0;
            int64_t nea[4] = {}, neb[4] = {};
            EXPECT_EQ(a.get_tensor(a.self, name, &da, &nda, nea),
                      b.get_tensor(b.self, name, &db, &ndb, neb))
                << name;
        }
        const Tokenizer ptok = pack->tokenizer();
        EXPECT_EQ(ptok.n_vocab(), tok.n_vocab());
        for (const char* text : {"Once upon a time", "Hello, world!", " two  spaces\nnewline",
                                 "caf\xc3\xa9 \xe2\x9c\x93"}) {
            EXPECT_EQ(ptok.encode(text, true), tok.encode(text, true)) << text;
        }
    }
}

// ---------------------------------------------------------------------------
// Hostile files

class PackCorruptionTest : public PackFileTest {
protected:
    void SetUp() override {
        PackFileTest::SetUp();
        tensors_ = sample_tensors(true);
        // Tensor 0 stored raw (incompressible), the rest zstd.
        tensors_[0].data = pattern_bytes(tensors_[0].data.size(), 77, false);
        good_ = read_bytes(write_pack("good.dwell", zstd_options(100), tensors_));
        ASSERT_EQ(storage_[0].compression, PackCompression::None);
        ASSERT_EQ(storage_.back().compression, PackCompression::Zstd);
    }
    std::vector<TestTensor> tensors_;
    std::vector<uint8_t> good_;
};

TEST_F(PackCorruptionTest, GoodFileOpens) {
    const fs::path p = dir_ / "copy.dwell";
    write_bytes(p, good_);
    expect_same_tensors(*open_pack_source(p), tensors_);
}

TEST_F(PackCorruptionTest, FlippedByteInRawTensorFailsItsChecksum) {
    std::vector<uint8_t> b = good_;
    b[get64(b, entry_fields(b, 0) + kEntDataOffset) + 17] ^= 0x10;
    expect_rejected(b, {"tensor 'tok_embd.weight'", "checksum mismatch", "corrupt"});
}

TEST_F(PackCorruptionTest, FlippedByteInZstdFrameIsCaught) {
    const size_t last = tensors_.size() - 1;
    const uint64_t off = get64(good_, entry_fields(good_, last) + kEntDataOffset);
    const uint64_t stored = get64(good_, entry_fields(good_, last) + kEntStored);
    // Every position of the tensor's stored bytes: zstd error or checksum,
    // always naming the tensor.
    for (uint64_t i = 0; i < stored; i += 7) {
        std::vector<uint8_t> b = good_;
        b[off + i] ^= 0x5a;
        SCOPED_TRACE("byte " + std::to_string(i));
        expect_rejected(b, {"tensor 'output.weight'"});
    }
}

TEST_F(PackCorruptionTest, FlippedByteInDirectoryFailsHeaderChecksum) {
    const uint64_t dir = get64(good_, kOffDirectory);
    const uint64_t size = get64(good_, kOffDirectory + 8);
    for (uint64_t i = 0; i < size; i += 13) {
        std::vector<uint8_t> b = good_;
        b[dir + i] ^= 0x01;
        expect_rejected(b, {"header checksum mismatch"});
    }
    // The frame tables, metadata and tokenizer are covered too.
    for (size_t sec : {kOffFrames, kOffMetadata, kOffTokenizer}) {
        std::vector<uint8_t> b = good_;
        b[get64(b, sec) + 3] ^= 0x80;
        expect_rejected(b, {"header checksum mismatch"});
    }
}

TEST_F(PackCorruptionTest, TruncatedAtManyPoints) {
    std::vector<size_t> cuts = {1, 7, 8, 12, 64, 127, 128, 129, 16383, 16384, 16385};
    for (size_t c = 0; c < good_.size(); c += good_.size() / 97 + 1) cuts.push_back(c);
    for (size_t sec : {kOffMetadata, kOffTokenizer, kOffDirectory, kOffFrames}) {
        cuts.push_back(get64(good_, sec) + 1);
    }
    cuts.push_back(good_.size() - 1);
    for (size_t cut : cuts) {
        if (cut == 0 || cut >= good_.size()) continue;
        SCOPED_TRACE("cut at " + std::to_string(cut));
        expect_rejected(std::vector<uint8_t>(good_.begin(), good_.begin() + cut), {"truncated"});
    }
}

TEST_F(PackCorruptionTest, WrongStoredSize) {
    std::vector<uint8_t> b = good_;
    const size_t f = entry_fields(b, 0);
    set64(b, f + kEntStored, get64(b, f + kEntStored) - 1);
    reseal(b);
    expect_rejected(b, {"tensor 'tok_embd.weight'", "stored size"});

    b = good_;
    const size_t z = entry_fields(b, tensors_.size() - 1);
    set64(b, z + kEntStored, get64(b, z + kEntStored) - 1);
    reseal(b);
    expect_rejected(b, {"tensor 'output.weight'", "stored bytes"});
}

// Tensors are addressed by C string across the plugin ABI, so a name that
// hides a NUL could never be found again.
TEST_F(PackCorruptionTest, NulInTensorName) {
    std::vector<uint8_t> b = good_;
    const size_t name = get64(b, kOffDirectory) + 4;
    ASSERT_EQ(b[name + 3], '_');  // "tok_embd.weight"
    b[name + 3] = 0;
    reseal(b);
    expect_rejected(
        b, {"directory entry 1 of", "tensor name 'tok\\x00embd.weight'", "contains a NUL byte"});
}

TEST_F(PackCorruptionTest, InconsistentFrameCount) {
    for (int64_t delta : {-1, 1}) {
        std::vector<uint8_t> b = good_;
        const size_t z = entry_fields(b, tensors_.size() - 1);
        set64(b, z + kEntFrameCount, get64(b, z + kEntFrameCount) + static_cast<uint64_t>(delta));
        reseal(b);
        expect_rejected(b, {"tensor 'output.weight'", "frame count"});
    }
}

// A frame whose header claims more content than the directory declares is
// refused before it is decoded: decompression never writes past the
// declared size, whatever the frame says.
TEST_F(PackCorruptionTest, FrameContentSizeOtherThanDeclaredIsRefused) {
    const size_t last = tensors_.size() - 1;
    const uint64_t off = get64(good_, entry_fields(good_, last) + kEntDataOffset);
    const uint8_t fhd = good_[off + 4];  // after the 4-byte zstd magic
    const bool single_segment = (fhd >> 5) & 1;
    const unsigned fcs_flag = fhd >> 6;
    const unsigned dict_bytes[4] = {0, 1, 2, 4};
    const size_t fcs = off + 5 + (single_segment ? 0 : 1) + dict_bytes[fhd & 3];
    // 100-byte frames: a one-byte content size field (single segment).
    ASSERT_TRUE(single_segment && fcs_flag == 0);
    ASSERT_EQ(good_[fcs], 100);
    for (const uint8_t claim : {uint8_t{255}, uint8_t{99}}) {
        std::vector<uint8_t> b = good_;
        b[fcs] = claim;
        SCOPED_TRACE(claim);
        expect_rejected(
            b, {"tensor 'output.weight'",
                "zstd frame 1 of 281 holds " + std::to_string(claim) + " bytes, expected 100"});
    }
}

TEST_F(PackCorruptionTest, FrameSizesThatDoNotTile) {
    std::vector<uint8_t> b = good_;
    const size_t z = entry_fields(b, tensors_.size() - 1);
    const uint64_t table = get64(b, z + 88);
    // Move one byte from frame 2 to frame 3: still contiguous and covering
    // the stored bytes, but neither frame is whole any more.
    set64(b, table + 16 + 8, get64(b, table + 16 + 8) - 1);
    set64(b, table + 32, get64(b, table + 32) - 1);
    set64(b, table + 32 + 8, get64(b, table + 32 + 8) + 1);
    reseal(b);
    expect_rejected(b, {"tensor 'output.weight'", "zstd frame 2 of 281", "truncated"});

    b = good_;
    set64(b, table + 16, get64(b, table + 16) + 1);  // a gap before frame 2
    reseal(b);
    expect_rejected(b, {"tensor 'output.weight'", "contiguous"});
}

TEST_F(PackCorruptionTest, OffsetPastTheEnd) {
    std::vector<uint8_t> b = good_;
    const size_t f = entry_fields(b, 1);
    set64(b, f + kEntDataOffset, (b.size() / kPackAlignment + 1) * kPackAlignment);
    reseal(b);
    expect_rejected(b, {"tensor 'blk.0.attn_norm.weight'", "past the end"});

    set64(b, f + kEntDataOffset, ~uint64_t{0} / kPackAlignment * kPackAlignment);
    reseal(b);
    expect_rejected(b, {"tensor 'blk.0.attn_norm.weight'"});

    set64(b, f + kEntDataOffset, kPackAlignment + 1);
    reseal(b);
    expect_rejected(b, {"tensor 'blk.0.attn_norm.weight'", "multiple of 16384"});

    // Pointing at another tensor's bytes.
    set64(b, f + kEntDataOffset, get64(b, entry_fields(b, 0) + kEntDataOffset));
    reseal(b);
    expect_rejected(b, {"overlaps"});
}

TEST_F(PackCorruptionTest, BadShapeAndDtype) {
    std::vector<uint8_t> b = good_;
    const size_t f = entry_fields(b, 2);  // Q8_0 [64, 3]
    set64(b, f + 8, 65);                  // ne[0] not a whole number of blocks
    reseal(b);
    expect_rejected(b, {"tensor 'blk.0.attn_q.weight'", "shape [65, 3] is not a valid q8_0 shape"});

    b = good_;
    b[f] = 200;  // dtype
    reseal(b);
    expect_rejected(b, {"tensor 'blk.0.attn_q.weight'", "unknown dtype 200"});

    b = good_;
    set64(b, f + 16, 4);  // ne[1] 3 -> 4: raw size no longer matches
    reseal(b);
    // Q8_0 rows of 64 are 2 blocks of 34 bytes: 3 rows 204 bytes, 4 rows 272.
    expect_rejected(b, {"tensor 'blk.0.attn_q.weight'",
                        "raw size 204 does not match its q8_0 shape [64, 4] (272 bytes)"});
}

TEST_F(PackCorruptionTest, BadMagicAndVersion) {
    std::vector<uint8_t> b = good_;
    b[0] = 'X';
    expect_rejected(b, {"not a dwell pack"});
    b = good_;
    b[kOffVersion] = 2;
    expect_rejected(b, {"unsupported pack version 2"});
}

TEST_F(PackCorruptionTest, AbsurdCounts) {
    std::vector<uint8_t> b = good_;
    set64(b, kOffTensorCount, uint64_t{1} << 40);
    expect_rejected(b, {"tensor count 1099511627776 exceeds the limit"});
    set64(b, kOffTensorCount, 60000);
    expect_rejected(b, {"cannot fit in the"});
    PackLimits small;
    small.max_tensors = 2;
    expect_rejected(good_, {"tensor count 5 exceeds the limit of 2"}, small);
    small = {};
    small.max_frames_per_tensor = 10;
    expect_rejected(good_, {"tensor 'output.weight'", "frame count 281 exceeds"}, small);
    small = {};
    small.max_decompressed_bytes = 1000;
    expect_rejected(good_, {"exceed the limit of 1000"}, small);
}

TEST_F(PackCorruptionTest, FileSizeAndSections) {
    std::vector<uint8_t> b = good_;
    b.push_back(0);
    expect_rejected(b, {"trailing data"});
    b = good_;
    set64(b, kOffDirectory, b.size() - 10);
    expect_rejected(b, {"directory section", "past the end"});
    b = good_;
    set64(b, kOffMetadata, 8);
    expect_rejected(b, {"metadata section", "overlaps the header"});
}

TEST_F(PackCorruptionTest, CorruptMetadataBlobNamesThePack) {
    std::vector<uint8_t> b = good_;
    b[get64(b, kOffMetadata)] = 'X';  // the blob's GGUF magic
    reseal(b);
    expect_rejected(b, {": metadata: not a GGUF file"});
}

// Random edits to the directory and frame tables, re-sealed so they reach
// every check behind the header checksum: never a crash, only dwell::Error.
TEST_F(PackCorruptionTest, RandomResealedEditsNeverCrash) {
    std::mt19937_64 rng(12345);
    const uint64_t dir = get64(good_, kOffDirectory);
    const uint64_t end = get64(good_, kOffFrames) + get64(good_, kOffFrames + 8);
    const fs::path p = dir_ / "fuzz.dwell";
    int opened = 0;
    for (int iter = 0; iter < 300; ++iter) {
        std::vector<uint8_t> b = good_;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < edits; ++k) {
            const uint64_t pos = dir + rng() % (end - dir);
            switch (rng() % 3) {
                case 0:
                    b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
                    break;
                case 1:
                    b[pos] = static_cast<uint8_t>(rng());
                    break;
                default:
                    if (pos + 8 <= end) set64(b, pos, rng() >> (rng() % 64));
                    break;
            }
        }
        reseal(b);
        write_bytes(p, b);
        try {
            auto src = open_pack_source(p);
            ++opened;
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_EQ(msg.rfind(p.string() + ":", 0), 0u) << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        }
    }
    EXPECT_LT(opened, 300);
}

}  // namespace
}  // namespace dwell
