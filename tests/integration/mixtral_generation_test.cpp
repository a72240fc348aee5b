// Greedy generation of a synthetic Mixtral-style model (8 experts, 2 per
// token), one token per decode step, against llama.cpp's greedy ids on the
// same file. Single-token steps take the decode path of the expert routing
// (one token, k slots), which the batched reference logits test does not.
//
// The reference ids were produced with llama.cpp (commit c392e50) on the
// file this spec writes, whose sha256 is recorded so that a generator change
// is reported as such: by a small program outside this repository that
// loads the file with default model parameters, makes a context with
// n_ctx = n_batch = 256, F32 K and V caches and flash attention off,
// decodes the prompt ids in one batch, then picks the largest logit and
// decodes it alone, 18 times. DWELL_FAMILY_GGUF_DIR=DIR keeps the file
// (DIR/mixtral-8x2.gguf) to recompute them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

// The reference test's Mixtral-style model (family_reference_spec), one
// layer deeper and with twice the experts.
SyntheticModelSpec mixtral_spec() {
    SyntheticModelSpec s = family_reference_spec(SyntheticFamily::mixtral);
    s.n_layer = 3;
    s.n_expert = 8;
    s.seed = 21;
    return s;
}

constexpr const char* kSha256 = "71edfbab48eef5952d885ac8cd04116a05ea880d3e5f34ca1a3038ee23f52f7e";
const std::vector<int32_t> kPrompt = {1, 404, 805, 185};
// llama.cpp's first 18 greedy ids: at each, its top two logits differ by at
// least 0.0098; at the 19th by 0.0006, closer than two runtimes' rounding
// can be trusted to order.
const std::vector<int32_t> kLlamaCppGreedy = {343, 343, 343, 52,  52, 632, 52,  632, 52,
                                              632, 52,  223, 445, 52, 223, 445, 445, 445};

TEST(MixtralGeneration, GreedyIdsMatchLlamaCppTokenByToken) {
    TempDir tmp;
    const char* keep = std::getenv("DWELL_FAMILY_GGUF_DIR");
    const fs::path gguf = (keep && *keep ? fs::path(keep) : tmp.path()) / "mixtral-8x2.gguf";
    write_synthetic_model(mixtral_spec(), gguf);
    ASSERT_EQ(sha256_of(gguf), kSha256)
        << "generator changed: recompute the llama.cpp ids in " << __FILE__;

    Runtime runtime;
    auto model = Model::load(runtime, gguf);
    ASSERT_EQ(model->plugin().name(), "mixtral");
    SessionOptions so;
    so.kv_dtype = DWELL_F32;
    Session session(runtime, model, so);
    auto logits = session.decode(kPrompt);
    std::vector<int32_t> got;
    for (size_t i = 0; i < kLlamaCppGreedy.size(); ++i) {
        const auto best =
            static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        got.push_back(best);
        logits = session.decode(std::vector<int32_t>{best});
    }
    EXPECT_EQ(got, kLlamaCppGreedy);
}

}  // namespace
}  // namespace dwell::test
