// The apu plugin's whole path through the NeuronAdapter test double
// (tests/plugins/apu_double): probe, lowering of each split's projections
// to one NeuronModel, compilation with the manifest's preference and
// priority, the on-disk network cache, fd-backed memory, execution, and
// the vendor's errors. stories260K's greedy tokens equal llama.cpp's with
// the APU taking every projection while attention and the KV cache stay
// on the cpu; an injected compile failure or execution error runs that
// step on cpu with a warning and the same tokens; a second runtime loads
// its networks from the cache; and the double's contract checks stay clean.
#include <dlfcn.h>
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

#ifdef DWELL_TEST_FAKE_NEURON

class ApuDouble : public VendorDoubleTest {
protected:
    ApuDouble()
        : VendorDoubleTest({"DWELL_APU_NEURON_LIB", DWELL_TEST_FAKE_NEURON,
                            "DWELL_FAKE_NEURON_FAIL", DWELL_TEST_FAKE_NEURON,
                            "fake_neuron_violations"}) {}

    RuntimeOptions options(const std::string& apu_options = "") {
        return plugin_then_cpu(dir_, "apu",
                               apu_options.empty() ? "" : "options = { " + apu_options + " }\n");
    }

    // The logits after the prompt, with an F32 KV cache as llama.cpp's
    // reference was made, next to its top 5: the largest distance, and
    // whether the argmax agrees.
    std::pair<double, bool> logit_distance(Runtime& rt, const ReferenceCase& c) {
        auto model = Model::load(rt, model_);
        SessionOptions so;
        so.kv_dtype = DWELL_F32;
        Session s(rt, model, so);
        const auto logits = s.decode(model->tokenizer().encode(c.prompt, true));
        double worst = 0;
        for (const auto& [id, want] : c.top5)
            worst = std::max(worst, std::fabs(double(logits[static_cast<size_t>(id)]) - want));
        const auto top = std::max_element(logits.begin(), logits.end()) - logits.begin();
        return {worst, top == c.top5.front().first};
    }
};

TEST_F(ApuDouble, Stories260KMatchesLlamaCppWithTheApuTakingTheProjections) {
    const long compiles = counter("fake_neuron_compiles");
    const long runs = counter("fake_neuron_executions");
    {
        Runtime rt(options());
        ASSERT_EQ(rt.backends().front()->label(), "apu/apu0");
        for (const ReferenceCase& c : ref_.cases) {
            SCOPED_TRACE(c.prompt);
            EXPECT_EQ(greedy(rt, c), c.full_ids);
            // F32 weights stay FLOAT32 by default: the logits are llama.cpp's
            // to the 4 decimals it printed (as on the cpu backend alone).
            const auto [worst, same_top] = logit_distance(rt, c);
            EXPECT_LT(worst, 1e-4 + 5e-5);
            EXPECT_TRUE(same_top);
        }
        // The split: every projection (5 layers x 7, and the vocabulary
        // one) on the APU; attention, norms, RoPE and the KV cache on cpu.
        expect_projections_only_on(rt, Model::load(rt, model_), "apu/apu0");
        EXPECT_GT(counter("fake_neuron_compiles"), compiles);
        EXPECT_GT(counter("fake_neuron_executions"), runs);
    }
    EXPECT_EQ(violations(), "");
}

TEST_F(ApuDouble, Fp16WeightsAndChunkedPrefillMatchLlamaCpp) {
    // fp16 weights through CAST; prompts longer than 4 tokens run as
    // several padded chunks of the 4-row prefill network.
    {
        Runtime rt(
            options("weights = \"fp16\", prefill_chunk = \"4\", preference = "
                    "\"sustained_speed\", priority = \"high\""));
        double moved = 0;
        for (const ReferenceCase& c : ref_.cases) {
            SCOPED_TRACE(c.prompt);
            EXPECT_EQ(greedy(rt, c), c.full_ids);
            // fp16 rounds each weight by up to 2^-11 relative: the logits
            // move by a few 1e-3 on these prompts, well inside 2e-2.
            const auto [worst, same_top] = logit_distance(rt, c);
            EXPECT_LT(worst, 2e-2);
            EXPECT_TRUE(same_top);
            moved = std::max(moved, worst);
        }
        EXPECT_GT(moved, 1e-4);
    }
    EXPECT_EQ(violations(), "");
}

TEST_F(ApuDouble, Int8PerChannelWeightsStayCloseToLlamaCpp) {
    // Symmetric per-channel int8 (DEQUANTIZE) rounds every weight by up to
    // half a step of max|row| / 127: the next-token logits move (by up to
    // ~0.1 on these prompts, against top logits of 10-18), the most likely
    // next token must not. They must move at all, or the int8 path was not
    // taken.
    {
        Runtime rt(options("weights = \"int8\""));
        double moved = 0;
        for (const ReferenceCase& c : ref_.cases) {
            SCOPED_TRACE(c.prompt);
            const auto [worst, same_top] = logit_distance(rt, c);
            EXPECT_LT(worst, 0.25);
            EXPECT_TRUE(same_top);
            moved = std::max(moved, worst);
        }
        EXPECT_GT(moved, 1e-3);
    }
    EXPECT_EQ(violations(), "");
}

