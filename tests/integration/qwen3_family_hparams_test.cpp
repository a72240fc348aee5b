// What the qwen3, qwen3moe and smollm3 plugins refuse, each in one line
// naming the key or tensor at fault, and the one default they take (the
// experts' width when expert_feed_forward_length is absent, as llama.cpp
// v0.5.0 takes it).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

fs::path write_family(const TempDir& dir, SyntheticFamily family) {
    const fs::path p = dir.path() / (std::string(synthetic_family_name(family)) + ".gguf");
    write_synthetic_model(family_reference_spec(family), p);
    return p;
}

void expect_refused(const fs::path& model, const std::string& what) {
    const std::string err = model_load_error(model);
    EXPECT_NE(err.find(what), std::string::npos) << "error: '" << err << "'";
    EXPECT_EQ(err.find('\n'), std::string::npos) << "error: '" << err << "'";
}

class Qwen3FamilyHParams : public ::testing::Test {
protected:
    void SetUp() override {
        for (const char* p : {"qwen3", "qwen3moe", "smollm3"}) {
            const fs::path so =
                fs::path(DWELL_TEST_PLUGIN_DIR) / ("libdwell-" + std::string(p) + ".so");
            if (!fs::exists(so)) GTEST_SKIP() << "the " << p << " model plugin is not built";
        }
    }
    TempDir dir_;
};

TEST_F(Qwen3FamilyHParams, EachFamilyLoadsWithItsOwnPlugin) {
    Runtime runtime;
    for (auto f : {SyntheticFamily::qwen3, SyntheticFamily::qwen3moe, SyntheticFamily::smollm3}) {
        auto model = Model::load(runtime, write_family(dir_, f));
        EXPECT_EQ(model->plugin().name(), synthetic_family_name(f));
    }
}

TEST_F(Qwen3FamilyHParams, MissingNormEpsilonIsRefusedNamingTheKey) {
    for (auto f : {SyntheticFamily::qwen3, SyntheticFamily::qwen3moe, SyntheticFamily::smollm3}) {
        const std::string arch = synthetic_family_name(f);
        const std::string key = arch + ".attention.layer_norm_rms_epsilon";
        expect_refused(edited_gguf_copy(write_family(dir_, f), {.key = key},
                                        dir_.path() / (arch + "-no-eps.gguf")),
                       "metadata key " + key + " is missing");
    }
}

TEST_F(Qwen3FamilyHParams, PartialRotationIsRefusedNamingTheKey) {
    // Qwen3's heads are 48 wide in the reference file: RoPE must cover them.
    expect_refused(edited_gguf_copy(write_family(dir_, SyntheticFamily::qwen3),
                                    {.key = "qwen3.rope.dimension_count", .value = 32},
                                    dir_.path() / "partial.gguf"),
                   "qwen3.rope.dimension_count (32) must equal the head size (48)");
}

TEST_F(Qwen3FamilyHParams, MissingQkNormWeightIsRefusedNamingTheTensor) {
    expect_refused(
        edited_gguf_copy(write_family(dir_, SyntheticFamily::qwen3),
                         {.tensor = "blk.1.attn_k_norm.weight"}, dir_.path() / "no-k-norm.gguf"),
        "blk.1.attn_k_norm.weight");
}

TEST_F(Qwen3FamilyHParams, ExpertCountsAreRequiredAndRangeChecked) {
    const fs::path moe = write_family(dir_, SyntheticFamily::qwen3moe);
    expect_refused(edited_gguf_copy(moe, {.key = "qwen3moe.expert_count"}, dir_.path() / "a.gguf"),
                   "metadata key qwen3moe.expert_count is missing");
    expect_refused(
        edited_gguf_copy(moe, {.key = "qwen3moe.expert_used_count"}, dir_.path() / "b.gguf"),
        "metadata key qwen3moe.expert_used_count is missing");
    expect_refused(edited_gguf_copy(moe, {.key = "qwen3moe.expert_used_count", .value = 9},
                                    dir_.path() / "c.gguf"),
                   "metadata key qwen3moe.expert_used_count = 9 is outside 1..8");
    expect_refused(edited_gguf_copy(moe, {.key = "qwen3moe.expert_count", .value = 257},
                                    dir_.path() / "d.gguf"),
                   "metadata key qwen3moe.expert_count = 257 is outside 1..256");
    expect_refused(edited_gguf_copy(moe, {.key = "qwen3moe.expert_feed_forward_length", .value = 0},
                                    dir_.path() / "e.gguf"),
                   "metadata key qwen3moe.expert_feed_forward_length = 0 is outside");
}

