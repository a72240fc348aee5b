// What the thermal governor decides each period, from a temperature reading:
// a throttle level in [0, 1] from a PID controller on (temperature - target),
// and the actions it maps to, cheapest first — pacing between tokens, fewer
// CPU threads, frequency caps, moving work off the accelerators — each
// engaging above a throttle level and releasing only below a lower one
// (hysteresis). At or above the hard limit the throttle goes to 1 at once.
// Without a usable reading for a few periods it falls back to a fixed,
// moderate throttle and says so.
//
// Thread-safety: none (the governor's thread owns it). Pure: no I/O.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/thermal/pid_controller.hpp"

namespace dwell {

// [thermal] of the manifest (manifests/README.md documents each key).
struct ThermalConfig {
    bool enabled = true;
    std::vector<std::string> zones;  // thermal-zone types; the hottest counts
    bool battery_power = false;      // also read /sys/class/power_supply/*
    int32_t period_ms = 1000;
    double target_c = 42.0;
    double limit_c = 48.0;
    PidGains gains;
    double min_duty = 0.25;          // pacing never slows generation below this share
    double min_thread_share = 0.75;  // fewer threads: at least this share of them
    struct Devfreq {
        std::string path;     // a devfreq device folder (its max_freq is written)
        int64_t cap_khz = 0;  // the frequency cap while capped (0: its min_freq)
    };
    std::vector<Devfreq> devfreq;
    bool offload = true;  // may move work off the hottest accelerator to the CPU
};

// A devfreq folder ("/sys/class/devfreq/gpu") as a path relative to the
// device root ("sys/class/devfreq/gpu"), or nullopt when it is empty, not
// absolute or has a ".." component: the governor writes max_freq there, and
// that write must stay inside the root (--sysroot, or "/" itself).
std::optional<std::filesystem::path> devfreq_path_inside_root(const std::string& path);

struct ThermalReading {
    std::optional<double> temp_c;  // hottest named zone
    std::string hottest_zone;
    std::optional<double> power_w;  // battery discharge power, if read
    std::string problem;            // why a sensor gave nothing usable, or ""
};

// What generation should do now. Defaults: full speed, nothing changed.
struct ThermalActions {
    double throttle = 0;        // the controller's output in [0, 1]
    double duty = 1.0;          // share of time spent generating (pacing)
    double thread_share = 1.0;  // share of the configured CPU threads
    bool freq_capped = false;
    bool offloaded = false;
    bool fallback = false;  // no usable sensor: a fixed throttle
    bool operator==(const ThermalActions&) const = default;
};

class DWELL_CORE_API ThermalPolicy {
public:
    explicit ThermalPolicy(const ThermalConfig& config);
    // One period: dt_s seconds since the last step.
    ThermalActions step(const ThermalReading& reading, double dt_s);
    const ThermalActions& actions() const { return actions_; }

    // Throttle levels at which each action engages (it releases `kRelease`
    // lower). Pacing is continuous over the whole range: the throttle u asks
    // for 1 - u of the full heat, and the duty is what the engaged levers'
    // nominal heat leaves to it (at least min_duty).
    static constexpr double kThreadsAt = 0.25;
    static constexpr double kCapAt = 0.45;
    static constexpr double kOffloadAt = 0.9;
    static constexpr double kRelease = 0.1;
    // The CPU's heat under a frequency cap, as a share of uncapped, assumed
    // when pacing fills in around it (a mid operating point: ~0.8 of the
    // maximum frequency at a lower voltage).
    static constexpr double kCapHeat = 0.6;
    // Periods without a reading before the fallback, and its throttle.
    static constexpr int kFallbackAfter = 3;
    static constexpr double kFallbackThrottle = 0.5;

private:
    ThermalActions map(double throttle) const;

    ThermalConfig config_;
    PidController pid_;
    ThermalActions actions_;
    int missing_ = 0;
};

// The policy dwell is compared with: stop generating at the hard limit,
// resume 5 degrees below it.
class DWELL_CORE_API StopAndGoPolicy {
public:
    explicit StopAndGoPolicy(const ThermalConfig& config) : limit_c_(config.limit_c) {}
    ThermalActions step(const ThermalReading& reading, double dt_s);

private:
    double limit_c_;
    bool stopped_ = false;
};

}  // namespace dwell