TEST_F(ApuDouble, VendorErrorsRunTheStepOnCpuWithTheSameTokens) {
    const ReferenceCase& c = ref_.cases.front();
    for (const std::string fault : {"compile:2", "execute:5"}) {
        SCOPED_TRACE(fault);
        ::setenv("DWELL_FAKE_NEURON_FAIL", fault.c_str(), 1);
        {
            LogCapture log;
            Runtime rt(options());
            EXPECT_EQ(greedy(rt, c), c.full_ids);
            EXPECT_TRUE(rt.backends().front()->healthy());
            const std::string call = fault[0] == 'c' ? "NeuronCompilation_finish failed with "
                                                       "NEURON_OP_FAILED (5)"
                                                     : "NeuronExecution_compute failed with "
                                                       "NEURON_BAD_STATE (7)";
            const std::string text = log.text();
            EXPECT_NE(text.find("apu/apu0 failed on nodes"), std::string::npos) << text;
            EXPECT_NE(text.find(call), std::string::npos) << text;
            EXPECT_NE(text.find("running them on the next backend"), std::string::npos) << text;
        }
        ::unsetenv("DWELL_FAKE_NEURON_FAIL");
        EXPECT_EQ(violations(), "");
    }
}

TEST_F(ApuDouble, ASecondRuntimeLoadsTheCompiledNetworksFromTheCache) {
    const ReferenceCase& c = ref_.cases.front();
    const std::string cache = (dir_.path() / "neuron-cache").string();
    const std::string opts = "cache_dir = \"" + cache + "\"";
    const long compiles0 = counter("fake_neuron_compiles");
    const long hits0 = counter("fake_neuron_cache_hits");
    {
        Runtime rt(options(opts));
        EXPECT_EQ(greedy(rt, c), c.full_ids);
    }
    const long compiled = counter("fake_neuron_compiles") - compiles0;
    EXPECT_GT(compiled, 0);
    EXPECT_EQ(counter("fake_neuron_cache_hits"), hits0);
    size_t files = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(cache)) ++files;
    EXPECT_EQ(files, static_cast<size_t>(compiled));
    {
        Runtime rt(options(opts));
        EXPECT_EQ(greedy(rt, c), c.full_ids);
    }
    EXPECT_EQ(counter("fake_neuron_compiles") - compiles0, compiled);
    EXPECT_EQ(counter("fake_neuron_cache_hits") - hits0, compiled);
    EXPECT_EQ(violations(), "");
}

TEST_F(ApuDouble, BadOptionsAreRefusedNamingTheKey) {
    RuntimeOptions o = options("weights = \"int4\"");
    o.require_backend = false;
    Runtime rt(o);
    EXPECT_TRUE(choice_says(rt, "apu", "option 'weights' must be one of"));
}

TEST_F(ApuDouble, TheDoubleCatchesMisuse) {
    // The contract checks the plugin is held to, shown to fire: compiling a
    // model that was never finished, and leaving it alive.
    using Create = int (*)(void**);
    using Compile = int (*)(void*, void**);
    using Free = void (*)(void*);
    auto model_create = reinterpret_cast<Create>(::dlsym(double_, "NeuronModel_create"));
    auto compilation_create =
        reinterpret_cast<Compile>(::dlsym(double_, "NeuronCompilation_create"));
    auto model_free = reinterpret_cast<Free>(::dlsym(double_, "NeuronModel_free"));
    auto clear = reinterpret_cast<void (*)()>(::dlsym(double_, "fake_neuron_clear_violations"));
    ASSERT_TRUE(model_create && compilation_create && model_free && clear);
    void* model = nullptr;
    void* compilation = nullptr;
    ASSERT_EQ(model_create(&model), 0);
    EXPECT_EQ(compilation_create(model, &compilation), 7);  // NEURON_BAD_STATE
    EXPECT_EQ(compilation, nullptr);
    const std::string seen = violations();
    EXPECT_NE(seen.find("NeuronCompilation_create of a model not finished"), std::string::npos)
        << seen;
    EXPECT_NE(seen.find("1 NeuronModel(s) not freed"), std::string::npos) << seen;
    model_free(model);
    clear();
    EXPECT_EQ(violations(), "");
}

#endif

TEST(ApuPlugin, WithoutNeuronAdapterTheDeviceIsUnavailableAndTheManifestFallsThrough) {
    expect_fall_through_without_library(
        "apu", "DWELL_APU_NEURON_LIB", "/nonexistent/libneuron_adapter.so",
        "unavailable: NeuronAdapter library not found (tried /nonexistent/libneuron_adapter.so)");
}

}  // namespace
}  // namespace dwell::test
