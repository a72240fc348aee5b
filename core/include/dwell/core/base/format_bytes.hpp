// Human-readable byte counts for messages and reports ("1.5 MiB").
#pragma once

#include <cstdint>
#include <string>

#include "dwell/core/base/export.hpp"

namespace dwell {
DWELL_CORE_API std::string format_bytes(uint64_t bytes);
}
