// The AVX-512 VNNI column-layout matvec (sparse_matvec.hpp): tiles of 128
// rows. Per group of four non-zero channels of a block, their four 64-byte
// code ranges (128 rows as nibbles) are transposed in registers (two rounds
// of byte and word unpacks) so that each 32-bit lane holds one row's four
// codes, and one vpdpbusd per 16 rows adds code * x for all four. The block's
// integer sums then meet the float epilogue of the dense kernel
// (q8_0_family_tile): acc = fma(float(isum), dw * dx, acc), block by block.
//
// Loop order: block outer, then passes over the tiles of four channel groups
// at a time, so each pass reads 16 channel ranges front to back (a few
// sequential streams the hardware prefetchers follow; one stream per
// channel of the block at once defeats them), the integer and float
// accumulators of the tiles in small buffers.
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni
// -ffp-contract=off (CMakeLists.txt).
#if defined(__x86_64__)

// GCC 12's AVX-512 conversion intrinsics start from an "undefined" vector
// and trip -Wmaybe-uninitialized (as in gemm_kernel_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "simd/sparse_matvec.hpp"

namespace dwell::cpu {
namespace {

constexpr int R = 128;
constexpr int kGroupsPerPass = 4;
constexpr int64_t kAhead = 4;

// Accumulator m = 4h + q, lane 4L + i: row 64h + 16L + 4q + i (the unpacks'
// order), slot 16m + lane.
int slot_vrow(int s) {
    const int m = s / 16, lane = s % 16;
    const int h = m / 4, q = m % 4, L = lane / 4, i = lane % 4;
    return 64 * h + 16 * L + 4 * q + i;
}

// Four channels' bytes x0..x3 (row p in byte p) -> four vectors whose 32-bit
// lane (L, i) of vector q holds (x0, x1, x2, x3) of row 16L + 4q + i.
inline void transpose4(const __m512i (&x)[4], __m512i (&t)[4]) {
    const __m512i a = _mm512_unpacklo_epi8(x[0], x[1]);
    const __m512i b = _mm512_unpackhi_epi8(x[0], x[1]);
    const __m512i c = _mm512_unpacklo_epi8(x[2], x[3]);
    const __m512i d = _mm512_unpackhi_epi8(x[2], x[3]);
    t[0] = _mm512_unpacklo_epi16(a, c);
    t[1] = _mm512_unpackhi_epi16(a, c);
    t[2] = _mm512_unpacklo_epi16(b, d);
    t[3] = _mm512_unpackhi_epi16(b, d);
}

// Q8: one byte per code (stored w + 128, the offset taken off through
// -128 * qsum), a channel's tile two 64-byte halves; else Q4_0 nibbles.
template <bool Q8>
void run(const unsigned char* layout, int64_t k, int64_t n, const SparseActs& a, int64_t t0,
         int64_t t1, const unsigned char* zeros, float* out) {
    constexpr size_t kTcb = Q8 ? R : R / 2;  // a channel's code bytes per tile
    const size_t np = static_cast<size_t>((n + R - 1) / R * R);
    const int64_t nt = t1 - t0;
    const int64_t nb = k / 32;
    std::vector<float> facc(static_cast<size_t>(nt) * R, 0.0f);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    std::vector<int32_t> iacc(static_cast<size_t>(nt) * R);
    SparseGroup groups[8];
    for (int64_t j = 0; j < nb; ++j) {
        const SparseBlock& blk = a.blocks[static_cast<size_t>(j)];
        if (blk.n == 0) continue;  // adds an exact zero to every row
        const unsigned char* base = layout + j * (2 * np + 32 * (np / R) * kTcb);
        const int ng = sparse_groups(blk, base, np, np / R * kTcb, kTcb, t0, zeros, groups);
        const __m512 dx = _mm512_set1_ps(blk.d);
        const __m512i init = _mm512_set1_epi32((Q8 ? -128 : -8) * blk.qsum);
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
                        _mm_prefetch(reinterpret_cast<const char*>(groups[g].ch[c] + t * kTcb),
                                     _MM_HINT_T0);
            for (int64_t t = 0; t < nt; ++t) {
                const size_t off = static_cast<size_t>(t) * kTcb;
                int32_t* ia = iacc.data() + t * R;
                __m512i acc[8];
                for (int m = 0; m < 8; ++m)
                    acc[m] = g0 == 0 ? init : _mm512_loadu_si512(ia + 16 * m);
                for (int g = g0; g < g1; ++g) {
                    const __m512i av = _mm512_set1_epi32(groups[g].a4);
                    if constexpr (Q8) {
                        // Rows 64h.. of the tile: one 64-byte half each.
                        for (int h = 0; h < 2; ++h) {
                            __m512i v[4], tr[4];
                            for (int c = 0; c < 4; ++c)
                                v[c] = _mm512_loadu_si512(groups[g].ch[c] + off + 64 * h);
                            transpose4(v, tr);
                            for (int q = 0; q < 4; ++q)
                                acc[4 * h + q] = _mm512_dpbusd_epi32(acc[4 * h + q], tr[q], av);
                        }
                    } else {
                        // Transposed as whole bytes (8 unpacks), then split: a
                        // lane's low nibbles are its row's codes, its high ones
                        // those of the row 64 on.
                        __m512i v[4], tr[4];
                        for (int c = 0; c < 4; ++c)
                            v[c] = _mm512_loadu_si512(groups[g].ch[c] + off);
                        // Each range kAhead tiles ahead: short streams, many
                        // at once, which the hardware alone follows too late.
                        if (t + kAhead < nt)
                            for (int c = 0; c < 4; ++c)
                                _mm_prefetch(reinterpret_cast<const char*>(groups[g].ch[c] + off +
                                                                           kAhead * kTcb),
                                             _MM_HINT_T0);
                        transpose4(v, tr);
                        for (int q = 0; q < 4; ++q) {
                            const __m512i lo = _mm512_and_si512(tr[q], low4);
                            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(tr[q], 4), low4);
                            acc[q] = _mm512_dpbusd_epi32(acc[q], lo, av);
                            acc[4 + q] = _mm512_dpbusd_epi32(acc[4 + q], hi, av);
                        }
                    }
                }
                if (!last) {
                    for (int m = 0; m < 8; ++m) _mm512_storeu_si512(ia + 16 * m, acc[m]);
                    continue;
                }
                const unsigned char* sc = base + static_cast<size_t>(t0 + t) * 2 * R;
                float* f = facc.data() + t * R;
                for (int m = 0; m < 8; ++m) {
                    const __m512 dw = _mm512_cvtph_ps(
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc + 32 * m)));
                    const __m512 prev = _mm512_loadu_ps(f + 16 * m);
                    _mm512_storeu_ps(f + 16 * m, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[m]),
                                                                 _mm512_mul_ps(dw, dx), prev));
                }
            }
        }
    }
    sparse_store_rows(facc.data(), t0, nt, R, slot_vrow, n, out);
}

}  // namespace

const SparseKernel* sparse_kernel_avx512(dwell_dtype t) {
    static const SparseKernel q4_0{"q4_0/avx512vnni", DWELL_Q4_0, R, false, slot_vrow, run<false>};
    static const SparseKernel q8_0{"q8_0/avx512vnni", DWELL_Q8_0, R, true, slot_vrow, run<true>};
    return t == DWELL_Q4_0 ? &q4_0 : t == DWELL_Q8_0 ? &q8_0 : nullptr;
}

}  // namespace dwell::cpu

#endif
