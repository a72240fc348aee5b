// The AVX2 column-layout matvec (sparse_matvec.hpp): tiles of 64 rows, the
// AVX-512 kernel's scheme at half width (see sparse_matvec_avx512.cpp for
// the loop order). Without VNNI a row's four code * input products go
// through pmaddubsw (u8 x s8 pairs to s16: at most 2 * 15 * 127, no
// saturation) and pmaddwd with ones (to s32), exact. The float epilogue is
// the dense AVX2 kernel's (q4_0_tile): acc = fma(float(isum), dw * dx, acc),
// block by block.
//
// Q8_0 keeps its codes signed (offset_codes false), as the dense AVX2 Q8_0
// kernel does: |w| is the unsigned operand and the input takes w's sign
// (psignb), so a pair of products is at most 2 * 128 * 127, no saturation.
// A tile's channel is 64 bytes, rows 0-31 then 32-63: the same accumulator
// order as Q4_0's low and high nibbles.
//
// Compiled with -mavx2 -mfma -mf16c -ffp-contract=off (CMakeLists.txt).
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "simd/sparse_matvec.hpp"

namespace dwell::cpu {
namespace {

constexpr int R = 64;
constexpr int kGroupsPerPass = 4;
constexpr int64_t kAhead = 4;

// Accumulator m = 4h + q, lane 4L + i: row 32h + 16L + 4q + i (the unpacks'
// order), slot 8m + lane.
int slot_vrow(int s) {
    const int m = s / 8, lane = s % 8;
    const int h = m / 4, q = m % 4, L = lane / 4, i = lane % 4;
    return 32 * h + 16 * L + 4 * q + i;
}

// Four channels' bytes x0..x3 (row p in byte p) -> four vectors whose 32-bit
// lane (L, i) of vector q holds (x0, x1, x2, x3) of row 16L + 4q + i.
inline void transpose4(const __m256i (&x)[4], __m256i (&t)[4]) {
    const __m256i a = _mm256_unpacklo_epi8(x[0], x[1]);
    const __m256i b = _mm256_unpackhi_epi8(x[0], x[1]);
    const __m256i c = _mm256_unpacklo_epi8(x[2], x[3]);
    const __m256i d = _mm256_unpackhi_epi8(x[2], x[3]);
    t[0] = _mm256_unpacklo_epi16(a, c);
    t[1] = _mm256_unpackhi_epi16(a, c);
    t[2] = _mm256_unpacklo_epi16(b, d);
    t[3] = _mm256_unpackhi_epi16(b, d);
}

template <bool Q8>
void run(const unsigned char* layout, int64_t k, int64_t n, const SparseActs& a, int64_t t0,
         int64_t t1, const unsigned char* zeros, float* out) {
    constexpr size_t kTile = Q8 ? R : R / 2;
    constexpr size_t kColumn = Q8 ? 34 : 18;
    const size_t np = static_cast<size_t>((n + R - 1) / R * R);
    const int64_t nt = t1 - t0;
    const int64_t nb = k / 32;
    std::vector<float> facc(static_cast<size_t>(nt) * R, 0.0f);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    std::vector<int32_t> iacc(static_cast<size_t>(nt) * R);
    SparseGroup groups[8];
    for (int64_t j = 0; j < nb; ++j) {
        const SparseBlock& blk = a.blocks[static_cast<size_t>(j)];
        if (blk.n == 0) continue;  // adds an exact zero to every row
        const unsigned char* base = layout + j * kColumn * np;
        const int ng = sparse_groups(blk, base, np, Q8 ? np : np / 2, kTile, t0, zeros, groups);
        const __m256 dx = _mm256_set1_ps(blk.d);
        const __m256i init = _mm256_set1_epi32(Q8 ? 0 : -8 * blk.qsum);
        // Passes of up to kGroupsPerPass groups over all the tiles: each pass
        // streams a few channel ranges front to back (prefetcher-friendly),
        // the integer sums carried between passes in iacc; the last pass
        // ends in the float epilogue.
        for (int g0 = 0; g0 < ng; g0 += kGroupsPerPass) {
            const int g1 = std::min(ng, g0 + kGroupsPerPass);
            const bool last = g1 == ng;
            // The first kAhead tiles of this pass's ranges, which the
            // in-loop prefetch does not cover.
            for (int g = g0; g < g1; ++g)
                for (int c = 0; c < 4; ++c)
                    for (int64_t t = 0; t < std::min<int64_t>(kAhead, nt); ++t)
                        _mm_prefetch(reinterpret_cast<const char*>(groups[g].ch[c] + t * kTile),
                                     _MM_HINT_T0);
            for (int64_t t = 0; t < nt; ++t) {
                const size_t off = static_cast<size_t>(t) * kTile;
                int32_t* ia = iacc.data() + t * R;
                __m256i acc[8];
                for (int m = 0; m < 8; ++m)
                    acc[m] = g0 == 0
                                 ? init
                                 : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ia + 8 * m));
                for (int g = g0; g < g1; ++g) {
                    const __m256i av = _mm256_set1_epi32(groups[g].a4);
                    // Each range kAhead tiles ahead: short streams, many
                    // at once, which the hardware alone follows too late.
                    if (t + kAhead < nt)
                        for (int c = 0; c < 4; ++c)
                            _mm_prefetch(reinterpret_cast<const char*>(groups[g].ch[c] + off +
                                                                       kAhead * kTile),
                                         _MM_HINT_T0);
                    __m256i v[4], tr[4];
                    if constexpr (Q8) {
                        for (int h = 0; h < 2; ++h) {
                            for (int c = 0; c < 4; ++c)
                                v[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                    groups[g].ch[c] + off + 32 * h));
                            transpose4(v, tr);
                            for (int q = 0; q < 4; ++q) {
                                const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(tr[q]),
                                                                       _mm256_sign_epi8(av, tr[q]));
                                acc[4 * h + q] =
                                    _mm256_add_epi32(acc[4 * h + q], _mm256_madd_epi16(p, ones));
                            }
                        }
                    } else {
                        // Transposed as whole bytes (8 unpacks), then split:
                        // a lane's low nibbles are its row's codes, its high
                        // ones those of the row 32 on.
                        for (int c = 0; c < 4; ++c)
                            v[c] = _mm256_loadu_si256(
                                reinterpret_cast<const __m256i*>(groups[g].ch[c] + off));
                        transpose4(v, tr);
                        for (int q = 0; q < 4; ++q) {
                            const __m256i lo = _mm256_and_si256(tr[q], low4);
                            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(tr[q], 4), low4);
                            acc[q] = _mm256_add_epi32(
                                acc[q], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, av), ones));
                            acc[4 + q] = _mm256_add_epi32(
                                acc[4 + q], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, av), ones));
                        }
                    }
                }
                if (!last) {
                    for (int m = 0; m < 8; ++m)
                        _mm256_storeu_si256(reinterpret_cast<__m256i*>(ia + 8 * m), acc[m]);
                    continue;
                }
                const unsigned char* sc = base + static_cast<size_t>(t0 + t) * 2 * R;
                float* f = facc.data() + t * R;
                for (int m = 0; m < 8; ++m) {
                    const __m256 dw = _mm256_cvtph_ps(
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + 16 * m)));
                    const __m256 prev = _mm256_loadu_ps(f + 8 * m);
                    _mm256_storeu_ps(f + 8 * m, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[m]),
                                                                _mm256_mul_ps(dw, dx), prev));
                }
            }
        }
    }
    sparse_store_rows(facc.data(), t0, nt, R, slot_vrow, n, out);
}

}  // namespace

const SparseKernel* sparse_kernel_avx2(dwell_dtype t) {
    static const SparseKernel q4_0{"q4_0/avx2", DWELL_Q4_0, R, false, slot_vrow, run<false>};
    static const SparseKernel q8_0{"q8_0/avx2", DWELL_Q8_0, R, false, slot_vrow, run<true>};
    return t == DWELL_Q4_0 ? &q4_0 : t == DWELL_Q8_0 ? &q8_0 : nullptr;
}

}  // namespace dwell::cpu

#endif
