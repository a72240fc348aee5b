#include "dwell/core/thermal/pid_controller.hpp"

#include <algorithm>

namespace dwell {

double PidController::update(double error, double dt) {
    const double derivative = has_last_ && dt > 0 ? (error - last_error_) / dt : 0.0;
    last_error_ = error;
    has_last_ = true;
    const double p = g_.kp * error;
    const double d = g_.kd * derivative;
    const double unclamped = p + g_.ki * integral_ + d;
    // Conditional integration: no growth into a saturated output.
    const bool pushing_high = unclamped >= 1.0 && error > 0;
    const bool pushing_low = unclamped <= 0.0 && error < 0;
    if (!pushing_high && !pushing_low) integral_ += error * dt;
    // The integral alone never needs to exceed the whole output range.
    const double max_integral = g_.ki > 0 ? 1.0 / g_.ki : 0.0;
    integral_ = std::clamp(integral_, 0.0, max_integral);
    output_ = std::clamp(p + g_.ki * integral_ + d, 0.0, 1.0);
    return output_;
}

void PidController::saturate() {
    integral_ = g_.ki > 0 ? 1.0 / g_.ki : 0.0;
    output_ = 1.0;
}

void PidController::reset() {
    integral_ = 0;
    output_ = 0;
    has_last_ = false;
}

}  // namespace dwell
