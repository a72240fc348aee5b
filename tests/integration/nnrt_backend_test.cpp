// The nnrt plugin's whole path through the NNRt test double
// (tests/plugins/nnrt_double): probe and device choice, lowering each
// split's projections to one OH_NNModel, compiling (performance mode,
// priority, on-disk cache), executors and tensors, and the double's
// reference kernels playing the NPU. stories260K's greedy tokens equal
// llama.cpp's with nnrt taking every projection and cpu the rest; a failed
// build or run makes that step run on cpu with the same tokens; a second
// runtime loads the compiled models from the cache; and the double's
// contract holds (call order, types and shapes, nothing left alive).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"
#include "vendor_double_fixture.hpp"

namespace dwell::test {
namespace {

#ifdef DWELL_TEST_FAKE_NNRT

class NnrtDouble : public VendorDoubleTest {
protected:
    // The plugin is given the folder; the test opens the core half, the
    // same file the plugin loads, so the same instance of the double.
    NnrtDouble()
        : VendorDoubleTest({"DWELL_NNRT_LIB_DIR", DWELL_TEST_FAKE_NNRT, "DWELL_FAKE_NNRT_FAIL",
                            std::string(DWELL_TEST_FAKE_NNRT) + "/libneural_network_core.so",
                            "fake_nnrt_violations"}) {}

    // nnrt first, then cpu; the cache in this test's own folder unless
    // `options` names one.
    RuntimeOptions options(const std::string& nnrt_options = "",
                           const std::string& entry_extra = "") {
        const std::string opts = nnrt_options.find("cache_dir") != std::string::npos
                                     ? nnrt_options
                                     : nnrt_options + (nnrt_options.empty() ? "" : ", ") +
                                           "cache_dir = \"" + (dir_.path() / "cache").string() +
                                           "\"";
        return plugin_then_cpu(dir_, "nnrt", entry_extra + "options = { " + opts + " }\n");
    }

