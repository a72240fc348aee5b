// The hexagon plugin's whole path through the libcdsprpc.so test double
// (tests/plugins/hexagon_double): probe, session, rpcmem buffers, op
// batches, and the DSP-side kernels playing the DSP. stories260K's greedy
// tokens equal llama.cpp's with the DSP taking every matmul; a DSP error,
// a failed call or a late answer makes that step run on cpu and the tokens
// stay the same; and the API contract holds (session before invoke,
// buffers mapped before use, everything freed).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "dwell/core/model.hpp"
#include "dwell/core/runtime.hpp"
#include "dwell/core/session.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

#ifdef DWELL_TEST_FAKE_CDSPRPC

class HexagonDouble : public Stories260KReference {
protected:
    void SetUp() override {
        Stories260KReference::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        ::setenv("DWELL_HEXAGON_FASTRPC_LIB", DWELL_TEST_FAKE_CDSPRPC, 1);
        ::unsetenv("DWELL_FAKE_DSP_FAIL");
        double_ = ::dlopen(DWELL_TEST_FAKE_CDSPRPC, RTLD_NOW);
        ASSERT_NE(double_, nullptr) << ::dlerror();
    }
    void TearDown() override {
        ::unsetenv("DWELL_FAKE_DSP_FAIL");
        if (double_ != nullptr) ::dlclose(double_);
    }

    RuntimeOptions options(const std::string& hexagon_options = "") {
        RuntimeOptions o;
        o.manifest = dir_.write("hexagon.toml",
                                "[device]\nname = \"hexagon test\"\n[[backend]]\n"
                                "plugin = \"hexagon\"\n" +
                                    hexagon_options + "[[backend]]\nplugin = \"cpu\"\n");
        o.threads = 2;
        return o;
    }

    // The double's record of contract violations and leftovers.
    std::string violations() {
        using Fn = int (*)(char*, int);
        auto fn = reinterpret_cast<Fn>(::dlsym(double_, "fake_cdsprpc_violations"));
        char buf[1024] = {0};
        return fn != nullptr && fn(buf, sizeof buf) > 0 ? buf : "";
    }
    long invokes() {
        using Fn = long (*)();
        auto fn = reinterpret_cast<Fn>(::dlsym(double_, "fake_cdsprpc_invokes"));
        return fn != nullptr ? fn() : -1;
    }

    std::vector<int32_t> greedy(Runtime& rt, const ReferenceCase& c) {
        auto model = Model::load(rt, model_);
        const auto n = static_cast<int32_t>(c.full_ids.size() -
                                            model->tokenizer().encode(c.prompt, true).size());
        return greedy_ids(rt, model_, c.prompt, n);
    }

    TempDir dir_;
    void* double_ = nullptr;
};

TEST_F(HexagonDouble, Stories260KMatchesLlamaCppWithTheDspTakingEveryMatmul) {
    {
        Runtime rt(options());
        ASSERT_EQ(rt.backends().front()->label(), "hexagon/cdsp0");
        for (const ReferenceCase& c : ref_.cases) {
            SCOPED_TRACE(c.prompt);
            EXPECT_EQ(greedy(rt, c), c.full_ids);
        }
        auto model = Model::load(rt, model_);
        Session s(rt, model, SessionOptions{});
        s.decode(model->tokenizer().encode("Once", true));
        const std::string& placement = s.placement_summary();
        EXPECT_NE(placement.find("hexagon/cdsp0: "), std::string::npos) << placement;
        EXPECT_NE(placement.find("matmulx36"), std::string::npos) << placement;
        EXPECT_GT(invokes(), 0);
    }
    EXPECT_EQ(violations(), "");
}

TEST_F(HexagonDouble, DspFailuresRunTheStepOnCpuWithTheSameTokens) {
    const ReferenceCase& c = ref_.cases.front();
    for (const std::string fault : {"error:3", "rpc:4", "slow:5:1500"}) {
        SCOPED_TRACE(fault);
        ::setenv("DWELL_FAKE_DSP_FAIL", fault.c_str(), 1);
        {
            Runtime rt(options("options = { timeout_ms = \"300\" }\n"));
            EXPECT_EQ(greedy(rt, c), c.full_ids);
            // A DSP still busy with a late batch refuses the next ones and,
            // three failed steps on, is left out; the others recover.
            if (fault.rfind("slow", 0) != 0) {
                EXPECT_TRUE(rt.backends().front()->healthy());
            }
        }
        EXPECT_EQ(violations(), "");
    }
}

#endif

TEST(HexagonPlugin, WithoutFastRpcTheDeviceIsUnavailableAndTheManifestFallsThrough) {
    ::setenv("DWELL_HEXAGON_FASTRPC_LIB", "/nonexistent/libcdsprpc.so", 1);
    TempDir dir;
    RuntimeOptions o;
    o.manifest = dir.write("m.toml",
                           "[device]\nname = \"x\"\n[[backend]]\nplugin = \"hexagon\"\n"
                           "[[backend]]\nplugin = \"cpu\"\n");
    o.threads = 2;
    Runtime rt(o);
    ASSERT_EQ(rt.backends().size(), 1u);
    EXPECT_EQ(rt.backends().front()->label(), "cpu/cpu0");
    bool said = false;
    for (const auto& ch : rt.backend_choices())
        said |= ch.plugin == "hexagon" &&
                ch.reason.find("libcdsprpc.so not found") != std::string::npos;
    EXPECT_TRUE(said);
    ::unsetenv("DWELL_HEXAGON_FASTRPC_LIB");
}

}  // namespace
}  // namespace dwell::test
