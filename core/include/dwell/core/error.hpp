// The exception type used inside libdwell. It carries the ABI status code so
// that hosts and the C API can turn it back into a status plus message.
#pragma once

#include <stdexcept>
#include <string>

#include "dwell/status.h"

namespace dwell {

class Error : public std::runtime_error {
public:
    Error(dwell_status status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    dwell_status status() const noexcept { return status_; }

private:
    dwell_status status_;
};

}  // namespace dwell
