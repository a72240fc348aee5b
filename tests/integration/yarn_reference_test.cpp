// YaRN RoPE scaling against llama.cpp v0.5.0: a synthetic qwen3 file with
// rope.scaling.type "yarn", factor 4 and an original context of 1024 (with
// 48-wide heads, 24 pairs: the correction range is pairs 4..14, so pairs
// 0..4 keep their trained frequencies, 5..13 are ramped and 15..23 are
// divided by 4), the magnitude scaling 1 + 0.1 ln 4 on cos and sin. Every
// one of 48 positions' logits within cosine 0.99999 of llama.cpp's, then 32
// greedy ids identical decoding one token per step. The same file without
// its scaling type must miss the reference: the test can tell YaRN from
// plain RoPE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "family_reference.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

SyntheticModelSpec yarn_spec() {
    SyntheticModelSpec s = family_reference_spec(SyntheticFamily::qwen3);
    s.n_ctx = 4096;
    s.n_ctx_orig = 1024;
    s.yarn_factor = 4.0f;
    s.seed = 23;
    return s;
}

// Each position's cosine against the reference; their minimum.
double min_cosine(std::span<const float> got, const FamilyReference& ref) {
    double m = 1.0;
    for (int64_t p = 0; p < ref.n_pos; ++p)
        m = std::min(m, logits_cosine(got.data() + p * ref.n_vocab,
                                      ref.logits.data() + p * ref.n_vocab, ref.n_vocab));
    return m;
}

TEST(YarnReference, Qwen3LogitsAndGreedyDecodeOneTokenPerStepMatchLlamaCpp) {
    const fs::path plugin = fs::path(DWELL_TEST_PLUGIN_DIR) / "libdwell-qwen3.so";
    if (!fs::exists(plugin)) GTEST_SKIP() << "the qwen3 model plugin is not built";
    TempDir tmp;
    // Kept when asked, to recompute the reference (tests/data/families/README.md).
    const char* keep = std::getenv("DWELL_FAMILY_GGUF_DIR");
    const fs::path gguf = (keep && *keep ? fs::path(keep) : tmp.path()) / "qwen3-yarn.gguf";
    write_synthetic_model(yarn_spec(), gguf);
    const FamilyReference ref = read_family_reference(family_reference_path("qwen3-yarn"));
    ASSERT_EQ(sha256_of(gguf), ref.sha256)
        << "generator changed: recompute tests/data/families/qwen3-yarn.logits with llama.cpp "
           "as tests/data/families/README.md says";
    ASSERT_GE(ref.n_pos, 48);
    ASSERT_GE(ref.greedy.size(), 32u);

    Runtime runtime;
    auto model = Model::load(runtime, gguf);
    ASSERT_EQ(model->plugin().name(), "qwen3");
    SessionOptions so;
    so.kv_dtype = DWELL_F32;
    Session session(runtime, model, so);
    const auto all = session.decode(ref.tokens, /*all_logits=*/true);
    ASSERT_EQ(static_cast<int64_t>(all.size()), ref.n_pos * ref.n_vocab);
    const std::vector<float> got(all.begin(), all.end());
    for (int64_t p = 0; p < ref.n_pos; ++p) {
        EXPECT_GE(logits_cosine(got.data() + p * ref.n_vocab, ref.logits.data() + p * ref.n_vocab,
                                ref.n_vocab),
                  0.99999)
            << "position " << p << " (token " << ref.tokens[p] << ")";
    }
    const double min_cos = min_cosine(got, ref);

    std::vector<int32_t> greedy;
    int32_t next = greedy_argmax(
        {got.data() + (ref.n_pos - 1) * ref.n_vocab, static_cast<size_t>(ref.n_vocab)});
    for (size_t k = 0; k < 32; ++k) {
        greedy.push_back(next);
        if (k + 1 == 32) break;
        const int32_t one[1] = {next};
        const auto last = session.decode(one);
        ASSERT_EQ(static_cast<int64_t>(last.size()), ref.n_vocab);
        next = greedy_argmax(last);
    }
    const std::vector<int32_t> want(ref.greedy.begin(), ref.greedy.begin() + 32);
    EXPECT_EQ(greedy, want) << "greedy decoding diverged from llama.cpp's";

    // The file without rope.scaling.type: plain RoPE, which must miss.
    const fs::path plain = edited_gguf_copy(gguf, {.key = "qwen3.rope.scaling.type"},
                                            tmp.path() / "qwen3-no-yarn.gguf");
    auto plain_model = Model::load(runtime, plain);
    Session plain_session(runtime, plain_model, so);
    const auto plain_all = plain_session.decode(ref.tokens, /*all_logits=*/true);
    const double plain_cos = min_cosine(plain_all, ref);
    EXPECT_LT(plain_cos, 0.999) << "the reference cannot tell YaRN from plain RoPE";
    std::printf(
        "qwen3-yarn: minimum cosine over %lld positions %.10f (1 - %.2e); 32 greedy tokens %s "
        "(llama.cpp's smallest top-1 margin %.4g); without YaRN %.6f\n",
        static_cast<long long>(ref.n_pos), min_cos, 1.0 - min_cos,
        greedy == want ? "identical" : "DIFFERENT", ref.greedy_min_margin, plain_cos);
}

}  // namespace
}  // namespace dwell::test
