// Which vector extensions this CPU and OS let the backend use (x86-64 via
// CPUID, aarch64 Linux via the auxiliary vector's HWCAP bits). The plugin is
// built for the baseline of its architecture and picks SIMD kernels at run
// time from this probe.
//
// Thread-safety: pure functions. Ownership: nothing owned.
#pragma once

namespace dwell::cpu {

struct CpuFeatures {
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512vnni = false;
    // aarch64 (HWCAP / HWCAP2): Advanced SIMD, SDOT/UDOT, SMMLA, fp16 arithmetic.
    bool neon = false;
    bool dotprod = false;
    bool i8mm = false;
    bool fp16 = false;
};

// All false on other architectures. On x86 a feature counts only when the OS
// also saves its register state (XCR0), so a kernel never traps on a VM that
// hides it.
CpuFeatures detect_cpu_features();

}  // namespace dwell::cpu
