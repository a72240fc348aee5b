#include "simd_dots.hpp"

#include <cstdlib>
#include <cstring>

namespace dwell::cpu {

const char* simd_level_name(SimdLevel level) {
    switch (level) {
        case SimdLevel::Avx2:
            return "avx2";
        case SimdLevel::Avx512:
            return "avx512";
        default:
            return "scalar";
    }
}

namespace {

bool has_avx2(const CpuFeatures& f) {
    return f.avx2 && f.fma && f.f16c;
}

}  // namespace

// No AVX-512 kernels exist yet: the AVX2 ones already saturate memory
// bandwidth on the decode path, so Avx512 is never chosen as "best".
SimdLevel best_simd_level(const CpuFeatures& f) {
#if defined(__x86_64__)
    if (has_avx2(f)) return SimdLevel::Avx2;
#else
    (void)f;
#endif
    return SimdLevel::Scalar;
}

SimdLevel select_simd_level(const char* env, const CpuFeatures& f) {
    if (env != nullptr && std::strcmp(env, "scalar") == 0) return SimdLevel::Scalar;
    // "avx2" and "avx512" (and unknown values) get the widest supported
    // level, which today is at most avx2.
    return best_simd_level(f);
}

DotKernels dot_kernels_for(SimdLevel level) {
    DotKernels k;
    k.level = SimdLevel::Scalar;
    k.f16_f32 = dot_f16_f32_scalar;
    k.q8_0_f32 = dot_q8_0_f32_scalar;
    k.q4_0_f32 = dot_q4_0_f32_scalar;
    k.q4_K_q8_K = dot_q4_K_q8_K_scalar;
    k.q6_K_q8_K = dot_q6_K_q8_K_scalar;
#if defined(__x86_64__)
    if (level == SimdLevel::Avx2 || level == SimdLevel::Avx512) {
        k.level = SimdLevel::Avx2;
        k.f16_f32 = dot_f16_f32_avx2;
        k.q8_0_f32 = dot_q8_0_f32_avx2;
        k.q4_0_f32 = dot_q4_0_f32_avx2;
        k.q4_K_q8_K = dot_q4_K_q8_K_avx2;
        k.q6_K_q8_K = dot_q6_K_q8_K_avx2;
    }
#else
    (void)level;
#endif
    return k;
}

const DotKernels& dot_kernels() {
    static const DotKernels kernels =
        dot_kernels_for(select_simd_level(std::getenv("DWELL_CPU_SIMD"), detect_cpu_features()));
    return kernels;
}

}  // namespace dwell::cpu
