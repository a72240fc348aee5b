// Weight residency end to end: stories260K's greedy tokens are the same with
// its weights mapped, read into memory ("load") and streamed through a
// budget smaller than the model, from the GGUF file and from raw and zstd
// packs; the streamed runs really read from the file.
#include <gtest/gtest.h>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/convert.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

RuntimeOptions residency(const TempDir& dir, const std::string& weights, int budget_kib) {
    RuntimeOptions o;
    o.manifest = dir.write("m-" + weights + std::to_string(budget_kib) + ".toml",
                           "[device]\nname = \"stream test\"\n[[backend]]\nplugin = \"cpu\"\n"
                           "[memory]\nweights = \"" +
                               weights + "\"\npin_auto = false\nprefetch_layers = 1\n");
    o.threads = 2;
    if (budget_kib > 0) o.weight_budget_bytes = static_cast<uint64_t>(budget_kib) << 10;
    return o;
}

TEST(WeightResidency, Stories260KTokensAreTheSameMappedLoadedAndStreamed) {
    DWELL_REQUIRE_MODEL(gguf, "stories260K.gguf");
    TempDir dir;
    std::vector<fs::path> files = {gguf};
    for (const PackCompression c : {PackCompression::None, PackCompression::Zstd}) {
        ConvertOptions co;
        co.input = gguf;
        co.output = dir.path() / (c == PackCompression::Zstd ? "s.zst.dwell" : "s.dwell");
        co.compression = c;
        co.frame_bytes = 16 * 1024;
        convert_to_pack(co);
        files.push_back(co.output);
    }
    const std::string prompt = "Once upon a time";
    std::vector<int32_t> reference;
    {
        Runtime rt(residency(dir, "mmap", 0));
        reference = greedy_ids(rt, gguf, prompt, 40);
    }
    ASSERT_GT(reference.size(), 40u);
    for (const fs::path& f : files) {
        SCOPED_TRACE(f.filename().string());
        {
            Runtime rt(residency(dir, "load", 0));
            EXPECT_EQ(greedy_ids(rt, f, prompt, 40), reference);
        }
        // 800 KiB of its 1.1 MiB (zstd staging included): the embedding and
        // layers take turns in slots.
        Runtime rt(residency(dir, "stream", 800));
        auto model = Model::load(rt, f);
        ASSERT_NE(model->streamer(), nullptr);
        EXPECT_EQ(greedy_ids(rt, f, prompt, 40), reference);
        const WeightStreamStats s = model->streamer()->stats();
        EXPECT_LE(s.resident_bytes, uint64_t{800} << 10);
        EXPECT_GT(s.slots, 0);
        EXPECT_LT(s.pinned_units, s.units);
    }
}

TEST(WeightResidency, StreamedTokensReadTheFileEveryPass) {
    DWELL_REQUIRE_MODEL(gguf, "stories260K.gguf");
    TempDir dir;
    Runtime rt(residency(dir, "stream", 600));
    auto model = Model::load(rt, gguf);
    Session session(rt, model, SessionOptions{});
    const std::vector<int32_t> prompt = model->tokenizer().encode("Once upon a time", true);
    session.decode(prompt);
    const WeightStreamStats after_prompt = model->streamer()->stats();
    const int32_t next = 5;
    session.decode(std::span<const int32_t>(&next, 1));
    const WeightStreamStats after_token = model->streamer()->stats();
    // A token reads at least the units that are not pinned, minus the ones
    // the read-ahead left resident from the previous pass.
    EXPECT_GT(after_token.bytes_read, after_prompt.bytes_read);
    EXPECT_GT(after_token.acquires, after_prompt.acquires);
}

TEST(WeightResidency, ABudgetBelowOneLayerIsRefusedAtLoad) {
    DWELL_REQUIRE_MODEL(gguf, "stories260K.gguf");
    TempDir dir;
    Runtime rt(residency(dir, "stream", 64));
    try {
        Model::load(rt, gguf);
        FAIL() << "a 64 KiB weight budget was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("smaller than one layer"), std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace dwell::test
