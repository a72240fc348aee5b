// A simulated phone to close the thermal loop on, for tests and for
// `dwell bench --thermal-sim`: a lumped RC model (first order per node) of a
// CPU big cluster and an accelerator, each coupled to a shared SoC/skin node
// that loses heat to ambient, heated by the work generation does under the
// governor's current ThermalActions, and the tokens that work yields.
//
//   C_dev dT_dev/dt  = P_dev - (T_dev - T_skin) / R_dev      (dev: cpu, accel)
//   C_skin dT_skin/dt = P_bg + sum (T_dev - T_skin) / R_dev - (T_skin - T_amb) / R_skin
//
// How the levers act on it (ThermalPlantParams documents each number):
//   pacing duty d      scales both power and tokens/s by d;
//   thread share s     CPU power x s, tokens/s x s^0.6 (decode is memory-bound);
//   frequency cap f    CPU power x f^2.5 (voltage falls with frequency),
//                      tokens/s x f^0.35;
//   offload            the accelerator idles; the CPU does its share of each
//                      token too: more CPU power, fewer tokens/s.
// The accelerator does a fixed share of every token, so its power follows
// the token rate the CPU sets.
//
// Deterministic: no threads, no clocks, no sleeping; the optional sensor
// noise comes from a seeded RNG.
//
// Thread-safety: none; a ThermalPlant has one owner, run_thermal_sim() is
// reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dwell/core/thermal/thermal_policy.hpp"

namespace dwell {

// Defaults: a mid-range phone running a ~1B-parameter model on the CPU big
// cluster, with an accelerator taking part of every token. Unthrottled it
// settles near 57 C on the CPU (above any sensible 48 C limit) with a skin
// time constant of ~4.7 minutes and a die time constant of ~25 seconds.
struct ThermalPlantParams {
    double ambient_c = 25.0;

    // CPU big cluster: dynamic power while generating at full tilt (all
    // threads, maximum frequency), and idle power.
    double cpu_power_w = 5.0;
    double cpu_idle_w = 0.25;
    double cpu_capacity_j_per_k = 12.0;   // die + local spreader
    double cpu_resistance_k_per_w = 2.0;  // to the SoC/skin node: tau = 24 s
    // Accelerator (NPU/GPU): its dynamic power at the full token rate.
    double accel_power_w = 1.2;
    double accel_idle_w = 0.05;
    double accel_capacity_j_per_k = 6.0;
    double accel_resistance_k_per_w = 3.0;  // tau = 18 s
    // The shared SoC/skin node: the phone's body, and what else heats it
    // (display, modem, memory).
    double skin_capacity_j_per_k = 80.0;
    double skin_resistance_k_per_w = 3.5;  // to ambient: tau = 280 s
    double background_w = 0.5;

    // Tokens per second while generating at full tilt.
    double full_tok_s = 12.0;
    // Exponents of the levers (see the header comment).
    double thread_speed_exp = 0.6;  // tok/s ~ share^0.6; power ~ share
    double freq_speed_exp = 0.35;
    double freq_power_exp = 2.5;
    double capped_freq = 0.8;  // the cap, as a share of the maximum frequency
    // Offloaded: the CPU runs the accelerator's share of each token too.
    double offload_speed = 0.6;       // tok/s x this
    double offload_cpu_power = 1.25;  // CPU dynamic power x this

    // Gaussian noise on the sensor reading (standard deviation, C) and its seed.
    double sensor_noise_c = 0.0;
    uint64_t seed = 1;
    // Integration step (explicit Euler; far below the shortest time constant).
    double step_s = 0.05;
};

// The three nodes' temperatures, advanced by explicit Euler steps.
class ThermalPlant {
public:
    explicit ThermalPlant(const ThermalPlantParams& params);

    // Starts from the idle steady state (the phone was on, not generating).
    void reset_to_idle();
    // Advances by dt_s seconds generating under `a`; returns the tokens made.
    double advance(const ThermalActions& a, double dt_s);

    double cpu_c() const { return cpu_c_; }
    double accel_c() const { return accel_c_; }
    double skin_c() const { return skin_c_; }
    // What the thermal zones show: the hotter of the two devices.
    double hottest_c() const;

    // Tokens per second and powers (W) while the actions `a` hold.
    double tok_s(const ThermalActions& a) const;
    double cpu_power_w(const ThermalActions& a) const;
    double accel_power_w(const ThermalActions& a) const;

private:
    ThermalPlantParams p_;
    double cpu_c_ = 0, accel_c_ = 0, skin_c_ = 0;
};

enum class ThermalSimPolicy { off, stop_and_go, dwell };
const char* thermal_sim_policy_name(ThermalSimPolicy p);

// One governor period, at its end.
struct ThermalSample {
    double t_s = 0;
    double temp_c = 0;    // the hottest device (true value, without noise)
    double sensed_c = 0;  // what the policy read at the start of the period
    double cpu_c = 0, accel_c = 0, skin_c = 0;
    double tok_s = 0;        // mean over the period
    ThermalActions actions;  // in force during the period
    double tokens_total = 0;
};

// Runs `policy` (with `config`: target, limit, gains, levers, period) on a
// fresh plant for `seconds` of continuous generation: one sample per period.
std::vector<ThermalSample> run_thermal_sim(const ThermalPlantParams& params,
                                           const ThermalConfig& config, ThermalSimPolicy policy,
                                           double seconds);

// Figures of a run, for the bench summary and the tests.
struct ThermalSimSummary {
    double max_temp_c = 0;
    double seconds_above_limit = 0;
    double tokens = 0;
    double mean_tok_s = 0;
    // Over the last `tail_s` seconds: mean |T - target|, max |T - target|,
    // peak-to-peak swing, and how many times generation stopped (duty 0).
    double tail_mean_abs_error_c = 0;
    double tail_max_abs_error_c = 0;
    double tail_swing_c = 0;
    int tail_stops = 0;
};
ThermalSimSummary summarize_thermal_sim(const std::vector<ThermalSample>& trace,
                                        const ThermalConfig& config, double tail_s);

// The configuration the simulator gives dwell's policy by default: the
// manifest defaults, plus a devfreq entry so the frequency-cap lever exists
// (nothing is written; the plant applies the cap).
ThermalConfig thermal_sim_config();

}  // namespace dwell
