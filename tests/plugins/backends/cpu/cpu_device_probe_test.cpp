// Parsing /proc/cpuinfo and /proc/meminfo text, and the live probe.
#include "host/cpu_device_probe.hpp"

#include <gtest/gtest.h>

namespace dwell::cpu {
namespace {

TEST(CpuDeviceProbe, ModelNameOnX86) {
    const char* text =
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 2\n"
        "model name\t: AMD EPYC 9R14 96-Core Processor\nflags\t\t: fpu\n\n"
        "processor\t: 1\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n";
    EXPECT_EQ(cpu_model_from_cpuinfo(text), "AMD EPYC 9R14 96-Core Processor");
}

TEST(CpuDeviceProbe, ArmFallbacks) {
    EXPECT_EQ(
        cpu_model_from_cpuinfo("processor : 0\nBogoMIPS : 38.40\nHardware : Qualcomm SM8550\n"),
        "Qualcomm SM8550");
    EXPECT_EQ(
        cpu_model_from_cpuinfo("processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd41\n"),
        "CPU implementer 0x41 part 0xd41");
    EXPECT_EQ(cpu_model_from_cpuinfo(""), "unknown CPU");
    EXPECT_EQ(cpu_model_from_cpuinfo("model name\t:   \n"), "unknown CPU");
}

TEST(CpuDeviceProbe, Meminfo) {
    const auto m = memory_from_meminfo(
        "MemTotal:       24684084 kB\nMemFree:  100 kB\nMemAvailable:   24329220 kB\n");
    EXPECT_EQ(m.total, 24684084ull * 1024);
    EXPECT_EQ(m.available, 24329220ull * 1024);
    EXPECT_EQ(memory_from_meminfo("MemTotal: 10 kB\nMemFree: 4 kB\n").available, 4096u);
    EXPECT_EQ(memory_from_meminfo("garbage").total, 0u);
}

TEST(CpuDeviceProbe, LiveProbe) {
    const CpuIdentity id = probe_cpu_identity();
    EXPECT_FALSE(id.model.empty());
    EXPECT_EQ(id.hardware_id.rfind("cpu:", 0), 0u);
    EXPECT_NE(id.hardware_id.find(id.model), std::string::npos);
    const MemoryInfo m = probe_memory();
    EXPECT_GT(m.total, 0u);
    EXPECT_LE(m.available, m.total);
}

}  // namespace
}  // namespace dwell::cpu
