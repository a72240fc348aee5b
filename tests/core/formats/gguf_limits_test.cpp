// GGUF limits added with the fuzzers: a tensor name longer than
// GgufLimits::max_name is refused with one line before it is copied, and
// the metadata copy `dwell convert` makes keeps every bit of a uint64 value
// (found by gguf_reader_fuzzer).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/tools/gguf_metadata_copy.hpp"
#include "dwell/tools/gguf_writer.hpp"

namespace {

// GGUF v3 bytes with one F32 tensor of 4 elements named `name`, by hand.
std::vector<uint8_t> one_tensor_named(const std::string& name) {
    std::vector<uint8_t> b;
    const auto le = [&](uint64_t v, int n) {
        for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    };
    le(0x46554747, 4);  // "GGUF"
    le(3, 4);           // version
    le(1, 8);           // tensors
    le(0, 8);           // metadata pairs
    le(name.size(), 8);
    b.insert(b.end(), name.begin(), name.end());
    le(1, 4);  // n_dims
    le(4, 8);  // ne[0]
    le(0, 4);  // f32
    le(0, 8);  // offset
    b.resize((b.size() + 31) / 32 * 32 + 16, 0);
    return b;
}

TEST(GgufLimits, TensorNameOfTheLimitOpens) {
    const dwell::GgufFile f =
        dwell::GgufFile::from_bytes(one_tensor_named(std::string(1024, 'n')), "t.gguf");
    ASSERT_EQ(f.tensors().size(), 1u);
    EXPECT_EQ(f.tensors()[0].name.size(), 1024u);
}

TEST(GgufLimits, TensorNameLongerThanTheLimitIsRefused) {
    try {
        (void)dwell::GgufFile::from_bytes(one_tensor_named(std::string(1025, 'n')), "t.gguf");
        FAIL() << "accepted";
    } catch (const dwell::Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_CORRUPT);
        EXPECT_EQ(std::string(e.what()),
                  "t.gguf: tensor info 1 of 1 name: name length 1025 exceeds the limit of 1024");
    }
    // A name far past the file's end fails on the limit, not on the file.
    std::vector<uint8_t> huge = one_tensor_named("x");
    huge[24 + 7] = 0x40;  // the name length's top byte: 2^62 + 1
    try {
        (void)dwell::GgufFile::from_bytes(huge, "t.gguf");
        FAIL() << "accepted";
    } catch (const dwell::Error& e) {
        EXPECT_NE(
            std::string(e.what()).find("name length 4611686018427387905 exceeds the limit of 1024"),
            std::string::npos)
            << e.what();
    }
}

dwell::GgufFile copy_of(const dwell::GgufFile& from) {
    dwell::GgufWriter to;
    dwell::copy_gguf_metadata(from, to, [](std::string_view) { return true; });
    return dwell::GgufFile::from_bytes(to.bytes(), "copy.gguf");
}

// Found by gguf_reader_fuzzer: a uint64 above 2^63 - 1 has no get_int
// value, and the copy dereferenced that empty optional.
TEST(GgufMetadataCopy, KeepsEveryBitOfAUint64) {
    dwell::GgufWriter w;
    w.add_uint64("big", UINT64_MAX);
    w.add_uint64("small", 7);
    const dwell::GgufFile copy = copy_of(dwell::GgufFile::from_bytes(w.bytes(), "in.gguf"));
    EXPECT_EQ(copy.type_of("big"), dwell::GgufType::UINT64);
    EXPECT_EQ(copy.get_uint64("big"), UINT64_MAX);
    EXPECT_EQ(copy.get_int("big"), std::nullopt);
    EXPECT_EQ(copy.get_uint64("small"), 7u);
    EXPECT_EQ(copy.get_int("small"), 7);
}

}  // namespace
