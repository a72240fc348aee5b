// Which x86-64 vector extensions this CPU and OS let the backend use. The
// plugin is built for baseline x86-64 (or another architecture) and picks
// SIMD kernels at run time from this probe.
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
};

// All false on non-x86 builds. A feature counts only when the OS also saves
// its register state (XCR0), so a kernel never traps on a VM that hides it.
CpuFeatures detect_cpu_features();

}  // namespace dwell::cpu
