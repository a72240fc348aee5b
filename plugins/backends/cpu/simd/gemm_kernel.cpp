#include "simd/gemm_kernel.hpp"

namespace dwell::cpu {

const GemmKernel* gemm_kernel_for(dwell_dtype t, SimdLevel level) {
    // A level without a kernel for t falls back to the level below it.
    const GemmKernel* k = nullptr;
    switch (level) {
#if defined(__x86_64__)
        case SimdLevel::Avx512:
            k = gemm_kernel_avx512(t);
            if (k == nullptr) k = gemm_kernel_avx2(t);
            break;
        case SimdLevel::Avx2:
            k = gemm_kernel_avx2(t);
            break;
#endif
#if defined(__aarch64__)
        case SimdLevel::NeonI8mm:
            k = gemm_kernel_neon_i8mm(t);
            if (k == nullptr) k = gemm_kernel_neon_dotprod(t);
            break;
        case SimdLevel::NeonDotprod:
            k = gemm_kernel_neon_dotprod(t);
            break;
#endif
        default:
            break;
    }
    return k != nullptr ? k : gemm_kernel_scalar(t);
}

const GemmKernel* gemm_kernel(dwell_dtype t) {
    return gemm_kernel_for(t, dot_kernels().level);
}

}  // namespace dwell::cpu