TEST_F(Qwen3FamilyHParams, ExpertWidthDefaultsToFeedForwardLengthOverExpertsUsed) {
    // The synthetic file's feed_forward_length is the experts' width times
    // the experts used, as in the published models: without the expert key
    // the same model results, with the same logits.
    const fs::path moe = write_family(dir_, SyntheticFamily::qwen3moe);
    const fs::path bare = edited_gguf_copy(moe, {.key = "qwen3moe.expert_feed_forward_length"},
                                           dir_.path() / "bare.gguf");
    Runtime runtime;
    const std::vector<int32_t> ids = {5, 900, 17, 333, 2};
    std::vector<std::vector<float>> logits;
    for (const fs::path& p : {moe, bare}) {
        SessionOptions so;
        so.kv_dtype = DWELL_F32;
        Session s(runtime, Model::load(runtime, p), so);
        const auto l = s.decode(ids, /*all_logits=*/true);
        logits.emplace_back(l.begin(), l.end());
    }
    EXPECT_EQ(logits[0], logits[1]);
    // And a width that contradicts the tensors is refused naming a tensor.
    const fs::path wrong =
        edited_gguf_copy(moe, {.key = "qwen3moe.expert_feed_forward_length", .value = 32},
                         dir_.path() / "wrong.gguf");
    expect_refused(wrong, "ffn_");
}

// `dwell synth --arch X` writes a file of the family that its plugin
// serves and `dwell eval` runs; a qwen3moe spec whose
// feed_forward_length (expert width times experts used) is past what the
// plugins read is an option error (exit 2) before anything is written.
TEST_F(Qwen3FamilyHParams, SynthWritesEachFamilyAndEvalServesIt) {
    for (const char* arch : {"qwen3", "qwen3moe", "smollm3"}) {
        const fs::path out = dir_.path() / (std::string(arch) + "-cli.gguf");
        const auto synth =
            run_dwell({"synth", "--arch",          arch, "--n-embd",   "64",        "--n-head",
                       "4",     "--n-head-kv",     "2",  "--head-dim", "24",        "--n-ff",
                       "64",    "--n-layer",       "4",  "--n-vocab",  "512",       "--n-expert",
                       "4",     "--n-expert-used", "2",  "-o",         out.string()});
        ASSERT_EQ(synth.exit_code, 0) << arch << ": " << synth.err;
        const fs::path logits = dir_.path() / (std::string(arch) + ".f32");
        const auto eval =
            run_dwell({"eval", "-m", out.string(), "--ids", "1,2,3", "--logits", logits.string()});
        EXPECT_EQ(eval.exit_code, 0) << arch << ": " << eval.err;
        EXPECT_EQ(read_file(logits).size(), 3u * 512u * sizeof(float)) << arch;
        Runtime runtime;
        EXPECT_EQ(Model::load(runtime, out)->plugin().name(), arch);
    }
    const auto wide =
        run_dwell({"synth", "--arch", "qwen3moe", "--n-ff", "4194304", "--n-expert-used", "2",
                   "--n-vocab", "512", "-o", (dir_.path() / "wide.gguf").string()});
    EXPECT_EQ(wide.exit_code, 2) << wide.err;
    EXPECT_NE(wide.err.find("qwen3moe's feed_forward_length"), std::string::npos) << wide.err;
}

}  // namespace
}  // namespace dwell::test
