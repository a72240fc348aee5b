#include "dwell/tools/thermal_plant.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace dwell {

ThermalPlant::ThermalPlant(const ThermalPlantParams& params) : p_(params) {
    reset_to_idle();
}

void ThermalPlant::reset_to_idle() {
    // Steady state with no generation: every idle watt crosses the skin's
    // resistance, each device's own idle power its resistance too.
    const double total = p_.cpu_idle_w + p_.accel_idle_w + p_.background_w;
    skin_c_ = p_.ambient_c + total * p_.skin_resistance_k_per_w;
    cpu_c_ = skin_c_ + p_.cpu_idle_w * p_.cpu_resistance_k_per_w;
    accel_c_ = skin_c_ + p_.accel_idle_w * p_.accel_resistance_k_per_w;
}

double ThermalPlant::hottest_c() const {
    return std::max(cpu_c_, accel_c_);
}

namespace {

double freq_share(const ThermalPlantParams& p, const ThermalActions& a) {
    return a.freq_capped ? p.capped_freq : 1.0;
}

}  // namespace

double ThermalPlant::tok_s(const ThermalActions& a) const {
    const double share = std::clamp(a.thread_share, 0.0, 1.0);
    const double speed = std::pow(share, p_.thread_speed_exp) *
                         std::pow(freq_share(p_, a), p_.freq_speed_exp) *
                         (a.offloaded ? p_.offload_speed : 1.0);
    return std::clamp(a.duty, 0.0, 1.0) * p_.full_tok_s * speed;
}

double ThermalPlant::cpu_power_w(const ThermalActions& a) const {
    const double share = std::clamp(a.thread_share, 0.0, 1.0);
    const double dynamic = p_.cpu_power_w * share * std::pow(freq_share(p_, a), p_.freq_power_exp) *
                           (a.offloaded ? p_.offload_cpu_power : 1.0);
    return p_.cpu_idle_w + std::clamp(a.duty, 0.0, 1.0) * dynamic;
}

double ThermalPlant::accel_power_w(const ThermalActions& a) const {
    // A fixed share of every token's work: its power follows the token rate.
    if (a.offloaded) return p_.accel_idle_w;
    return p_.accel_idle_w + p_.accel_power_w * tok_s(a) / p_.full_tok_s;
}

double ThermalPlant::advance(const ThermalActions& a, double dt_s) {
    const double p_cpu = cpu_power_w(a), p_acc = accel_power_w(a);
    double left = dt_s;
    while (left > 1e-12) {
        const double h = std::min(p_.step_s, left);
        const double q_cpu = (cpu_c_ - skin_c_) / p_.cpu_resistance_k_per_w;
        const double q_acc = (accel_c_ - skin_c_) / p_.accel_resistance_k_per_w;
        const double q_out = (skin_c_ - p_.ambient_c) / p_.skin_resistance_k_per_w;
        cpu_c_ += h * (p_cpu - q_cpu) / p_.cpu_capacity_j_per_k;
        accel_c_ += h * (p_acc - q_acc) / p_.accel_capacity_j_per_k;
        skin_c_ += h * (p_.background_w + q_cpu + q_acc - q_out) / p_.skin_capacity_j_per_k;
        left -= h;
    }
    return tok_s(a) * dt_s;
}

const char* thermal_sim_policy_name(ThermalSimPolicy p) {
    switch (p) {
        case ThermalSimPolicy::off:
            return "off";
        case ThermalSimPolicy::stop_and_go:
            return "stop-and-go";
        case ThermalSimPolicy::dwell:
            return "dwell";
    }
    return "?";
}

std::vector<ThermalSample> run_thermal_sim(const ThermalPlantParams& params,
                                           const ThermalConfig& config, ThermalSimPolicy policy,
                                           double seconds) {
    ThermalPlant plant(params);
    ThermalPolicy dwell_policy(config);
    StopAndGoPolicy stop_and_go(config);
    std::mt19937_64 rng(params.seed);
    std::normal_distribution<double> noise(0.0, 1.0);
    const double dt = config.period_ms / 1000.0;
    const auto periods = static_cast<int64_t>(std::ceil(seconds / dt - 1e-9));
    std::vector<ThermalSample> trace;
    trace.reserve(static_cast<size_t>(std::max<int64_t>(periods, 0)));
    double tokens = 0;
    for (int64_t i = 0; i < periods; ++i) {
        // As the governor does: read, decide, then the actions hold for a period.
        ThermalReading r;
        const double sensed =
            plant.hottest_c() +
            (params.sensor_noise_c > 0 ? params.sensor_noise_c * noise(rng) : 0.0);
        r.temp_c = sensed;
        ThermalActions a;
        switch (policy) {
            case ThermalSimPolicy::off:
                break;
            case ThermalSimPolicy::stop_and_go:
                a = stop_and_go.step(r, dt);
                break;
            case ThermalSimPolicy::dwell:
                a = dwell_policy.step(r, dt);
                break;
        }
        const double made = plant.advance(a, dt);
        tokens += made;
        ThermalSample s;
        s.t_s = static_cast<double>(i + 1) * dt;
        s.temp_c = plant.hottest_c();
        s.sensed_c = sensed;
        s.cpu_c = plant.cpu_c();
        s.accel_c = plant.accel_c();
        s.skin_c = plant.skin_c();
        s.tok_s = made / dt;
        s.actions = a;
        s.tokens_total = tokens;
        trace.push_back(s);
    }
    return trace;
}

ThermalSimSummary summarize_thermal_sim(const std::vector<ThermalSample>& trace,
                                        const ThermalConfig& config, double tail_s) {
    ThermalSimSummary s;
    if (trace.empty()) return s;
    const double dt = config.period_ms / 1000.0;
    const double end = trace.back().t_s;
    double tail_sum = 0, tail_min = 1e9, tail_max = -1e9;
    int tail_n = 0;
    bool was_stopped = false;
    for (const ThermalSample& x : trace) {
        s.max_temp_c = std::max(s.max_temp_c, x.temp_c);
        if (x.temp_c > config.limit_c) s.seconds_above_limit += dt;
        const bool stopped = x.actions.duty <= 0.0;
        if (x.t_s > end - tail_s) {
            const double err = std::fabs(x.temp_c - config.target_c);
            tail_sum += err;
            s.tail_max_abs_error_c = std::max(s.tail_max_abs_error_c, err);
            tail_min = std::min(tail_min, x.temp_c);
            tail_max = std::max(tail_max, x.temp_c);
            ++tail_n;
            if (stopped && !was_stopped) ++s.tail_stops;
        }
        was_stopped = stopped;
    }
    s.tokens = trace.back().tokens_total;
    s.mean_tok_s = s.tokens / end;
    s.tail_mean_abs_error_c = tail_n ? tail_sum / tail_n : 0.0;
    s.tail_swing_c = tail_n ? tail_max - tail_min : 0.0;
    return s;
}

ThermalConfig thermal_sim_config() {
    ThermalConfig c;
    c.devfreq.push_back({"/sys/class/devfreq/simulated-cpu", 0});
    return c;
}

}  // namespace dwell
