#include "dwell/core/thermal/thermal_governor.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

namespace dwell {

ThermalGovernor::ThermalGovernor(const ThermalConfig& config, std::function<ThermalReading()> read,
                                 ThermalActuator& actuator)
    : config_(config),
      read_(std::move(read)),
      actuator_(actuator),
      policy_(config),
      thread_([this] { loop(); }) {}

ThermalGovernor::~ThermalGovernor() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    // Leave the device as it was found.
    actuator_.apply(ThermalActions{});
}

ThermalState ThermalGovernor::state() const {
    std::lock_guard lock(mutex_);
    return state_;
}

void ThermalGovernor::loop() {
    using Clock = std::chrono::steady_clock;
    const auto period = std::chrono::milliseconds(config_.period_ms);
    auto last = Clock::now();
    std::string reported_problem;
    ThermalActions applied;
    for (;;) {
        const ThermalReading r = read_();
        const auto now = Clock::now();
        const double dt = std::chrono::duration<double>(now - last).count();
        last = now;
        const ThermalActions a = policy_.step(r, dt > 0 ? dt : config_.period_ms / 1000.0);
        if (r.problem != reported_problem) {
            if (!r.problem.empty()) {
                spdlog::warn("thermal: {}{}", r.problem,
                             r.temp_c ? "" : " — throttling to a safe fixed level until it reads");
            } else {
                spdlog::info("thermal: sensors read again");
            }
            reported_problem = r.problem;
        }
        const bool levers_moved =
            a.thread_share != applied.thread_share || a.freq_capped != applied.freq_capped ||
            a.offloaded != applied.offloaded || a.fallback != applied.fallback ||
            std::abs(a.duty - applied.duty) >= 0.1;
        actuator_.apply(a);  // every period: pacing follows the throttle closely
        if (levers_moved) {
            spdlog::info(
                "thermal: {} C -> throttle {:.2f}: duty {:.2f}, threads x{:.2f}{}{}{}",
                r.temp_c ? std::to_string(static_cast<int>(*r.temp_c * 10) / 10.0).substr(0, 4)
                         : "?",
                a.throttle, a.duty, a.thread_share, a.freq_capped ? ", frequency capped" : "",
                a.offloaded ? ", accelerators paused" : "", a.fallback ? " (fallback)" : "");
            applied = a;
        }
        std::unique_lock lock(mutex_);
        state_.reading = r;
        state_.actions = a;
        ++state_.periods;
        if (wake_.wait_for(lock, period, [&] { return stopping_; })) return;
    }
}

}  // namespace dwell
