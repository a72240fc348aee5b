// The aarch64 column-layout matvec (sparse_matvec.hpp) at the dotprod and
// i8mm levels, whose dense Q4_0 / Q8_0 kernels (gemm_kernel_neon.hpp) it
// matches bit for bit. Tiles of 32 rows: a channel's tile is 16 bytes for
// Q4_0 (low nibbles rows 0-15, high nibbles rows 16-31) and 32 bytes for
// Q8_0 (rows 0-15, then 16-31), so accumulator slot s is row s.
//
// Four channels of a block at a time: their tile bytes are transposed with
// two rounds of zips into vectors whose 32-bit lane r holds the four
// channels' codes of row r, and one SDOT against the four int8 inputs
// (broadcast as one word) adds that row's four products, exact. Q4_0's
// codes stay 0..15 with the offset folded into the start value
// (-8 * sum of the block's inputs); Q8_0's are signed as stored. The float
// epilogue is the dense kernel's, block by block in order:
//   Q4_0: sum += (float(isum) * dw) * dx    Q8_0: sum += float(isum) * (dw * dx)
// A block with no non-zero input is skipped: the dense kernel adds a zero.
//
// Compiled with +dotprod and -ffp-contract=off (CMakeLists.txt); chosen only
// after the CPU probe reports dotprod.
#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>
#include <vector>

#include "simd/sparse_matvec.hpp"

namespace dwell::cpu {
namespace {

constexpr int R = 32;

int slot_vrow(int s) {
    return s;
}

// Rows 0..15 of four channels' 16 bytes -> t[q] lane i = row 4q + i.
inline void transpose4(const uint8x16_t (&v)[4], uint8x16_t (&t)[4]) {
    const uint16x8_t a = vreinterpretq_u16_u8(vzip1q_u8(v[0], v[1]));
    const uint16x8_t b = vreinterpretq_u16_u8(vzip2q_u8(v[0], v[1]));
    const uint16x8_t c = vreinterpretq_u16_u8(vzip1q_u8(v[2], v[3]));
    const uint16x8_t d = vreinterpretq_u16_u8(vzip2q_u8(v[2], v[3]));
    t[0] = vreinterpretq_u8_u16(vzip1q_u16(a, c));
    t[1] = vreinterpretq_u8_u16(vzip2q_u16(a, c));
    t[2] = vreinterpretq_u8_u16(vzip1q_u16(b, d));
    t[3] = vreinterpretq_u8_u16(vzip2q_u16(b, d));
}

template <bool Q8>
void run(const unsigned char* layout, int64_t k, int64_t n, const SparseActs& a, int64_t t0,
         int64_t t1, const unsigned char* zeros, float* out) {
    constexpr size_t kTile = Q8 ? R : R / 2;
    constexpr size_t kColumn = Q8 ? 34 : 18;
    const size_t np = static_cast<size_t>((n + R - 1) / R * R);
    const size_t col = Q8 ? np : np / 2;
    const int64_t nt = t1 - t0;
    std::vector<float> facc(static_cast<size_t>(nt) * R, 0.0f);
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    SparseGroup groups[8];
    for (int64_t j = 0; j < k / 32; ++j) {
        const SparseBlock& blk = a.blocks[static_cast<size_t>(j)];
        if (blk.n == 0) continue;
        const unsigned char* base = layout + static_cast<size_t>(j) * kColumn * np;
        const int ng = sparse_groups(blk, base, np, col, kTile, t0, zeros, groups);
        const int32x4_t init = vdupq_n_s32(Q8 ? 0 : -8 * blk.qsum);
        for (int64_t t = 0; t < nt; ++t) {
            const size_t off = static_cast<size_t>(t) * kTile;
            int32x4_t acc[8];
            for (auto& v : acc) v = init;
            for (int g = 0; g < ng; ++g) {
                const int8x16_t av = vreinterpretq_s8_s32(vdupq_n_s32(groups[g].a4));
                for (size_t h = 0; h < (Q8 ? 2 : 1); ++h) {
                    uint8x16_t v[4], tr[4];
                    for (int c = 0; c < 4; ++c) {
                        v[c] = vld1q_u8(groups[g].ch[c] + off + 16 * h);
                        // Four tiles ahead in each of the short streams.
                        if (t + 4 < nt) __builtin_prefetch(groups[g].ch[c] + off + 4 * kTile);
                    }
                    transpose4(v, tr);
                    for (int q = 0; q < 4; ++q) {
                        if constexpr (Q8) {
                            acc[4 * h + q] =
                                vdotq_s32(acc[4 * h + q], vreinterpretq_s8_u8(tr[q]), av);
                        } else {
                            acc[q] =
                                vdotq_s32(acc[q], vreinterpretq_s8_u8(vandq_u8(tr[q], low4)), av);
                            acc[4 + q] = vdotq_s32(acc[4 + q],
                                                   vreinterpretq_s8_u8(vshrq_n_u8(tr[q], 4)), av);
                        }
                    }
                }
            }
            const unsigned char* sc = base + static_cast<size_t>(t0 + t) * 2 * R;
            float* f = facc.data() + t * R;
            for (int m = 0; m < 8; ++m) {
                uint16_t h[4];
                std::memcpy(h, sc + 8 * m, sizeof h);
                const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
                const float32x4_t s = vcvtq_f32_s32(acc[m]);
                const float32x4_t p = Q8 ? vmulq_f32(s, vmulq_n_f32(dw, blk.d))
                                         : vmulq_n_f32(vmulq_f32(s, dw), blk.d);
                vst1q_f32(f + 4 * m, vaddq_f32(vld1q_f32(f + 4 * m), p));
            }
        }
    }
    sparse_store_rows(facc.data(), t0, nt, R, slot_vrow, n, out);
}

}  // namespace

const SparseKernel* sparse_kernel_neon_dotprod(dwell_dtype t) {
    static const SparseKernel q4_0{"q4_0/neon_dotprod", DWELL_Q4_0, R, false,
                                   slot_vrow,           run<false>};
    static const SparseKernel q8_0{"q8_0/neon_dotprod", DWELL_Q8_0, R, false, slot_vrow, run<true>};
    return t == DWELL_Q4_0 ? &q4_0 : t == DWELL_Q8_0 ? &q8_0 : nullptr;
}

}  // namespace dwell::cpu

#endif  // defined(__aarch64__)
