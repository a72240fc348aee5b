// How a backend has fared, step by step, and whether it still gets work.
//
// An error status is often transient (a busy accelerator, a driver retry):
// a backend becomes unhealthy only after kMaxConsecutiveFailures failed
// steps in a row. A hang past its step deadline or a wrong-size result is
// not: the backend can no longer be trusted with buffers, so it is
// unhealthy at once. Unhealthy is for the runtime's life; the scheduler
// places no more nodes on it.
//
// Thread-safety: every member may be called from any thread (sessions on
// several threads share a backend).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "dwell/core/base/export.hpp"

namespace dwell {

enum class BackendFault {
    ErrorStatus,  // graph_compute returned an error
    Timeout,      // a step ran past [[backend]] step_timeout_ms
    WrongSize,    // a result of another shape, or bytes written past an output
};

struct BackendHealthReport {
    bool healthy = true;
    uint64_t steps_run = 0;     // calls that succeeded
    uint64_t failed_steps = 0;  // every fault below, counted once each
    uint64_t error_statuses = 0;
    uint64_t timeouts = 0;
    uint64_t wrong_sizes = 0;
    std::string unhealthy_reason;  // empty while healthy
    std::string last_failure;      // one line, empty if none
};

// One line for people: "healthy, 120 steps" or "unhealthy after ... (120
// steps, 3 failed: 3 error statuses)".
DWELL_CORE_API std::string describe(const BackendHealthReport& r);

class DWELL_CORE_API BackendHealth {
public:
    static constexpr int kMaxConsecutiveFailures = 3;

    void step_succeeded();
    // `what` is one line naming the backend, the nodes and the fault.
    // True when this failure made the backend unhealthy.
    bool step_failed(BackendFault fault, const std::string& what);
    bool healthy() const;
    // Why the backend gets no more nodes ("" while healthy).
    std::string unhealthy_reason() const;
    BackendHealthReport report() const;

private:
    mutable std::mutex mutex_;
    BackendHealthReport report_;
    int consecutive_errors_ = 0;
};

}  // namespace dwell
