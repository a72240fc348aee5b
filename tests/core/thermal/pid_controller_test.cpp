#include "dwell/core/thermal/pid_controller.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace dwell {
namespace {

// The reference without anti-windup: the integral grows with every error,
// saturated or not; only the output is clamped.
class NaivePid {
public:
    explicit NaivePid(PidGains g) : g_(g) {}
    double update(double e, double dt) {
        integral_ += e * dt;
        return std::clamp(g_.kp * e + g_.ki * integral_, 0.0, 1.0);
    }

private:
    PidGains g_;
    double integral_ = 0;
};

TEST(PidController, ProportionalStepResponse) {
    PidController pid({0.2, 0.0, 0.0});
    EXPECT_DOUBLE_EQ(pid.update(2.0, 1.0), 0.4);
    EXPECT_DOUBLE_EQ(pid.update(2.0, 1.0), 0.4);   // no integral: the same output
    EXPECT_DOUBLE_EQ(pid.update(-1.0, 1.0), 0.0);  // clamped at 0
    EXPECT_DOUBLE_EQ(pid.update(10.0, 1.0), 1.0);  // clamped at 1
}

TEST(PidController, IntegralAccumulatesAndOutputClamps) {
    PidController pid({0.1, 0.05, 0.0});
    double last = 0;
    for (int i = 0; i < 5; ++i) {
        const double u = pid.update(1.0, 1.0);
        EXPECT_GT(u, last);  // a constant error: the output keeps rising
        last = u;
    }
    EXPECT_NEAR(pid.integral(), 5.0, 1e-12);
    EXPECT_NEAR(last, 0.1 + 0.05 * 5.0, 1e-12);
    for (int i = 0; i < 100; ++i) EXPECT_LE(pid.update(1.0, 1.0), 1.0);
    EXPECT_DOUBLE_EQ(pid.output(), 1.0);
}

TEST(PidController, AntiWindupRecoversFasterThanANaiveIntegral) {
    const PidGains g{0.15, 0.01, 0.0};
    PidController pid(g);
    NaivePid naive(g);
    // Ten minutes pinned at full throttle by a large error.
    for (int i = 0; i < 600; ++i) {
        pid.update(5.0, 1.0);
        naive.update(5.0, 1.0);
    }
    EXPECT_DOUBLE_EQ(pid.output(), 1.0);
    EXPECT_LE(pid.integral(), 1.0 / g.ki + 1e-9);  // bounded by the output range
    // The error flips: how long until each lets go of full throttle?
    const auto periods_until_below = [](auto& c, double level) {
        for (int i = 1; i <= 100000; ++i) {
            if (c.update(-1.0, 1.0) < level) return i;
        }
        return 100000;
    };
    const int ours = periods_until_below(pid, 0.5);
    const int theirs = periods_until_below(naive, 0.5);
    EXPECT_LE(ours, 60);  // bounded: at most 1/ki of unwinding at error -1
    EXPECT_GT(theirs, 5 * ours);
}

TEST(PidController, DerivativeActsOnTheChangeOfError) {
    PidController pid({0.0, 0.0, 0.5});
    EXPECT_DOUBLE_EQ(pid.update(1.0, 1.0), 0.0);   // no previous error: no derivative
    EXPECT_DOUBLE_EQ(pid.update(1.5, 1.0), 0.25);  // rising 0.5/s x kd 0.5
    EXPECT_DOUBLE_EQ(pid.update(1.5, 1.0), 0.0);   // steady: nothing
    pid.reset();
    EXPECT_DOUBLE_EQ(pid.update(3.0, 1.0), 0.0);  // reset forgets the last error
}

TEST(PidController, SaturateJumpsToFullAndUnwindsFromThere) {
    PidController pid({0.15, 0.01, 0.0});
    pid.saturate();
    EXPECT_DOUBLE_EQ(pid.output(), 1.0);
    EXPECT_DOUBLE_EQ(pid.update(0.0, 1.0), 1.0);
    EXPECT_LT(pid.update(-2.0, 1.0), 1.0);
}

}  // namespace
}  // namespace dwell
