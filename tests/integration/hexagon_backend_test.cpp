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

#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"
#include "vendor_double_fixture.hpp"

namespace dwell::test {
namespace {

#ifdef DWELL_TEST_FAKE_CDSPRPC

class HexagonDouble : public VendorDoubleTest {
protected:
    HexagonDouble()
        : VendorDoubleTest({"DWELL_HEXAGON_FASTRPC_LIB", DWELL_TEST_FAKE_CDSPRPC,
                            "DWELL_FAKE_DSP_FAIL", DWELL_TEST_FAKE_CDSPRPC,
                            "fake_cdsprpc_violations"}) {}

    RuntimeOptions options(const std::string& hexagon_options = "") {
        return plugin_then_cpu(dir_, "hexagon", hexagon_options);
    }
    long invokes() { return counter("fake_cdsprpc_invokes"); }
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
    expect_fall_through_without_library("hexagon", "DWELL_HEXAGON_FASTRPC_LIB",
                                        "/nonexistent/libcdsprpc.so", "libcdsprpc.so not found");
}

}  // namespace
}  // namespace dwell::test
