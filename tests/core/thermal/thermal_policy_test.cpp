#include "dwell/core/thermal/thermal_policy.hpp"

#include <gtest/gtest.h>

namespace dwell {
namespace {

ThermalReading at(double c) {
    ThermalReading r;
    r.temp_c = c;
    return r;
}

ThermalReading none() {
    ThermalReading r;
    r.problem = "no thermal zone of type cpu";
    return r;
}

// Pure proportional control, so a temperature is a throttle level:
// u = 0.1 x (T - 40), i.e. T = 40 + 10 u; the limit is out of the way.
ThermalConfig proportional() {
    ThermalConfig c;
    c.target_c = 40;
    c.limit_c = 70;
    c.gains = {0.1, 0.0, 0.0};
    c.devfreq.push_back({"/sys/class/devfreq/x", 0});
    return c;
}

double temp_for(double u) {
    return 40 + 10 * u;
}

TEST(ThermalPolicy, CoolRunsAtFullSpeed) {
    ThermalPolicy p(ThermalConfig{});
    EXPECT_EQ(p.step(at(30), 1), ThermalActions{});
}

TEST(ThermalPolicy, HardLimitThrottlesFullyAtOnce) {
    ThermalConfig c;
    c.devfreq.push_back({"/sys/class/devfreq/x", 0});
    ThermalPolicy p(c);
    p.step(at(c.target_c - 1), 1);
    const ThermalActions a = p.step(at(c.limit_c), 1);
    EXPECT_DOUBLE_EQ(a.throttle, 1.0);
    EXPECT_DOUBLE_EQ(a.duty, c.min_duty);
    EXPECT_DOUBLE_EQ(a.thread_share, c.min_thread_share);
    EXPECT_TRUE(a.freq_capped);
    EXPECT_TRUE(a.offloaded);
    // Just below the limit the integral is full: it stays throttled hard.
    EXPECT_GT(p.step(at(c.limit_c - 0.5), 1).throttle, 0.9);
}

TEST(ThermalPolicy, PacingIsContinuousAndFirst) {
    ThermalPolicy p(proportional());
    const ThermalActions a = p.step(at(temp_for(0.2)), 1);
    EXPECT_NEAR(a.duty, 0.8, 1e-9);  // 1 - u of the heat, by pacing alone
    EXPECT_DOUBLE_EQ(a.thread_share, 1.0);
    EXPECT_FALSE(a.freq_capped);
    EXPECT_FALSE(a.offloaded);
}

// Each lever: engages above its level, holds down to level - kRelease,
// releases below that (hysteresis).
struct LeverCase {
    const char* name;
    double at;
    bool (*engaged)(const ThermalActions&);
};

TEST(ThermalPolicy, EachLeverHasHysteresis) {
    const LeverCase levers[] = {
        {"threads", ThermalPolicy::kThreadsAt,
         [](const ThermalActions& a) { return a.thread_share < 1.0; }},
        {"cap", ThermalPolicy::kCapAt, [](const ThermalActions& a) { return a.freq_capped; }},
        {"offload", ThermalPolicy::kOffloadAt, [](const ThermalActions& a) { return a.offloaded; }},
    };
    const double r = ThermalPolicy::kRelease;
    for (const LeverCase& l : levers) {
        SCOPED_TRACE(l.name);
        ThermalPolicy p(proportional());
        EXPECT_FALSE(l.engaged(p.step(at(temp_for(l.at - 0.02)), 1)));
        EXPECT_TRUE(l.engaged(p.step(at(temp_for(l.at + 0.02)), 1)));
        EXPECT_TRUE(l.engaged(p.step(at(temp_for(l.at - 0.02)), 1)));  // held
        EXPECT_TRUE(l.engaged(p.step(at(temp_for(l.at - r + 0.02)), 1)));
        EXPECT_FALSE(l.engaged(p.step(at(temp_for(l.at - r - 0.02)), 1)));  // released
        EXPECT_FALSE(l.engaged(p.step(at(temp_for(l.at - 0.02)), 1)));      // not again until above
    }
}

TEST(ThermalPolicy, EveryActionIsAppliedAsItHeatsAndRestoredAsItCools) {
    const ThermalConfig c = proportional();
    ThermalPolicy p(c);
    for (double t = 40; t <= 50.01; t += 0.25) p.step(at(t), 1);
    ThermalActions a = p.actions();
    EXPECT_DOUBLE_EQ(a.thread_share, c.min_thread_share);
    EXPECT_TRUE(a.freq_capped);
    EXPECT_TRUE(a.offloaded);
    EXPECT_DOUBLE_EQ(a.duty, c.min_duty);
    for (double t = 50; t >= 38; t -= 0.25) p.step(at(t), 1);
    EXPECT_EQ(p.actions(), ThermalActions{});
}

TEST(ThermalPolicy, PacingFillsInAroundEngagedLevers) {
    // With fewer threads engaged, pacing supplies only what is left:
    // duty = (1 - u) / min_thread_share, so the heat does not step down.
    const ThermalConfig c = proportional();
    ThermalPolicy p(c);
    const double u = ThermalPolicy::kThreadsAt + 0.02;
    const ThermalActions a = p.step(at(temp_for(u)), 1);
    ASSERT_LT(a.thread_share, 1.0);
    EXPECT_NEAR(a.duty, std::min(1.0, (1 - u) / c.min_thread_share), 1e-9);
}

TEST(ThermalPolicy, MissingReadingsKeepTheLastActionsThenFallBack) {
    ThermalPolicy p(proportional());
    const ThermalActions before = p.step(at(temp_for(0.3)), 1);
    for (int i = 1; i < ThermalPolicy::kFallbackAfter; ++i) {
        EXPECT_EQ(p.step(none(), 1), before) << "missed read " << i;
    }
    const ThermalActions fb = p.step(none(), 1);
    EXPECT_TRUE(fb.fallback);
    EXPECT_DOUBLE_EQ(fb.throttle, ThermalPolicy::kFallbackThrottle);
    // A moderate throttle: levers below it engaged (here fewer threads and
    // the cap, with pacing filling in; so the duty may stay at 1).
    EXPECT_LT(fb.thread_share, 1.0);
    EXPECT_TRUE(fb.freq_capped);
    EXPECT_TRUE(p.step(none(), 1).fallback);  // for as long as nothing reads
    // The sensor returns: control resumes from the reading.
    const ThermalActions back = p.step(at(30), 1);
    EXPECT_FALSE(back.fallback);
    EXPECT_DOUBLE_EQ(back.throttle, 0.0);
    EXPECT_DOUBLE_EQ(back.duty, 1.0);
}

TEST(ThermalPolicy, LeversThatAreNotConfiguredNeverEngage) {
    ThermalConfig c;  // no devfreq
    c.offload = false;
    ThermalPolicy p(c);
    const ThermalActions a = p.step(at(c.limit_c + 5), 1);
    EXPECT_FALSE(a.freq_capped);
    EXPECT_FALSE(a.offloaded);
    EXPECT_DOUBLE_EQ(a.throttle, 1.0);
}

TEST(StopAndGoPolicy, StopsAtTheLimitAndResumesFiveBelow) {
    ThermalConfig c;
    StopAndGoPolicy p(c);
    EXPECT_DOUBLE_EQ(p.step(at(c.limit_c - 0.1), 1).duty, 1.0);
    EXPECT_DOUBLE_EQ(p.step(at(c.limit_c), 1).duty, 0.0);
    EXPECT_DOUBLE_EQ(p.step(at(c.limit_c - 4.9), 1).duty, 0.0);  // still cooling
    EXPECT_DOUBLE_EQ(p.step(none(), 1).duty, 0.0);               // no reading: unchanged
    EXPECT_DOUBLE_EQ(p.step(at(c.limit_c - 5), 1).duty, 1.0);
    EXPECT_DOUBLE_EQ(p.step(at(c.limit_c - 1), 1).duty, 1.0);
}

}  // namespace
}  // namespace dwell
