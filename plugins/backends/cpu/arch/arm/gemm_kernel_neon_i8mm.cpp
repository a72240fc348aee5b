// The aarch64 blocked kernels at the i8mm level: SMMLA multiplies a 2x8
// block of weight codes by a 2x8 block of activation codes into a 2x2 tile
// of int32 sums, so each instruction does 32 multiply-adds for a pair of
// rows and a pair of columns. It reads the dotprod level's packed layout
// (gemm_kernel_neon.hpp): zipping two consecutive 4-row vectors gives rows
// 0-1 and rows 2-3 as 2x8 blocks; a single column goes through SDOT. This
// file alone is compiled with +i8mm+dotprod and -ffp-contract=off (see
// CMakeLists.txt) and only runs after the CPU probe says so.
#if defined(__aarch64__)

#include "arch/arm/gemm_kernel_neon.hpp"

namespace dwell::cpu {

namespace {

struct SmmlaEngine {
    static constexpr const char* kNames[8] = {"q4_0/neon_i8mm", "q8_0/neon_i8mm", "q4_K/neon_i8mm",
                                              "q6_K/neon_i8mm", "q5_0/neon_i8mm", "q4_1/neon_i8mm",
                                              "q5_1/neon_i8mm", "q5_K/neon_i8mm"};

    template <int K, int NC>
    static void dot(const int8x16_t* v, const int8_t* const* x, int32x4_t* out) {
        static_assert(K % 4 == 0 && NC <= neon_gemm::kCols);
        if constexpr (NC == 1) {
            // A lone column (decode) would waste half of each SMMLA and
            // still pay the zips; SDOT does the same useful work per
            // instruction without them.
            neon_gemm::sdot_columns<K, 1>(v, x, out);
        } else {
            for (int c = 0; c < NC; c += 2) {
                // An odd last column pairs with itself; its twin is dropped.
                const int8_t* x_second = c + 1 < NC ? x[c + 1] : x[c];
                // Lanes [r0c0, r0c1, r1c0, r1c1] for rows 0-1 and for rows 2-3.
                int32x4_t acc01 = vdupq_n_s32(0), acc23 = vdupq_n_s32(0);
                for (int q = 0; q < K / 4; ++q) {
                    const int64x2_t x0 = vreinterpretq_s64_s8(vld1q_s8(x[c] + 16 * q));
                    const int64x2_t x1 = vreinterpretq_s64_s8(vld1q_s8(x_second + 16 * q));
                    // Activation bytes 16q..16q+7, then 16q+8..16q+15, of both columns.
                    const int8x16_t xs[2] = {vreinterpretq_s8_s64(vzip1q_s64(x0, x1)),
                                             vreinterpretq_s8_s64(vzip2q_s64(x0, x1))};
                    for (int half = 0; half < 2; ++half) {
                        const int32x4_t a = vreinterpretq_s32_s8(v[4 * q + 2 * half]);
                        const int32x4_t b = vreinterpretq_s32_s8(v[4 * q + 2 * half + 1]);
                        // 8 consecutive codes of rows 0 and 1, and of rows 2 and 3.
                        const int8x16_t w01 = vreinterpretq_s8_s32(vzip1q_s32(a, b));
                        const int8x16_t w23 = vreinterpretq_s8_s32(vzip2q_s32(a, b));
                        acc01 = vmmlaq_s32(acc01, w01, xs[half]);
                        acc23 = vmmlaq_s32(acc23, w23, xs[half]);
                    }
                }
                // Back to one vector of rows 0..3 per column.
                out[c] = vuzp1q_s32(acc01, acc23);
                if (c + 1 < NC) out[c + 1] = vuzp2q_s32(acc01, acc23);
            }
        }
    }
};

}  // namespace

const GemmKernel* gemm_kernel_neon_i8mm(dwell_dtype t) {
    return neon_gemm::kernel_for<SmmlaEngine>(t);
}

}  // namespace dwell::cpu

#endif  // defined(__aarch64__)
