#include "host/cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#include <cstdint>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace dwell::cpu {

#if defined(__x86_64__) || defined(__i386__)

namespace {

// xgetbv without the -mxsave target flag this translation unit does not have.
uint64_t read_xcr0() {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

}  // namespace

CpuFeatures detect_cpu_features() {
    CpuFeatures f;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = (c >> 27) & 1u;
    if (!osxsave) return f;
    const uint64_t xcr0 = read_xcr0();
    // XMM and YMM state (bits 1, 2); opmask and both ZMM halves (5, 6, 7).
    const bool os_avx = (xcr0 & 0x6) == 0x6;
    const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
    if (!os_avx) return f;
    const bool avx = (c >> 28) & 1u;
    f.fma = avx && ((c >> 12) & 1u);
    f.f16c = avx && ((c >> 29) & 1u);
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    f.avx2 = avx && ((b >> 5) & 1u);
    if (os_avx512) {
        f.avx512f = (b >> 16) & 1u;
        f.avx512bw = f.avx512f && ((b >> 30) & 1u);
        f.avx512vl = f.avx512f && ((b >> 31) & 1u);
        f.avx512vnni = f.avx512f && ((c >> 11) & 1u);
    }
    return f;
}

#elif defined(__aarch64__) && defined(__linux__)

// Bit values from the kernel's arch/arm64 uapi hwcap.h, for C libraries
// whose headers predate them.
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1UL << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif

// The kernel reports a feature in HWCAP only if it also lets user space use
// it, so no further OS check is needed (unlike XCR0 on x86).
CpuFeatures detect_cpu_features() {
    CpuFeatures f;
    const unsigned long hwcap = getauxval(AT_HWCAP);
    const unsigned long hwcap2 = getauxval(AT_HWCAP2);
    f.neon = (hwcap & HWCAP_ASIMD) != 0;
    f.fp16 = f.neon && (hwcap & HWCAP_ASIMDHP) != 0;
    f.dotprod = f.neon && (hwcap & HWCAP_ASIMDDP) != 0;
    f.i8mm = f.neon && (hwcap2 & HWCAP2_I8MM) != 0;
    return f;
}

#else

CpuFeatures detect_cpu_features() {
    return {};
}

#endif

}  // namespace dwell::cpu
