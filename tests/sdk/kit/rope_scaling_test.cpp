// YaRN's per-pair frequency factors and magnitude scaling against a case
// worked by hand: n_rot 16 (8 pairs), base 10000, original context 2048,
// betas 32 and 1. The correction dims are d(b) = 16 ln(2048 / (2 pi b)) /
// (2 ln 10000): d(32) = 2.016, floored to 2, d(1) = 5.026, ceiled to 6, so
// the ramp is 1 for pairs 0..2, 0.75, 0.5, 0.25 for 3..5 and 0 from 6 on;
// with factor 4 (s = 1/4) each factor is 1 / (s (1 - r) + r).
#include "model/rope_scaling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace dwell::model_kit {
namespace {

YarnParams hand_case() {
    YarnParams p;
    p.factor = 4.0f;
    p.n_ctx_orig = 2048;
    return p;
}

TEST(RopeScaling, YarnFactorsMatchTheHandComputedRamp) {
    const std::vector<float> f = yarn_frequency_factors(hand_case(), 16, 10000.0f);
    const std::vector<float> want = {1.0f,          1.0f,           1.0f, 1.0f / 0.8125f,
                                     1.0f / 0.625f, 1.0f / 0.4375f, 4.0f, 4.0f};
    ASSERT_EQ(f.size(), want.size());
    for (size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(f[i], want[i], 1e-6f) << "pair " << i;
}

TEST(RopeScaling, ExtFactorScalesTheRampAndZeroLeavesPlainInterpolation) {
    YarnParams p = hand_case();
    p.ext_factor = 0.5f;
    const std::vector<float> f = yarn_frequency_factors(p, 16, 10000.0f);
    // r = 0.5 ramp: pair 0 gets 1 / (0.25 * 0.5 + 0.5), pair 4 r = 0.25.
    EXPECT_NEAR(f[0], 1.0f / 0.625f, 1e-6f);
    EXPECT_NEAR(f[4], 1.0f / 0.4375f, 1e-6f);
    EXPECT_NEAR(f[7], 4.0f, 1e-6f);
}

TEST(RopeScaling, YarnAttentionFactorIsTheMagnitudeScaling) {
    YarnParams p = hand_case();
    EXPECT_NEAR(yarn_attn_factor(p), 1.0f + 0.1f * std::log(4.0f), 1e-6f);  // 1.1386
    p.log_multiplier = 0.1f;  // mscale_all_dim 1: the two cancel
    EXPECT_NEAR(yarn_attn_factor(p), 1.0f, 1e-6f);
    p.log_multiplier = 0.0f;
    p.factor = 1.0f;
    EXPECT_EQ(yarn_attn_factor(p), 1.0f);
    p.ext_factor = 0.0f;
    p.attn_factor = 0.8f;
    EXPECT_EQ(yarn_attn_factor(p), 0.8f);
}

}  // namespace
}  // namespace dwell::model_kit
