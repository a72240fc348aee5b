// Gemma 2 and Gemma 3 against llama.cpp on the synthetic files of
// family_reference_spec(): the logits at each of the 48 positions of
// tests/data/families/<family>.logits must have cosine >= 0.99999 with
// llama.cpp's, and decoding one token per step must pick the same 32
// greedy tokens llama.cpp picked (its `greedy` header line), so the
// windowed layers run in decode as well as in prefill. The spec's window
// (8) is shorter than the sequence and its soft-caps are reached; copies of
// the file with the window or the caps edited away must then miss the
// reference, which shows those paths decide the result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <span>
#include <sstream>
#include <stdexcept>
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

// dwell's logits at every position of the reference's ids, cpu, F32 KV.
std::vector<float> dwell_logits(Runtime& rt, const fs::path& gguf, const FamilyReference& ref) {
    auto model = Model::load(rt, gguf);
    SessionOptions so;
    so.kv_dtype = DWELL_F32;
    Session session(rt, model, so);
    const auto got = session.decode(ref.tokens, /*all_logits=*/true);
    return {got.begin(), got.end()};
}

double min_cosine(const std::vector<float>& got, const FamilyReference& ref) {
    double m = 1.0;
    for (int64_t p = 0; p < ref.n_pos; ++p)
        m = std::min(m, logits_cosine(got.data() + p * ref.n_vocab,
                                      ref.logits.data() + p * ref.n_vocab, ref.n_vocab));
    return m;
}

class GemmaFamilyReference : public ::testing::TestWithParam<SyntheticFamily> {
protected:
    void SetUp() override {
        family_ = GetParam();
        name_ = synthetic_family_name(family_);
        spec_ = family_reference_spec(family_);
        // Kept when asked, to recompute the reference (tests/data/families/README.md).
        const char* keep = std::getenv("DWELL_FAMILY_GGUF_DIR");
        gguf_ = (keep && *keep ? fs::path(keep) : tmp_.path()) / (name_ + ".gguf");
        write_synthetic_model(spec_, gguf_);
        ref_ = read_family_reference(fs::path(DWELL_TEST_SOURCE_DIR) / "tests" / "data" /
                                     "families" / (name_ + ".logits"));
        ASSERT_EQ(sha256_of(gguf_), ref_.sha256)
            << "generator changed: recompute tests/data/families/" << name_ << ".logits";
    }

    SyntheticFamily family_{};
    std::string name_;
    SyntheticModelSpec spec_;
    TempDir tmp_;
    fs::path gguf_;
    FamilyReference ref_;
};

TEST_P(GemmaFamilyReference, LogitsMatchLlamaCppToFiveNines) {
    ASSERT_GE(ref_.n_pos, 48);
    ASSERT_LT(spec_.sliding_window, ref_.n_pos) << "the window must be shorter than the sequence";
    Runtime rt;
    const auto got = dwell_logits(rt, gguf_, ref_);
    ASSERT_EQ(static_cast<int64_t>(got.size()), ref_.n_pos * ref_.n_vocab);
    const double m = min_cosine(got, ref_);
    EXPECT_GE(m, 0.99999) << name_;
    // The final soft-cap is reached: some logits sit high on the tanh.
    float peak = 0;
    for (const float x : ref_.logits) peak = std::max(peak, std::fabs(x));
    if (spec_.final_softcap > 0) {
        EXPECT_GT(peak, 0.6f * spec_.final_softcap)
            << name_ << ": the final soft-cap is not reached";
        EXPECT_LE(peak, spec_.final_softcap) << name_;
    }
    std::printf("%s: minimum cosine over %lld positions %.8f (largest |logit| %.3f)\n",
                name_.c_str(), static_cast<long long>(ref_.n_pos), m, peak);
}

TEST_P(GemmaFamilyReference, GreedyTokensOneStepAtATimeMatchLlamaCpp) {
    ASSERT_EQ(ref_.greedy.size(), 32u) << "the reference has no 32 greedy tokens";
    Runtime rt;
    auto model = Model::load(rt, gguf_);
    SessionOptions so;
    so.kv_dtype = DWELL_F32;
    Session session(rt, model, so);
    std::vector<int32_t> got;
    int32_t next = greedy_argmax(session.decode(ref_.tokens));
    for (size_t i = 0; i < ref_.greedy.size(); ++i) {
        got.push_back(next);
        const int32_t one[1] = {next};
        next = greedy_argmax(session.decode(one));
    }
    EXPECT_EQ(got, ref_.greedy) << name_;
}

