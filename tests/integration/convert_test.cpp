// `dwell convert` end to end on the real stories260K model: packs of every
// policy load and generate, a zstd pack generates exactly the tokens of the
// raw pack and of the GGUF, and a damaged pack fails with one line naming
// the tensor.
#include "dwell/tools/convert.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

ConvertReport convert(const fs::path& in, const fs::path& out, QuantPolicy quant,
                      PackCompression compression, double snr_db = 20.0) {
    ConvertOptions o;
    o.input = in;
    o.output = out;
    o.quant = quant;
    o.compression = compression;
    o.snr_db = snr_db;
    o.frame_bytes = 16 * 1024;  // several frames per large tensor
    return convert_to_pack(o);
}

TEST(Convert, ZstdPackGeneratesTheTokensOfTheRawPackAndTheGguf) {
    DWELL_REQUIRE_MODEL(gguf, "stories260K.gguf");
    TempDir dir;
    const fs::path raw = dir.path() / "raw.dwell", zst = dir.path() / "zstd.dwell";
    convert(gguf, raw, QuantPolicy::Keep, PackCompression::None);
    const ConvertReport z = convert(gguf, zst, QuantPolicy::Keep, PackCompression::Zstd);
    for (const auto& t : z.tensors)
        EXPECT_TRUE(std::isinf(t.snr_db)) << t.name;  // keep is lossless
    // Trained f32 weights barely compress; the writer keeps a tensor raw when
    // zstd would not shrink it, so the pack costs at most its frame tables.
    EXPECT_LE(fs::file_size(zst), fs::file_size(raw) + fs::file_size(raw) / 100);
    const auto pack = open_pack_source(zst);
    size_t framed = 0;
    for (const auto& st : pack->storage())
        framed += st.compression == PackCompression::Zstd && st.frames > 1;
    EXPECT_GT(framed, 0u)
        << "no tensor was stored as zstd frames, so this test would prove nothing";

    Runtime runtime;
    const auto expected = greedy_ids(runtime, gguf, "Once upon a time", 64);
    EXPECT_EQ(greedy_ids(runtime, raw, "Once upon a time", 64), expected);
    EXPECT_EQ(greedy_ids(runtime, zst, "Once upon a time", 64), expected);
}

TEST(Convert, EveryPolicyLoadsAndReportsItsBitsAndSnr) {
    DWELL_REQUIRE_MODEL(gguf, "stories260K.gguf");
    TempDir dir;
    Runtime runtime;
    struct Case {
        QuantPolicy policy;
        double snr;
        double max_bits;
        dwell_dtype matrix_type;
    };
    for (const Case& c : {Case{QuantPolicy::Q8, 20, 8.6, DWELL_I8_C},
                          Case{QuantPolicy::Q4G128, 20, 4.6, DWELL_I4_G},
                          Case{QuantPolicy::Mixed, 40, 8.6, DWELL_I8_C}}) {
        const fs::path out = dir.path() / (std::string(quant_policy_name(c.policy)) + ".dwell");
        const ConvertReport r = convert(gguf, out, c.policy, PackCompression::Zstd, c.snr);
        EXPECT_LE(r.bits_per_weight, c.max_bits) << quant_policy_name(c.policy);
        for (const auto& t : r.tensors) {
            if (t.shape.size() == 2) {
                // mixed at 40 dB: no int4 or int6 tensor reaches it, so all fall to int8.
                EXPECT_EQ(t.to, c.matrix_type) << t.name;
                EXPECT_GT(t.snr_db, c.policy == QuantPolicy::Q4G128 ? 15.0 : 35.0) << t.name;
            } else {
                EXPECT_EQ(t.to, DWELL_F32) << t.name;
            }
        }
        const auto ids = greedy_ids(runtime, out, "Lily went to the park", 16);
        EXPECT_EQ(ids.size(), 9u + 16u) << quant_policy_name(c.policy);
    }
}

TEST(Convert, CliPrintsTheTableAndAverage) {
    DWELL_REQUIRE_MODEL(gguf, "stories260K.gguf");
    TempDir dir;
    const fs::path out = dir.path() / "m.dwell";
    const auto r = run_dwell(
        {"convert", gguf.string(), "-o", out.string(), "--quant", "mixed", "--snr-db", "22"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("blk.0.ffn_down.weight"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("i6g128"), std::string::npos)
        << r.out;  // some tensors need 6 bits at 22 dB
    EXPECT_NE(r.out.find("bits/weight on average"), std::string::npos) << r.out;
    const auto bad = run_dwell({"convert", gguf.string(), "-o", out.string(), "--quant", "q3"});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("q3"), std::string::npos) << bad.err;
}

TEST(Convert, AnOutputThatIsNotARegularFileIsRefusedAndLeftAlone) {
    DWELL_REQUIRE_MODEL(gguf, "stories260K.gguf");
    TempDir dir;
    // A FIFO and a link to one stand in for /dev/null, which root's
    // convert used to replace with the pack.
    const fs::path fifo = dir.path() / "null";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
    const fs::path link = dir.path() / "link.dwell";
    fs::create_symlink(fifo, link);
    for (const fs::path& out : {fifo, link}) {
        const auto r = run_dwell({"convert", gguf.string(), "-o", out.string()});
        EXPECT_NE(r.exit_code, 0) << r.out;
        EXPECT_NE(r.err.find(out.string() + ": exists and is "), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("not a regular file: refused"), std::string::npos) << r.err;
    }
    EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
    for (const auto& e : fs::directory_iterator(dir.path()))
        EXPECT_EQ(e.path().filename().string().find(".dwell-tmp."), std::string::npos) << e.path();
}

TEST(Convert, DamagedPackFailsNamingTheTensor) {
    DWELL_REQUIRE_MODEL(gguf, "stories260K.gguf");
    TempDir dir;
    const fs::path out = dir.path() / "m.dwell";
    const ConvertReport r = convert(gguf, out, QuantPolicy::Keep, PackCompression::None);
    // Flip a byte in the middle of the first tensor's data (data starts at 16 KiB).
    {
        std::fstream f(out, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(16384 + 1000);
        char c = 0;
        f.read(&c, 1);
        c = static_cast<char>(c ^ 0x5a);
        f.seekp(16384 + 1000);
        f.write(&c, 1);
    }
    const auto run = run_dwell({"run", "-m", out.string(), "-n", "4"});
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_NE(run.err.find(out.string()), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("tensor '" + r.tensors.front().name + "'"), std::string::npos)
        << run.err;
    EXPECT_NE(run.err.find("checksum"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace dwell::test
