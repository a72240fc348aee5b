// The K-quant dots with SDOT (four int8 products per int32 lane in one
// instruction). This file alone is compiled with +dotprod (see
// CMakeLists.txt) and is only called after the CPU probe says so.
#if defined(__aarch64__)

#include "arch/arm/simd_dots_neon.hpp"

namespace dwell::cpu {

namespace {

int32x4_t dot16_sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return vdotq_s32(acc, a, b);
}

}  // namespace

float dot_q4_K_q8_K_dotprod(const void* row, const ActBlockQ8_K* x, int64_t n) {
    return neon_dots::dot_q4_K_q8_K<dot16_sdot>(row, x, n);
}

float dot_q6_K_q8_K_dotprod(const void* row, const ActBlockQ8_K* x, int64_t n) {
    return neon_dots::dot_q6_K_q8_K<dot16_sdot>(row, x, n);
}

}  // namespace dwell::cpu

#endif  // defined(__aarch64__)
