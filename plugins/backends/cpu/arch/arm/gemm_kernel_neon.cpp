// The aarch64 blocked kernels at the dotprod level: SDOT with a broadcast
// lane multiplies 4 codes of each of the 4 interleaved weight rows by the
// same 4 activation bytes (layouts and tile loops: gemm_kernel_neon.hpp).
// This file alone is compiled with +dotprod and -ffp-contract=off (see
// CMakeLists.txt) and only runs after the CPU probe says so.
#if defined(__aarch64__)

#include "arch/arm/gemm_kernel_neon.hpp"

namespace dwell::cpu {

namespace {

struct SdotEngine {
    static constexpr const char* kNames[8] = {
        "q4_0/neon_dotprod", "q8_0/neon_dotprod", "q4_K/neon_dotprod", "q6_K/neon_dotprod",
        "q5_0/neon_dotprod", "q4_1/neon_dotprod", "q5_1/neon_dotprod", "q5_K/neon_dotprod"};

    template <int K, int NC>
    static void dot(const int8x16_t* v, const int8_t* const* x, int32x4_t* out) {
        neon_gemm::sdot_columns<K, NC>(v, x, out);
    }
};

}  // namespace

const GemmKernel* gemm_kernel_neon_dotprod(dwell_dtype t) {
    return neon_gemm::kernel_for<SdotEngine>(t);
}

}  // namespace dwell::cpu

#endif  // defined(__aarch64__)
