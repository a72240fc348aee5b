// How much memory the system can still give this process, for refusing
// allocations that cannot fit before they are made.
//
// Every file is read under `root` (the device-detection root, "/" on a real
// device), so tests fake a device with files under a temporary folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

namespace dwell {

// The least of MemAvailable from <root>/proc/meminfo and what the process's
// memory cgroup still allows (see cgroup_memory_left_bytes); 0 when neither
// is known.
uint64_t available_memory_bytes(const std::filesystem::path& root = "/");
// MemTotal, capped by the cgroup's limit, likewise.
uint64_t physical_memory_bytes(const std::filesystem::path& root = "/");

// The "<key> <n> kB" line of a proc/meminfo text in bytes; 0 ("unknown")
// when the key is absent, its number does not parse or the bytes would not
// fit in 64 bits (a hostile or corrupt file, never a real device).
uint64_t meminfo_field_bytes(std::string_view meminfo, std::string_view key);

// What the memory cgroups of this process allow it still to use: limit minus
// usage at its own cgroup and every ancestor (the tightest wins), as read
// from <root>/proc/self/cgroup and cgroup v2 (memory.max, memory.current
// under <root>/sys/fs/cgroup) or v1 (memory.limit_in_bytes,
// memory.usage_in_bytes under <root>/sys/fs/cgroup/memory or Android's
// <root>/dev/memcg). nullopt when no limit applies or none can be read.
std::optional<uint64_t> cgroup_memory_left_bytes(const std::filesystem::path& root = "/");
// The tightest of those limits alone; nullopt likewise.
std::optional<uint64_t> cgroup_memory_limit_bytes(const std::filesystem::path& root = "/");

}  // namespace dwell