    long builds() { return counter("fake_nnrt_builds"); }
    long cache_hits() { return counter("fake_nnrt_cache_hits"); }
    long runs() { return counter("fake_nnrt_runs"); }
};

TEST_F(NnrtDouble, Stories260KMatchesLlamaCppWithNnrtTakingTheProjections) {
    const long runs_before = runs();
    {
        LogCapture log;
        Runtime rt(options("performance = \"extreme\", priority = \"high\""));
        // The double lists fake-cpu first; the accelerator is chosen.
        ASSERT_EQ(rt.backends().front()->label(), "nnrt/fake-npu");
        for (const ReferenceCase& c : ref_.cases) {
            SCOPED_TRACE(c.prompt);
            EXPECT_EQ(greedy(rt, c), c.full_ids);
        }
        auto model = Model::load(rt, model_);
        // float32 weights stay float32 by default, so the logits after each
        // prompt are llama.cpp's as closely as the cpu backend's (f32 KV).
        for (const ReferenceCase& c : ref_.cases) {
            SCOPED_TRACE(c.prompt);
            SessionOptions so;
            so.kv_dtype = DWELL_F32;
            Session s(rt, model, so);
            const auto logits = s.decode(model->tokenizer().encode(c.prompt, true));
            for (const auto& [id, value] : c.top5)
                EXPECT_NEAR(logits[static_cast<size_t>(id)], value, 1e-4 + 5e-5) << id;
        }
        expect_projections_only_on(rt, model, "nnrt/fake-npu");
        EXPECT_GT(runs(), runs_before);
        // The manifest's options reached the compilation (device 9 is fake-npu).
        EXPECT_EQ(text_of("fake_nnrt_last_build"),
                  "device=9 performance=4 priority=3 float16=0 cache=set");
        EXPECT_NE(log.text().find("compiled 3 projection(s) as one NNRt model for m = 1"),
                  std::string::npos);
        EXPECT_NE(log.text().find("for m = 32"), std::string::npos);
    }
    EXPECT_EQ(violations(), "");
}

TEST_F(NnrtDouble, Fp16WeightsAndActivationsKeepTheTokens) {
    {
        Runtime rt(options("weights = \"fp16\""));
        for (const ReferenceCase& c : ref_.cases) {
            SCOPED_TRACE(c.prompt);
            EXPECT_EQ(greedy(rt, c), c.full_ids);
        }
    }
    EXPECT_EQ(violations(), "");
}

// Per-channel int8 weights (with fp16 activations) are a lossy encoding, so
// exact greedy equality over 32 tokens is not promised. What is asserted:
// after each reference prompt the next-token logits stay within 0.35 of
// llama.cpp's for its top 5 (the top-1 margin is >= 1.7 in both prompts,
// so the first choice cannot flip), and the first 8 generated tokens are
// the reference's.
TEST_F(NnrtDouble, Int8WeightsStayCloseToTheReference) {
    {
        Runtime rt(options("weights = \"int8\""));
        auto model = Model::load(rt, model_);
        for (const ReferenceCase& c : ref_.cases) {
            SCOPED_TRACE(c.prompt);
            Session s(rt, model, SessionOptions{});
            const auto logits = s.decode(model->tokenizer().encode(c.prompt, true));
            double worst = 0;
            for (const auto& [id, want] : c.top5)
                worst = std::max(worst, std::fabs(double(logits[static_cast<size_t>(id)]) - want));
            EXPECT_LT(worst, 0.35);
            const auto prompt_len = model->tokenizer().encode(c.prompt, true).size();
            const auto got = greedy_ids(rt, model_, c.prompt, 8);
            EXPECT_TRUE(std::equal(got.begin(), got.end(), c.full_ids.begin()))
                << "first generated tokens differ after " << prompt_len << " prompt tokens";
        }
    }
    EXPECT_EQ(violations(), "");
}

TEST_F(NnrtDouble, FailedBuildsAndRunsRunTheStepOnCpuWithTheSameTokens) {
    const ReferenceCase& c = ref_.cases.front();
    for (const std::string fault : {"build:1", "build:7", "run:1", "run:30"}) {
        SCOPED_TRACE(fault);
        ::setenv("DWELL_FAKE_NNRT_FAIL", fault.c_str(), 1);
        {
            LogCapture log;
            // No cache: a build must really happen for "build:N" to hit it.
            Runtime rt(options("cache_dir = \"none\""));
            EXPECT_EQ(greedy(rt, c), c.full_ids);
            // One failed step, then the next one builds or runs again.
            EXPECT_TRUE(rt.backends().front()->healthy());
            const std::string call =
                fault.rfind("build", 0) == 0 ? "OH_NNCompilation_Build" : "OH_NNExecutor_RunSync";
            EXPECT_NE(log.text().find("nnrt/fake-npu failed on nodes"), std::string::npos)
                << log.text();
            EXPECT_NE(log.text().find(call + " failed with OH_NN_FAILED (1)"), std::string::npos)
                << log.text();
        }
        EXPECT_EQ(violations(), "");
    }
}

TEST_F(NnrtDouble, ASecondRuntimeLoadsTheCompiledModelsFromTheCache) {
    const std::filesystem::path cache = dir_.path() / "shared-cache";
    const std::string opts = "cache_dir = \"" + cache.string() + "\"";
    const ReferenceCase& c = ref_.cases.back();
    const long builds0 = builds(), hits0 = cache_hits();
    {
        Runtime rt(options(opts));
        EXPECT_EQ(greedy(rt, c), c.full_ids);
    }
    const long built = builds() - builds0;
    EXPECT_GT(built, 0);
    EXPECT_EQ(cache_hits(), hits0);
    size_t files = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(cache))
        files += e.path().filename() == "fake_nnrt_model.cache";
    EXPECT_EQ(files, static_cast<size_t>(built));
    {
        Runtime rt(options(opts));
        EXPECT_EQ(greedy(rt, c), c.full_ids);
    }
    EXPECT_EQ(builds() - builds0, built) << "the second runtime compiled again";
    EXPECT_EQ(cache_hits() - hits0, built);
    EXPECT_EQ(violations(), "");
}

TEST_F(NnrtDouble, TheDeviceIsChosenByName) {
    {
        Runtime rt(options("", "device = \"fake-cpu\"\n"));
        ASSERT_EQ(rt.backends().front()->label(), "nnrt/fake-cpu");
        EXPECT_EQ(greedy(rt, ref_.cases.front()), ref_.cases.front().full_ids);
        EXPECT_NE(text_of("fake_nnrt_last_build").find("device=7 "), std::string::npos);
    }
    {
        // The option naming another device than the entry's is refused,
        // with the devices there are, and the manifest falls through.
        Runtime rt(options("device = \"cpu\""));
        EXPECT_EQ(rt.backends().front()->label(), "cpu/cpu0");
        EXPECT_TRUE(choice_says(rt, "nnrt",
                                "option device = 'cpu' does not match fake-npu (NNRt "
                                "devices: fake-npu, fake-cpu"));
    }
    EXPECT_EQ(violations(), "");
}

#endif

TEST(NnrtPlugin, WithoutTheLibrariesTheDeviceIsUnavailableAndTheManifestFallsThrough) {
    expect_fall_through_without_library("nnrt", "DWELL_NNRT_LIB_DIR", "/nonexistent",
                                        "unavailable: libneural_network_core.so not found (");
}

}  // namespace
}  // namespace dwell::test
