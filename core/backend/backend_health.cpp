#include "dwell/core/backend/backend_health.hpp"

namespace dwell {

void BackendHealth::step_succeeded() {
    std::lock_guard lock(mutex_);
    ++report_.steps_run;
    consecutive_errors_ = 0;
}

bool BackendHealth::step_failed(BackendFault fault, const std::string& what) {
    std::lock_guard lock(mutex_);
    ++report_.failed_steps;
    report_.last_failure = what;
    std::string reason;
    switch (fault) {
        case BackendFault::ErrorStatus:
            ++report_.error_statuses;
            if (++consecutive_errors_ >= kMaxConsecutiveFailures)
                reason = "unhealthy after " + std::to_string(kMaxConsecutiveFailures) +
                         " failed steps in a row";
            break;
        case BackendFault::Timeout:
            ++report_.timeouts;
            reason = "unhealthy after a step ran past its deadline";
            break;
        case BackendFault::WrongSize:
            ++report_.wrong_sizes;
            reason = "unhealthy after a wrong-size result";
            break;
    }
    if (!report_.healthy || reason.empty()) return false;
    report_.healthy = false;
    report_.unhealthy_reason = reason;
    return true;
}

bool BackendHealth::healthy() const {
    std::lock_guard lock(mutex_);
    return report_.healthy;
}

std::string BackendHealth::unhealthy_reason() const {
    std::lock_guard lock(mutex_);
    return report_.unhealthy_reason;
}

std::string describe(const BackendHealthReport& r) {
    std::string out = r.healthy ? "healthy" : r.unhealthy_reason;
    out += r.healthy ? ", " : " (";
    out += std::to_string(r.steps_run) + " steps";
    if (r.failed_steps > 0) {
        std::string kinds;
        const auto add = [&](uint64_t n, const char* one, const char* many) {
            if (n == 0) return;
            kinds.append(kinds.empty() ? "" : ", ").append(std::to_string(n));
            kinds.append(" ").append(n == 1 ? one : many);
        };
        add(r.error_statuses, "error status", "error statuses");
        add(r.timeouts, "timeout", "timeouts");
        add(r.wrong_sizes, "wrong-size result", "wrong-size results");
        out += ", " + std::to_string(r.failed_steps) + " failed: " + kinds;
    }
    if (!r.healthy) out += ")";
    return out;
}

BackendHealthReport BackendHealth::report() const {
    std::lock_guard lock(mutex_);
    return report_;
}

}  // namespace dwell
