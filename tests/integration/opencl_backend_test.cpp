// The opencl backend through the whole runtime, on whatever OpenCL device is
// installed (PoCL in CI): stories260K's greedy continuation equals
// llama.cpp's recorded one with every layer on opencl and with the layers
// split between opencl and cpu, and the placement says so. Skipped, with
// the reason, when the plugin was not built or no OpenCL device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/perplexity.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

RuntimeOptions opencl_first(const TempDir& dir, const std::string& opencl_layers) {
    RuntimeOptions o;
    o.manifest = dir.write("ocl" + std::to_string(opencl_layers.size()) + ".toml",
                           "[device]\nname = \"opencl test\"\n[[backend]]\nplugin = \"opencl\"\n" +
                               opencl_layers + "[[backend]]\nplugin = \"cpu\"\n");
    o.threads = 2;
    return o;
}

// Skips the calling test unless the opencl backend was selected.
#define REQUIRE_OPENCL(runtime)                                                  \
    do {                                                                         \
        std::string why = "the opencl plugin was not found";                     \
        bool selected = false;                                                   \
        for (const auto& c : (runtime).backend_choices()) {                      \
            if (c.plugin != "opencl") continue;                                  \
            selected = c.selected;                                               \
            why = c.reason;                                                      \
        }                                                                        \
        /* No device skips; a plugin failing on a device it found fails. */      \
        if (!selected && why.find("initialisation failed") != std::string::npos) \
            FAIL() << "the opencl backend failed to start: " << why;             \
        if (!selected) GTEST_SKIP() << "no usable OpenCL device: " << why;       \
    } while (0)

class OpenClStories260K : public Stories260KReference {
protected:
    void expect_reference(const std::string& layers, const std::string& placed_on_opencl,
                          bool cpu_has_nodes) {
        Runtime rt(opencl_first(dir_, layers));
        REQUIRE_OPENCL(rt);
        auto model = Model::load(rt, model_);
        for (const ReferenceCase& c : ref_.cases) {
            SCOPED_TRACE(c.prompt);
            const auto n = static_cast<int32_t>(c.full_ids.size() -
                                                model->tokenizer().encode(c.prompt, true).size());
            EXPECT_EQ(greedy_ids(rt, model_, c.prompt, n), c.full_ids);
        }
        // The placement names the layers each backend got.
        Session s(rt, model, SessionOptions{});
        const std::vector<int32_t> ids = model->tokenizer().encode("Once", true);
        s.decode(ids);
        const std::string placement = s.placement_summary();
        EXPECT_NE(placement.find("opencl/opencl0: "), std::string::npos) << placement;
        EXPECT_NE(placement.find(placed_on_opencl), std::string::npos) << placement;
        EXPECT_EQ(placement.find("cpu/cpu0: no nodes") == std::string::npos, cpu_has_nodes)
            << placement;
    }

    // cpu first, opencl second: sessions pick their backend with use_backend.
    RuntimeOptions cpu_then_opencl(const std::string& name) {
        RuntimeOptions o;
        o.manifest = dir_.write(name,
                                "[device]\nname = \"switch test\"\n[[backend]]\nplugin = "
                                "\"cpu\"\n[[backend]]\nplugin = \"opencl\"\n");
        o.threads = 2;
        return o;
    }

    // Greedy ids after "Once upon a time", `per_leg` tokens on each backend
    // of `plan` in turn; after_leg sees the session after each leg.
    std::vector<int32_t> generate_across(
        Runtime& rt, const std::shared_ptr<const Model>& model, const SessionOptions& so,
        const std::vector<std::string>& plan, int per_leg,
        const std::function<void(const Session&, const std::string&)>& after_leg = {}) {
        const std::vector<int32_t> prompt = model->tokenizer().encode("Once upon a time", true);
        const auto argmax = [](std::span<const float> v) {
            return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
        };
        Session s(rt, model, so);
        std::vector<int32_t> out;
        int32_t next = argmax(s.decode(prompt));
        for (const std::string& backend : plan) {
            s.use_backend(backend);
            for (int i = 0; i < per_leg; ++i) {
                out.push_back(next);
                next = argmax(s.decode(std::span<const int32_t>(&next, 1)));
            }
            if (after_leg) after_leg(s, backend);
        }
        EXPECT_THROW(s.use_backend("hexagon"), Error);
        return out;
    }

    TempDir dir_;
};

TEST_F(OpenClStories260K, AllLayersOnOpenClMatchLlamaCpp) {
    expect_reference("", "layers 0-4 + embedding/output", false);
}

TEST_F(OpenClStories260K, LayersSplitBetweenOpenClAndCpuMatchLlamaCpp) {
    expect_reference("layers = [0, 1, 2]\n", "layers 0-2 [", true);
}

// cpu -> opencl -> cpu during one greedy generation: the same tokens as
// staying on cpu, and each switch shows in the placement.
TEST_F(OpenClStories260K, SwitchingBackendsMidGenerationKeepsTheTokens) {
    Runtime rt(cpu_then_opencl("cpu-first.toml"));
    REQUIRE_OPENCL(rt);
    auto model = Model::load(rt, model_);
    // The preferred backend takes every node; the other none.
    const auto only_preferred = [](const Session& s, const std::string& backend) {
        const std::string other = backend == "cpu" ? "opencl" : "cpu";
        EXPECT_NE(s.placement_summary().find(other + "/" + other + "0: no nodes"),
                  std::string::npos)
            << s.placement_summary();
    };
    const SessionOptions so;
    const auto on_cpu = generate_across(rt, model, so, {"cpu", "cpu", "cpu"}, 10, only_preferred);
    EXPECT_EQ(generate_across(rt, model, so, {"cpu", "opencl", "cpu"}, 10, only_preferred), on_cpu);
}

