// Injected faults of the vendor-library test doubles (hexagon_double,
// apu_double, nnrt_double): a test sets an environment variable to
// "kind:N[:X]" and the Nth call of that kind fails (X: a detail such as a
// delay). N counts the calls of each kind since the variable last changed,
// so a test that sets it mid-process gets its Nth call, whatever ran before.
//
// Thread-safety: none of its own; a double calls it under its state mutex.
// Ownership: a plain value held in the double's state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdlib>
#include <string>

namespace fake_vendor {

// One call as the schedule saw it: its number (1-based) among the calls of
// its kind since the spec changed, and the spec then in effect.
struct ScheduledCall {
    long n = 0;
    std::string spec;

    // Whether the spec names this call as `kind` ("kind:N..."); *detail gets
    // the number after a second ':' (0 when there is none).
    bool is(const char* kind, long* detail = nullptr) const {
        const std::string prefix = std::string(kind) + ":";
        if (spec.rfind(prefix, 0) != 0) return false;
        char* end = nullptr;
        const long at = std::strtol(spec.c_str() + prefix.size(), &end, 10);
        if (detail != nullptr)
            *detail = (end && *end == ':') ? std::strtol(end + 1, nullptr, 10) : 0;
        return at == n;
    }
};

// The calls of `Kinds` kinds counted against the spec in `variable`.
template <size_t Kinds>
class FaultSchedule {
public:
    explicit FaultSchedule(const char* variable) : variable_(variable) {}

    // Counts one call of kind `kind` (an index below Kinds), re-reading the
    // variable first: when it changed, every kind counts afresh from here.
    ScheduledCall count(size_t kind) {
        const char* env = std::getenv(variable_);
        const std::string spec = env ? env : "";
        if (spec != spec_) {
            spec_ = spec;
            base_ = calls_;
        }
        ++calls_[kind];
        return {calls_[kind] - base_[kind], spec_};
    }

private:
    const char* variable_;
    std::string spec_;                 // the value last seen ...
    std::array<long, Kinds> calls_{};  // ... every call of each kind ...
    std::array<long, Kinds> base_{};   // ... and the counts when it changed
};

}  // namespace fake_vendor
