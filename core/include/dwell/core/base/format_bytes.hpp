// Human-readable byte counts for messages and reports ("1.5 MiB").
#pragma once

#include <cstdint>
#include <string>

namespace dwell {
std::string format_bytes(uint64_t bytes);
}