// Without the window (every layer global) or without the caps the same
// file computes something else: the reference would catch a kernel that
// ignored either.
TEST_P(GemmaFamilyReference, WindowAndSoftCapsDecideTheLogits) {
    Runtime rt;
    const std::string arch = name_ + ".";
    const auto edited = [&](const std::string& key, int32_t value) {
        return edited_gguf_copy(gguf_, {.key = arch + key, .value = value},
                                tmp_.path() / (key + ".gguf"));
    };
    // A window as long as the context: nothing is hidden any more.
    const double wide =
        min_cosine(dwell_logits(rt, edited("attention.sliding_window", 256), ref_), ref_);
    EXPECT_LT(wide, 0.9999) << name_ << ": the window makes no difference";
    std::printf("%s: min cosine with the window widened %.6f\n", name_.c_str(), wide);
    // Every layer global (pattern 1): no window and the global RoPE base.
    const double global =
        min_cosine(dwell_logits(rt, edited("attention.sliding_window_pattern", 1), ref_), ref_);
    EXPECT_LT(global, 0.9999) << name_;
    std::printf("%s: min cosine with every layer global %.6f\n", name_.c_str(), global);
    if (family_ == SyntheticFamily::gemma2) {
        // Caps far above the scores and logits act as no cap at all.
        const double uncapped =
            min_cosine(dwell_logits(rt, edited("attn_logit_softcapping", 100000), ref_), ref_);
        EXPECT_LT(uncapped, 0.9999) << name_ << ": the attention soft-cap makes no difference";
        std::printf("%s: min cosine without the attention cap %.6f\n", name_.c_str(), uncapped);
    }
    if (spec_.final_softcap > 0) {
        const double uncapped =
            min_cosine(dwell_logits(rt, edited("final_logit_softcapping", 100000), ref_), ref_);
        EXPECT_LT(uncapped, 0.9999) << name_ << ": the final soft-cap makes no difference";
        std::printf("%s: min cosine without the final cap %.6f\n", name_.c_str(), uncapped);
    }
}

// Hostile or impossible hyper-parameters are refused in one line naming
// the key, before anything runs.
TEST_P(GemmaFamilyReference, BadHyperParametersAreRefusedNamingTheKey) {
    const std::string arch = name_ + ".";
    struct Bad {
        GgufEdit edit;
        std::string names;
    };
    std::vector<Bad> bad = {
        {{.key = arch + "attention.sliding_window", .value = -3}, "attention.sliding_window"},
        {{.key = arch + "attention.sliding_window_pattern", .value = 5000},
         "attention.sliding_window_pattern"},
        {{.key = arch + "rope.freq_base_swa", .value = 0}, "rope.freq_base_swa"},
        {{.key = arch + "final_logit_softcapping", .text = "thirty"}, "final_logit_softcapping"},
        {{.key = arch + "attention.key_length_swa", .value = 32}, "attention.key_length_swa"},
    };
    if (family_ == SyntheticFamily::gemma2) {
        // A window of 0 would hide even the token itself.
        bad.push_back(
            {{.key = arch + "attention.sliding_window", .value = 0}, "attention.sliding_window"});
        bad.push_back(
            {{.key = arch + "attn_logit_softcapping", .value = 0}, "attn_logit_softcapping"});
    } else {
        bad.push_back(
            {{.key = arch + "final_logit_softcapping", .value = -1}, "final_logit_softcapping"});
    }
    for (size_t i = 0; i < bad.size(); ++i) {
        const fs::path p = edited_gguf_copy(gguf_, bad[i].edit,
                                            tmp_.path() / ("bad" + std::to_string(i) + ".gguf"));
        const std::string error = model_load_error(p);
        EXPECT_NE(error.find(arch + bad[i].names), std::string::npos)
            << bad[i].names << ": " << error;
        EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    }
}

INSTANTIATE_TEST_SUITE_P(Families, GemmaFamilyReference,
                         ::testing::Values(SyntheticFamily::gemma2, SyntheticFamily::gemma3),
                         [](const auto& info) { return synthetic_family_name(info.param); });

// ABI 1.5 added ATTENTION's window and soft-cap: a backend built against
// 1.3 that offers attention gets none of gemma2's (every layer is capped),
// and the placement says why.
TEST(GemmaFamily, BackendsBeforeAbi15GetNoWindowedOrCappedAttention) {
    TempDir dir;
    const fs::path gguf = dir.path() / "gemma2.gguf";
    write_synthetic_model(family_reference_spec(SyntheticFamily::gemma2), gguf);
    RuntimeOptions o;
    o.manifest = dir.write("m.toml", "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                                         "\"]\n\n[[backend]]\nplugin = \"partial13\"\n"
                                         "options = { offer_attention = \"1\" }\n\n"
                                         "[[backend]]\nplugin = \"cpu\"\n");
    Runtime rt(o);
    ASSERT_EQ(rt.backends().size(), 2u);
    auto m = Model::load(rt, gguf);
    Session s(rt, m);
    const std::vector<int32_t> ids = {1, 404, 805, 185};
    s.decode(ids);
    const std::string summary = s.placement_summary();
    EXPECT_NE(summary.find("partial13/adder0: built against dwell ABI 1.3, which predates "
                           "sliding-window and soft-capped attention (rebuild it against 1.5 or "
                           "later)"),
              std::string::npos)
        << summary;
    // Its placement line ("partial13/adder0: N nodes ... [addxN]") lists no
    // attention; the cpu's lists all four.
    const size_t at = summary.find("partial13/adder0: ");
    ASSERT_NE(at, std::string::npos) << summary;
    const std::string line = summary.substr(at, summary.find('\n', at) - at);
    EXPECT_EQ(line.find("attention"), std::string::npos) << line;
    EXPECT_NE(summary.find("attentionx4"), std::string::npos) << summary;
}

}  // namespace
}  // namespace dwell::test
