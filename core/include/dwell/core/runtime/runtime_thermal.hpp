// The runtime's side of the thermal loop: applies the governor's actions —
// pacing (a duty cycle Session::decode honours between steps), the CPU
// backends' thread share (ABI 1.3 reconfigure), devfreq frequency caps
// (max_freq written, the original restored), and pausing accelerator
// backends so their work moves to the CPU — and undoes each as the device
// cools.
//
// Thread-safety: apply() runs on the governor's thread; duty() and
// pace() on any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dwell/core/thermal/thermal_governor.hpp"

namespace dwell {

class Backend;

class RuntimeThermal : public ThermalActuator {
public:
    // `backends` outlive this object. `root` relocates devfreq paths (tests).
    RuntimeThermal(const ThermalConfig& config,
                   const std::vector<std::unique_ptr<Backend>>& backends,
                   std::filesystem::path root);
    ~RuntimeThermal() override;

    void apply(const ThermalActions& actions) override;

    double duty() const { return duty_.load(std::memory_order_relaxed); }
    // After a step that took `step_seconds`, waits so that generation runs
    // `duty` of the time.
    void pace(double step_seconds) const;

private:
    void set_thread_share(double share);
    void set_freq_cap(bool capped);
    void set_offload(bool offloaded);

    ThermalConfig config_;
    const std::vector<std::unique_ptr<Backend>>& backends_;
    std::filesystem::path root_;
    std::atomic<double> duty_{1.0};
    double thread_share_ = 1.0;
    bool capped_ = false;
    bool offloaded_ = false;
    struct Capped {
        int64_t original;  // max_freq before the cap
        int64_t written;   // the cap written
    };
    std::map<std::string, Capped> capped_files_;  // max_freq path -> values
    std::set<const Backend*> cannot_reconfigure_;
};

}  // namespace dwell
