// What the cpu backend reports about its device: the CPU model, a hardware
// id, and memory from /proc. Reading two small /proc files is all it does,
// so probing stays cheap.
//
// Thread-safety: pure functions apart from reading /proc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dwell::cpu {

struct CpuIdentity {
    std::string model;        // e.g. "AMD EPYC", or "unknown CPU"
    std::string hardware_id;  // "cpu:<arch>:<model>"
};

struct MemoryInfo {
    uint64_t total = 0;      // bytes, 0 if unknown
    uint64_t available = 0;  // bytes, 0 if unknown
};

// The CPU model from /proc/cpuinfo text: "model name" (x86), else
// "Hardware", else the ARM "CPU implementer"/"CPU part" codes, else
// "unknown CPU".
std::string cpu_model_from_cpuinfo(std::string_view cpuinfo);

// MemTotal and MemAvailable (MemFree if absent) from /proc/meminfo text.
MemoryInfo memory_from_meminfo(std::string_view meminfo);

// Reads /proc and uname for this machine.
CpuIdentity probe_cpu_identity();
MemoryInfo probe_memory();

}  // namespace dwell::cpu
