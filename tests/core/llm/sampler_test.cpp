#include "dwell/core/llm/sampler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/status.h"

namespace {

// Plain temperature sampling: every filter off.
dwell::SamplerParams unfiltered(float temperature, uint64_t seed) {
    dwell::SamplerParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

dwell::SamplerParams greedy() {
    dwell::SamplerParams p;
    p.temperature = 0.0f;
    return p;
}

std::vector<int32_t> draw(dwell::Sampler& s, const std::vector<float>& logits, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) out.push_back(s.sample(logits));
    return out;
}

// Draws `n` tokens and checks the frequencies against softmax(logits / t) with
// Pearson's chi-square. The seed is fixed, so this is deterministic; the bound
// is the 99.9% quantile, so an honest sampler passes for almost every seed.
void expect_matches_softmax(const std::vector<float>& logits, float t, uint64_t seed) {
    dwell::Sampler s(unfiltered(t, seed));
    const int n = 20000;
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < n; ++i) ++counts.at(s.sample(logits));

    std::vector<double> probs;
    double sum = 0.0;
    for (float l : logits) sum += std::exp(l / t);
    for (float l : logits) probs.push_back(std::exp(l / t) / sum);

    double chi2 = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) {
        const double expected = probs[i] * n;
        chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
        EXPECT_NEAR(static_cast<double>(counts[i]) / n, probs[i], 0.015) << "token " << i;
    }
    // 99.9% quantile of chi-square with 5 degrees of freedom.
    ASSERT_EQ(logits.size(), 6u);
    EXPECT_LT(chi2, 20.52);
}

void expect_invalid(const dwell::SamplerParams& p, const std::string& name) {
    try {
        dwell::Sampler s(p);
        ADD_FAILURE() << "accepted bad " << name;
    } catch (const dwell::Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
}

}  // namespace

TEST(SamplerTest, GreedyIsArgmax) {
    dwell::Sampler s(greedy());
    EXPECT_EQ(s.sample(std::vector<float>{1.0f, 3.0f, 2.0f}), 1);
    EXPECT_EQ(s.sample(std::vector<float>{-5.0f, -1.0f, -2.0f, -1.5f}), 1);
    EXPECT_EQ(s.sample(std::vector<float>{7.0f}), 0);
}

TEST(SamplerTest, GreedyTiesGoToTheLowestIndex) {
    dwell::Sampler s(greedy());
    EXPECT_EQ(s.sample(std::vector<float>{1.0f, 3.0f, 0.0f, 3.0f}), 1);
    EXPECT_EQ(s.sample(std::vector<float>{2.0f, 2.0f, 2.0f}), 0);
}

TEST(SamplerTest, ZeroTemperatureIsGreedyWhateverTheSeed) {
    dwell::SamplerParams p = unfiltered(0.0f, 9);
    dwell::Sampler s(p);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(std::vector<float>{0.1f, 0.3f, 0.2f}), 1);
}

TEST(SamplerTest, SameSeedGivesTheSameSequence) {
    const std::vector<float> logits = {0.5f, 0.1f, -0.3f, 0.4f, 0.0f, 0.2f, -1.0f, 0.3f};
    dwell::Sampler a(unfiltered(1.0f, 42));
    dwell::Sampler b(unfiltered(1.0f, 42));
    dwell::Sampler c(unfiltered(1.0f, 43));
    const auto sa = draw(a, logits, 200);
    EXPECT_EQ(sa, draw(b, logits, 200));
    EXPECT_NE(sa, draw(c, logits, 200));
}

TEST(SamplerTest, TopKOneIsGreedy) {
    dwell::SamplerParams p = unfiltered(1.5f, 7);
    p.top_k = 1;
    dwell::Sampler s(p);
    const std::vector<float> logits = {0.2f, 0.9f, 0.5f, 0.9f, 0.85f};
    for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(logits), 1);
}

TEST(SamplerTest, TopKKeepsOnlyTheKBest) {
    dwell::SamplerParams p = unfiltered(1.0f, 11);
    p.top_k = 2;
    dwell::Sampler s(p);
    const std::vector<float> logits = {0.0f, 0.3f, 0.1f, 0.2f};
    std::vector<int> counts(4, 0);
    for (int i = 0; i < 2000; ++i) ++counts[s.sample(logits)];
    EXPECT_EQ(counts[0], 0);
    EXPECT_EQ(counts[2], 0);
    EXPECT_GT(counts[1], 0);
    EXPECT_GT(counts[3], 0);
}

TEST(SamplerTest, TinyTopPKeepsOnlyTheTopToken) {
    dwell::SamplerParams p = unfiltered(1.0f, 5);
    p.top_p = 1e-6f;
    dwell::Sampler s(p);
    const std::vector<float> logits = {0.1f, 0.2f, 0.15f, 0.0f};
    for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(logits), 1);
}

