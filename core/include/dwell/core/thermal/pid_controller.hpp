// A PID controller whose output is clamped to [0, 1], with anti-windup: the
// integral stops growing while the output is saturated in the direction of
// the error, and is kept within what the output range can use.
//
// Thread-safety: none (one owner).
#pragma once

namespace dwell {

struct PidGains {
    double kp = 0.15;  // output per unit of error
    double ki = 0.01;  // output per unit of error x second
    double kd = 0.0;   // output per unit of error per second
};

class PidController {
public:
    explicit PidController(PidGains gains) : g_(gains) {}

    // error > 0 pushes the output up. dt in seconds (> 0).
    double update(double error, double dt);
    // Sets the integral so the output is at its maximum (a hard limit was hit).
    void saturate();
    void reset();

    double output() const { return output_; }
    double integral() const { return integral_; }

private:
    PidGains g_;
    double integral_ = 0;
    double output_ = 0;
    double last_error_ = 0;
    bool has_last_ = false;
};

}  // namespace dwell
