#include "dwell/core/thermal/thermal_policy.hpp"

#include <algorithm>

namespace dwell {

std::optional<std::filesystem::path> devfreq_path_inside_root(const std::string& path) {
    const std::filesystem::path p(path);
    if (path.empty() || !p.is_absolute()) return std::nullopt;
    for (const auto& part : p)
        if (part == "..") return std::nullopt;
    std::filesystem::path rel = p.relative_path().lexically_normal();
    if (rel.empty() || rel == ".") return std::nullopt;
    return rel;
}

ThermalPolicy::ThermalPolicy(const ThermalConfig& config) : config_(config), pid_(config.gains) {}

ThermalActions ThermalPolicy::map(double u) const {
    ThermalActions a;
    a.throttle = u;
    // Discrete levers: engage above their level, release below it minus
    // kRelease (hysteresis), from what they were.
    const auto lever = [&](bool was, double at) { return was ? u > at - kRelease : u > at; };
    const bool fewer_threads = lever(actions_.thread_share < 1.0, kThreadsAt);
    a.thread_share = fewer_threads ? config_.min_thread_share : 1.0;
    a.freq_capped = !config_.devfreq.empty() && lever(actions_.freq_capped, kCapAt);
    a.offloaded = config_.offload && lever(actions_.offloaded, kOffloadAt);
    // Pacing: continuous, the cheapest lever, and the one that fills in
    // between the others. The throttle asks for a share of the full heat,
    // 1 - u; the discrete levers engaged already take off about their
    // nominal share, so pacing supplies only the rest. Without that, each
    // lever engaging would drop the heat in a step the controller then
    // undoes by releasing it again: a limit cycle.
    double nominal = 1.0;
    if (a.thread_share < 1.0) nominal *= a.thread_share;
    if (a.freq_capped) nominal *= kCapHeat;
    a.duty = std::clamp((1.0 - u) / nominal, config_.min_duty, 1.0);
    return a;
}

ThermalActions ThermalPolicy::step(const ThermalReading& r, double dt_s) {
    if (!r.temp_c) {
        // Keep the last actions for a moment (a missed read), then a fixed,
        // moderate throttle until the sensors come back.
        if (++missing_ >= kFallbackAfter) {
            actions_ = map(kFallbackThrottle);
            actions_.fallback = true;
        }
        return actions_;
    }
    missing_ = 0;
    const double t = *r.temp_c;
    double u = 0;
    if (t >= config_.limit_c) {
        pid_.saturate();
        u = 1.0;
    } else {
        u = pid_.update(t - config_.target_c, dt_s);
    }
    actions_ = map(u);
    return actions_;
}

ThermalActions StopAndGoPolicy::step(const ThermalReading& r, double) {
    if (r.temp_c) {
        if (*r.temp_c >= limit_c_) stopped_ = true;
        if (*r.temp_c <= limit_c_ - 5.0) stopped_ = false;
    }
    ThermalActions a;
    a.throttle = stopped_ ? 1.0 : 0.0;
    a.duty = stopped_ ? 0.0 : 1.0;
    return a;
}

}  // namespace dwell