TEST(SamplerTest, MinPDropsUnlikelyTokens) {
    // Probabilities 0.5, 0.3, 0.2: with min_p 0.5 the cut is 0.25, so only
    // token 2 goes.
    dwell::SamplerParams p = unfiltered(1.0f, 3);
    p.min_p = 0.5f;
    dwell::Sampler s(p);
    const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    std::vector<int> counts(3, 0);
    for (int i = 0; i < 4000; ++i) ++counts[s.sample(logits)];
    EXPECT_EQ(counts[2], 0);
    // What is left is renormalised: 0.5 / 0.8 and 0.3 / 0.8.
    EXPECT_NEAR(counts[0] / 4000.0, 0.625, 0.03);
    EXPECT_NEAR(counts[1] / 4000.0, 0.375, 0.03);
}

TEST(SamplerTest, RepeatPenaltyChangesTheArgmax) {
    dwell::SamplerParams p = greedy();
    p.repeat_penalty = 1.1f;
    const std::vector<float> logits = {2.0f, 1.9f};

    dwell::Sampler fresh(p);
    EXPECT_EQ(fresh.sample(logits), 0);

    // 2.0 / 1.1 = 1.818 < 1.9.
    dwell::Sampler s(p);
    s.accept(0);
    EXPECT_EQ(s.sample(logits), 1);

    // Negative logits are multiplied: -1.0 * 1.1 = -1.1 < -1.05.
    dwell::Sampler neg(p);
    neg.accept(0);
    EXPECT_EQ(neg.sample(std::vector<float>{-1.0f, -1.05f}), 1);
}

TEST(SamplerTest, RepeatPenaltyAppliesOncePerDistinctToken) {
    // Applied twice, 2.0 / 1.1 / 1.1 = 1.65 would lose to 1.7.
    dwell::SamplerParams p = greedy();
    p.repeat_penalty = 1.1f;
    dwell::Sampler s(p);
    s.accept(0);
    s.accept(0);
    EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.7f}), 0);
}

TEST(SamplerTest, RepeatPenaltyOnlyCoversTheLastN) {
    dwell::SamplerParams p = greedy();
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = 1;
    dwell::Sampler s(p);
    s.accept(0);
    s.accept(5);  // pushes token 0 out of the window
    EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.9f}), 0);

    p.repeat_last_n = 0;
    dwell::Sampler off(p);
    off.accept(0);
    EXPECT_EQ(off.sample(std::vector<float>{2.0f, 1.9f}), 0);
}

TEST(SamplerTest, FrequenciesMatchSoftmax) {
    expect_matches_softmax({1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 2.0f}, 1.0f, 1234);
}

TEST(SamplerTest, FrequenciesMatchSoftmaxWithTemperature) {
    expect_matches_softmax({1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 2.0f}, 2.0f, 99);
}

TEST(SamplerTest, InvalidParamsThrowNamingTheParameter) {
    dwell::SamplerParams p;
    p.temperature = -0.1f;
    expect_invalid(p, "temperature");
    p = {};
    p.temperature = std::nanf("");
    expect_invalid(p, "temperature");
    p = {};
    p.top_p = 0.0f;
    expect_invalid(p, "top_p");
    p = {};
    p.top_p = 1.5f;
    expect_invalid(p, "top_p");
    p = {};
    p.min_p = -0.1f;
    expect_invalid(p, "min_p");
    p = {};
    p.min_p = 1.0f;
    expect_invalid(p, "min_p");
    p = {};
    p.repeat_penalty = 0.0f;
    expect_invalid(p, "repeat_penalty");
    p = {};
    p.repeat_last_n = -1;
    expect_invalid(p, "repeat_last_n");
}

TEST(SamplerTest, EmptyLogitsThrow) {
    dwell::Sampler s(greedy());
    EXPECT_THROW(s.sample(std::span<const float>{}), dwell::Error);
}

TEST(SamplerTest, NanLogitsAreNeverPicked) {
    const float nan = std::nanf("");
    const std::vector<float> logits = {nan, 0.0f, nan, 1.0f, nan};
    dwell::Sampler g(greedy());
    EXPECT_EQ(g.sample(logits), 3);
    for (int top_k : {0, 2}) {
        dwell::SamplerParams p = unfiltered(1.0f, 17);
        p.top_k = top_k;
        dwell::Sampler s(p);
        for (int i = 0; i < 500; ++i) {
            const int32_t t = s.sample(logits);
            EXPECT_TRUE(t == 1 || t == 3) << t;
        }
    }
}

TEST(SamplerTest, AllForbiddenTokensFallBackToTheLowestIndex) {
    const float inf = std::numeric_limits<float>::infinity();
    dwell::Sampler s(unfiltered(1.0f, 1));
    EXPECT_EQ(s.sample(std::vector<float>{-inf, -inf, -inf}), 0);
}
