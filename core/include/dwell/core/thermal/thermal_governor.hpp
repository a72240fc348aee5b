// The closed loop: every period_ms the governor reads the sensors, steps the
// policy and, when the actions change, hands them to an actuator (the
// runtime: pacing, CPU threads, devfreq caps, moving work off the
// accelerators). It runs on its own thread from construction to
// destruction. Sensor problems are logged once each (and again when they
// clear); they never stop the loop.
//
// Thread-safety: state() may be called from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "dwell/core/thermal/thermal_policy.hpp"

namespace dwell {

class ThermalActuator {
public:
    virtual ~ThermalActuator() = default;
    virtual void apply(const ThermalActions& actions) = 0;
};

struct ThermalState {
    ThermalReading reading;
    ThermalActions actions;
    int64_t periods = 0;  // readings taken
};

class ThermalGovernor {
public:
    ThermalGovernor(const ThermalConfig& config, std::function<ThermalReading()> read,
                    ThermalActuator& actuator);
    ~ThermalGovernor();
    ThermalGovernor(const ThermalGovernor&) = delete;
    ThermalGovernor& operator=(const ThermalGovernor&) = delete;

    ThermalState state() const;

private:
    void loop();

    ThermalConfig config_;
    std::function<ThermalReading()> read_;
    ThermalActuator& actuator_;
    ThermalPolicy policy_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    ThermalState state_;
    std::thread thread_;  // last: starts after everything it uses
};

}  // namespace dwell
