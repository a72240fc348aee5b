#include "simd/simd_dots.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__aarch64__)
#include "arch/arm/simd_dots_neon.hpp"
#endif

namespace dwell::cpu {

const char* simd_level_name(SimdLevel level) {
    switch (level) {
        case SimdLevel::Avx2:
            return "avx2";
        case SimdLevel::Avx512:
            return "avx512";
        case SimdLevel::Neon:
            return "neon";
        case SimdLevel::NeonDotprod:
            return "dotprod";
        case SimdLevel::NeonI8mm:
            return "i8mm";
        default:
            return "scalar";
    }
}

namespace {

#if defined(__x86_64__)
bool has_avx2(const CpuFeatures& f) {
    return f.avx2 && f.fma && f.f16c;
}
#endif

constexpr SimdLevel kAllLevels[] = {SimdLevel::Scalar, SimdLevel::Avx2,        SimdLevel::Avx512,
                                    SimdLevel::Neon,   SimdLevel::NeonDotprod, SimdLevel::NeonI8mm};

}  // namespace

bool simd_level_supported(SimdLevel level, const CpuFeatures& f) {
    switch (level) {
        case SimdLevel::Scalar:
            return true;
#if defined(__x86_64__)
        case SimdLevel::Avx2:
            return has_avx2(f);
        case SimdLevel::Avx512:
            return has_avx2(f) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
#endif
#if defined(__aarch64__)
        case SimdLevel::Neon:
            return f.neon;
        case SimdLevel::NeonDotprod:
            return f.neon && f.dotprod;
        case SimdLevel::NeonI8mm:
            return f.neon && f.dotprod && f.i8mm;
#endif
        default:
            return false;
    }
}

SimdLevel best_simd_level(const CpuFeatures& f) {
    SimdLevel best = SimdLevel::Scalar;
    for (SimdLevel l : kAllLevels) {
        if (simd_level_supported(l, f)) best = l;
    }
    return best;
}

SimdLevel select_simd_level(const char* env, const CpuFeatures& f) {
    if (env != nullptr) {
        for (SimdLevel l : kAllLevels) {
            if (std::strcmp(env, simd_level_name(l)) == 0 && simd_level_supported(l, f)) return l;
        }
    }
    return best_simd_level(f);
}

namespace {

std::string accepted_levels(const CpuFeatures& f) {
    std::string out;
    for (SimdLevel l : kAllLevels) {
        if (simd_level_supported(l, f))
            out.append(out.empty() ? "" : ", ").append(simd_level_name(l));
    }
    return out;
}

}  // namespace

std::string simd_env_warning(const char* env, const CpuFeatures& f) {
    if (env == nullptr || *env == '\0') return "";
    bool known = false;
    for (SimdLevel l : kAllLevels) {
        if (std::strcmp(env, simd_level_name(l)) != 0) continue;
        if (simd_level_supported(l, f)) return "";
        known = true;
    }
    // Shown as typed, but only printable bytes: the value is outside input.
    std::string shown;
    for (const char* c = env; *c && shown.size() < 32; ++c)
        shown += (*c >= 0x20 && *c < 0x7f) ? *c : '?';
    return std::string("DWELL_CPU_SIMD=") + shown +
           (known ? " is a level this CPU cannot run" : " is not a SIMD level") +
           " (accepted: " + accepted_levels(f) + "); using " + simd_level_name(best_simd_level(f));
}

std::string simd_description(SimdLevel running, const CpuFeatures& f) {
    std::string d = std::string("CPU backend: ") + simd_level_name(running) + " kernels";
    const SimdLevel best = best_simd_level(f);
    if (running != best) {
        d.append(" (DWELL_CPU_SIMD; this CPU runs up to ")
            .append(simd_level_name(best))
            .append(")");
    }
    return d;
}

DotKernels dot_kernels_for(SimdLevel level) {
    DotKernels k;
    k.level = SimdLevel::Scalar;
    k.f32_f32 = dot_f32_f32_scalar;
    k.f16_f32 = dot_f16_f32_scalar;
    k.bf16_f32 = dot_bf16_f32_scalar;
    k.q8_0_f32 = dot_q8_0_f32_scalar;
    k.q4_0_f32 = dot_q4_0_f32_scalar;
    k.q4_K_q8_K = dot_q4_K_q8_K_scalar;
    k.q6_K_q8_K = dot_q6_K_q8_K_scalar;
    k.q4_0_q8_0 = dot_q4_0_q8_0_scalar;
    k.q8_0_q8_0 = dot_q8_0_q8_0_scalar;
#if defined(__x86_64__)
    if (level == SimdLevel::Avx2 || level == SimdLevel::Avx512) {
        k.level = level;
        k.f32_f32 = dot_f32_f32_avx2;
        k.f16_f32 = dot_f16_f32_avx2;
        k.bf16_f32 = dot_bf16_f32_avx2;
        k.q8_0_f32 = dot_q8_0_f32_avx2;
        k.q4_0_f32 = dot_q4_0_f32_avx2;
        k.q4_K_q8_K = dot_q4_K_q8_K_avx2;
        k.q6_K_q8_K = dot_q6_K_q8_K_avx2;
        k.q4_0_q8_0 = dot_q4_0_q8_0_avx2;
        k.q8_0_q8_0 = dot_q8_0_q8_0_avx2;
    }
    if (level == SimdLevel::Avx512) {
        // The quantized dots keep their AVX2 versions: matmuls of those
        // dtypes take the VNNI GEMM (gemm_kernel_avx512.cpp) here, leaving
        // the row dots only the shapes it does not tile.
        k.f32_f32 = dot_f32_f32_avx512;
        k.f16_f32 = dot_f16_f32_avx512;
        k.bf16_f32 = dot_bf16_f32_avx512;
    }
#elif defined(__aarch64__)
    if (level == SimdLevel::Neon || level == SimdLevel::NeonDotprod ||
        level == SimdLevel::NeonI8mm) {
        k.level = level;
        k.f32_f32 = dot_f32_f32_neon;
        k.f16_f32 = dot_f16_f32_neon;
        k.bf16_f32 = dot_bf16_f32_neon;
        k.q8_0_f32 = dot_q8_0_f32_neon;
        k.q4_0_f32 = dot_q4_0_f32_neon;
        // The f32-activation dots gain nothing from SDOT; the integer K-quant
        // dots do (SMMLA only pays off across several rows, in the GEMM).
        const bool sdot = level != SimdLevel::Neon;
        k.q4_K_q8_K = sdot ? dot_q4_K_q8_K_dotprod : dot_q4_K_q8_K_neon;
        k.q6_K_q8_K = sdot ? dot_q6_K_q8_K_dotprod : dot_q6_K_q8_K_neon;
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
