// How much memory the system can still give this process, for refusing
// allocations that cannot fit before they are made.
#pragma once

#include <cstdint>
#include <filesystem>

namespace dwell {

// MemAvailable from <root>/proc/meminfo in bytes; 0 when unknown.
uint64_t available_memory_bytes(const std::filesystem::path& root = "/");
// MemTotal, likewise.
uint64_t physical_memory_bytes(const std::filesystem::path& root = "/");

}  // namespace dwell