// FP8 KV (offset keys, stored against the token's query; quant.h): with
// every layer on opencl, perplexity within 1% of F16 and within 0.1% of the
// cpu's FP8 (the two differ only where float rounding flips a tie); and
// rows one backend wrote read by the other: hopping cpu -> opencl -> cpu
// mid-generation gives the cpu's tokens.
TEST_F(OpenClStories260K, Fp8KvCachesMatchTheCpuAndMoveBetweenBackends) {
    const fs::path text = reference_dir() / "tinystory-eval.txt";
    if (!fs::exists(text)) GTEST_SKIP() << text << " not found";
    Runtime ocl(opencl_first(dir_, ""));
    REQUIRE_OPENCL(ocl);
    RuntimeOptions cpu_only;
    cpu_only.manifest =
        dir_.write("cpu.toml", "[device]\nname = \"cpu\"\n[[backend]]\nplugin = \"cpu\"\n");
    cpu_only.threads = 2;
    Runtime cpu(cpu_only);
    std::ifstream in(text, std::ios::binary);
    const std::string content((std::istreambuf_iterator<char>(in)), {});
    const auto ppl = [&](Runtime& rt, dwell_dtype kv) {
        auto model = Model::load(rt, model_);
        PerplexityOptions o;
        o.n_ctx = 256;
        SessionOptions so;
        so.kv_dtype = kv;
        return perplexity(rt, model, model->tokenizer().encode(content, true), o, so).ppl.mean;
    };
    const double f16 = ppl(cpu, DWELL_F16), cpu_fp8 = ppl(cpu, DWELL_FP8_E4M3),
                 ocl_fp8 = ppl(ocl, DWELL_FP8_E4M3);
    EXPECT_NEAR(ocl_fp8, f16, 0.01 * f16);
    EXPECT_NEAR(ocl_fp8, cpu_fp8, 0.001 * cpu_fp8);

    Runtime rt(cpu_then_opencl("cpu-first-fp8.toml"));
    auto model = Model::load(rt, model_);
    SessionOptions so;
    so.kv_dtype = DWELL_FP8_E4M3;
    EXPECT_EQ(generate_across(rt, model, so, {"cpu", "opencl", "cpu"}, 12),
              generate_across(rt, model, so, {"cpu", "cpu", "cpu"}, 12));
}

// `dwell run -i`: /backend switches mid-conversation; the text is the same
// as staying on cpu, and an unknown backend is one clear line.
TEST_F(OpenClStories260K, InteractiveBackendCommandKeepsTheText) {
    Runtime rt(opencl_first(dir_, ""));
    REQUIRE_OPENCL(rt);
    const std::string manifest =
        dir_.write("cpu-then-opencl.toml",
                   "[device]\nname = \"cli switch\"\n[[backend]]\nplugin = \"cpu\"\n"
                   "[[backend]]\nplugin = \"opencl\"\n")
            .string();
    const std::vector<std::string> args = {
        "run", "-m", model_.string(), "--manifest", manifest, "-p", "Once upon a time",
        "-n",  "12", "--temp",        "0",          "-i"};
    const CommandResult stay = run_dwell(args, "Lily\nThe dog\n");
    const CommandResult hop =
        run_dwell(args, "/backend opencl\nLily\n/backend hexagon\n/backend cpu\nThe dog\n");
    ASSERT_EQ(stay.exit_code, 0) << stay.err;
    ASSERT_EQ(hop.exit_code, 0) << hop.err;
    EXPECT_EQ(hop.out, stay.out);
    EXPECT_NE(hop.err.find("backend: opencl"), std::string::npos) << hop.err;
    EXPECT_NE(hop.err.find("backend 'hexagon' is not selected"), std::string::npos) << hop.err;
    // Three lines of text: the prompt's continuation and one per input line.
    EXPECT_EQ(std::count(stay.out.begin(), stay.out.end(), '\n'), 3) << stay.out;
}

// `dwell bench --profile` reports the opencl device's time per op kind.
TEST_F(OpenClStories260K, BenchProfileReportsDeviceTimePerOp) {
    Runtime rt(opencl_first(dir_, ""));
    REQUIRE_OPENCL(rt);
    const fs::path manifest = dir_.path() / "ocl0.toml";
    const CommandResult r =
        run_dwell({"bench", "-m", model_.string(), "--manifest", manifest.string(), "-p", "8", "-n",
                   "4", "-r", "1", "--profile", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const auto& ops = j.at("profile").at("opencl/opencl0");
    ASSERT_TRUE(ops.is_array());
    bool matmul = false;
    for (const auto& o : ops) {
        EXPECT_GT(o.at("count").get<uint64_t>(), 0u);
        EXPECT_GE(o.at("ms").get<double>(), 0.0);
        matmul |= o.at("op") == "matmul";
    }
    EXPECT_TRUE(matmul) << ops.dump();
    EXPECT_EQ(j.at("profile").at("cpu/cpu0"), "no per-op times");
}

}  // namespace
}  // namespace dwell::test
