// The aarch64 blocked kernels' shared parts: packed weight layouts, the
// activation layouts and the tile loops, generic over the int8 engine that
// multiplies them (SDOT for gemm_kernel_neon.cpp, SMMLA for
// gemm_kernel_neon_i8mm.cpp, which also uses SDOT for a single column).
//
// Weight layout: blocks of 4 rows. Within a block, per ggml block of k
// (32 or 256 values), the row scales as floats, then the codes as 16-byte
// vectors that each hold 4 consecutive codes of each of the 4 rows
// ([r0 c0..c3, r1 c0..c3, r2 .., r3 ..]), still packed as nibbles or
// 6-bit fields where the format has them. SDOT multiplies such a vector by
// 4 activation bytes broadcast to every lane, so lane r accumulates row r;
// SMMLA wants 8 codes of 2 rows, which one ZIP of two consecutive vectors
// gives. Both levels thus share one packed layout and their integer sums
// are the same exact values.
//
// Activation layouts: Q8_0 rows as all the int8 codes, then one float scale
// per block (the fp16 scale ggml stores, widened); Q8_1 rows the same, then
// one float s per block after the scales; Q8_K rows as ggml's block_q8_K
// (ActBlockQ8_K). All come from the reference quantizers, so the rounding
// is ggml's.
//
// A tile runs exactly nc columns (the loops are instantiated for each
// nc <= kCols): decode, one column at a time, would otherwise pay for four.
//
// Float epilogues are the scalar integer dots' expressions, lane by lane,
// and these files are built with -ffp-contract=off: outputs are
// bit-identical to integer_dot.hpp's and cannot depend on where a row or
// column sits in the tile.
//
// Everything is in an anonymous namespace: the two including files are built
// with different -march flags, and an inline function with external linkage
// could have the linker keep the i8mm build for the dotprod level's callers.
#pragma once

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <type_traits>

#include "dwell/quant.h"
#include "quant/activation_quant.hpp"
#include "simd/gemm_kernel.hpp"

namespace dwell::cpu::neon_gemm {
namespace {

constexpr int kRows = 4;
constexpr int kCols = 4;

// Per 32 values of 4 rows. q[g][4r + i] is code 4g + i of row r.
struct PackedQ8_0 {
    float d[kRows];
    int8_t q[8][16];
};

// q[v][4r + i] is byte 4v + i of row r's qs: codes 4v + i (low nibble) and
// 16 + 4v + i (high nibble).
struct PackedQ4_0 {
    float d[kRows];
    uint8_t q[4][16];
};

// Per 256 values of 4 rows. Sub-block scales and mins unpacked to bytes,
// sc[j][r] for sub-block j of row r. q[p][v][4r + i] is byte 32p + 4v + i
// of row r's qs: codes 64p + 4v + i (low nibble) and 64p + 32 + 4v + i.
struct PackedQ4_K {
    float d[kRows];
    float dmin[kRows];
    uint8_t sc[8][kRows];
    uint8_t mn[8][kRows];
    uint8_t q[4][8][16];
};

// ql[h][a][v][4r + i] is byte 64h + 32a + 4v + i of row r's ql, qh[h][v][4r
// + i] byte 32h + 4v + i of its qh: together the codes 128h + 32m + 4v + i,
// m = 0..3, as in dwell_block_q6_K.
struct PackedQ6_K {
    float d[kRows];
    int8_t sc[16][kRows];
    uint8_t ql[2][2][8][16];
    uint8_t qh[2][8][16];
};

// Q5_0, Q4_1, Q5_1: the Q4_0 nibbles, the offset m where the format has one,
// and the fifth bits regrouped by vector: bit v of hb[4r + i] is the fifth
// bit of code 4v + i of row r, i.e. of lane 4r + i of the code vector v, so
// one shift per vector moves it into place.
struct PackedQ5_0 {
    float d[kRows];
    uint8_t hb[16];
    uint8_t q[4][16];
};

struct PackedQ4_1 {
    float d[kRows];
    float m[kRows];
    uint8_t q[4][16];
};

struct PackedQ5_1 {
    float d[kRows];
    float m[kRows];
    uint8_t hb[16];
    uint8_t q[4][16];
};

// Q4_K plus qh[v][4r + i], byte 4v + i of row r's qh: bit 2p holds the fifth
// bit of the low-nibble code of q[p][v][4r + i], bit 2p + 1 the high one's.
struct PackedQ5_K {
    float d[kRows];
    float dmin[kRows];
    uint8_t sc[8][kRows];
    uint8_t mn[8][kRows];
    uint8_t qh[8][16];
    uint8_t q[4][8][16];
};

static_assert(sizeof(PackedQ8_0) == 144 && sizeof(PackedQ4_0) == 80 && sizeof(PackedQ4_K) == 608 &&
              sizeof(PackedQ6_K) == 848);
static_assert(sizeof(PackedQ5_0) == 96 && sizeof(PackedQ4_1) == 96 && sizeof(PackedQ5_1) == 112 &&
              sizeof(PackedQ5_K) == 736);

// Which optional fields a packed 32-value layout has.
template <typename Packed>
constexpr bool kHasFifthBit = requires(const Packed& p) {
    p.hb;
};
template <typename Packed>
constexpr bool kHasMin = requires(const Packed& p) {
    p.m;
};

size_t round_up_64(size_t n) {
    return (n + 63) / 64 * 64;
}

// Row r's ggml block b, or all zeros for the padding rows r >= nr.
template <typename Block>
Block load_block(const void* w, size_t w_row_bytes, int nr, int r, int64_t b) {
    Block blk{};
    if (r < nr) {
        std::memcpy(&blk,
                    static_cast<const unsigned char*>(w) + r * w_row_bytes + b * sizeof(Block),
                    sizeof blk);
    }
    return blk;
}

// Byte 4v + i of src (one row) to byte 4r + i of dst[v], for v < n_vec.
void interleave(const uint8_t* src, int r, int n_vec, uint8_t (*dst)[16]) {
    for (int v = 0; v < n_vec; ++v) std::memcpy(&dst[v][4 * r], src + 4 * v, 4);
}

// The packed block of `Packed` per ggml block, one after another.
template <typename Packed, int64_t kBlock>
size_t block_bytes(int64_t k) {
    return static_cast<size_t>(k / kBlock) * sizeof(Packed);
}

// Every 32-value format (Src its ggml block, Packed the layout above): the
// codes keep their file bytes, so one loop serves whatever fields Packed has.
template <typename Src, typename Packed>
void pack_b32(const void* w, size_t w_row_bytes, int nr, int64_t k, void* out) {
    auto* dst = static_cast<Packed*>(out);
    for (int64_t b = 0; b < k / 32; ++b) {
        for (int r = 0; r < kRows; ++r) {
            const auto src = load_block<Src>(w, w_row_bytes, nr, r, b);
            dst[b].d[r] = dwell_fp16_to_fp32(src.d);
            if constexpr (kHasMin<Packed>) dst[b].m[r] = dwell_fp16_to_fp32(src.m);
            interleave(reinterpret_cast<const uint8_t*>(src.qs), r,
                       static_cast<int>(sizeof src.qs / 4),
                       reinterpret_cast<uint8_t(*)[16]>(dst[b].q));
            if constexpr (kHasFifthBit<Packed>) {
                const uint32_t qh = dwell_q5_high_bits(src.qh);
                for (int i = 0; i < 4; ++i) {
                    uint8_t bits = 0;
                    for (int v = 0; v < 8; ++v) {
                        bits = static_cast<uint8_t>(bits | ((qh >> (4 * v + i)) & 1u) << v);
                    }
                    dst[b].hb[4 * r + i] = bits;
                }
            }
        }
    }
}

// Q4_K and Q5_K (Packed PackedQ4_K or PackedQ5_K).
template <typename Src, typename Packed>
void pack_q45_K(const void* w, size_t w_row_bytes, int nr, int64_t k, void* out) {
    auto* dst = static_cast<Packed*>(out);
    for (int64_t b = 0; b < k / DWELL_QK_K; ++b) {
        for (int r = 0; r < kRows; ++r) {
            const auto src = load_block<Src>(w, w_row_bytes, nr, r, b);
            dst[b].d[r] = dwell_fp16_to_fp32(src.d);
            dst[b].dmin[r] = dwell_fp16_to_fp32(src.dmin);
            for (int j = 0; j < 8; ++j) {
                dwell_k_scale_min(src.scales, j, &dst[b].sc[j][r], &dst[b].mn[j][r]);
            }
            for (int p = 0; p < 4; ++p) interleave(src.qs + 32 * p, r, 8, dst[b].q[p]);
            if constexpr (std::is_same_v<Packed, PackedQ5_K>) interleave(src.qh, r, 8, dst[b].qh);
        }
    }
}

void pack_q6_K(const void* w, size_t w_row_bytes, int nr, int64_t k, void* out) {
    auto* dst = static_cast<PackedQ6_K*>(out);
    for (int64_t b = 0; b < k / DWELL_QK_K; ++b) {
        for (int r = 0; r < kRows; ++r) {
            const auto src = load_block<dwell_block_q6_K>(w, w_row_bytes, nr, r, b);
            dst[b].d[r] = dwell_fp16_to_fp32(src.d);
            for (int s = 0; s < 16; ++s) dst[b].sc[s][r] = src.scales[s];
            for (int h = 0; h < 2; ++h) {
                for (int a = 0; a < 2; ++a) {
                    interleave(src.ql + 64 * h + 32 * a, r, 8, dst[b].ql[h][a]);
                }
                interleave(src.qh + 32 * h, r, 8, dst[b].qh[h]);
            }
        }
    }
}

// Q8_0 activation row: k codes, then k / 32 float scales.
size_t act_bytes_q8_0(int64_t k) {
    return round_up_64(static_cast<size_t>(k) + static_cast<size_t>(k / DWELL_QK8_0) * 4);
}

void quantize_q8_0(const float* x, int64_t k, void* out) {
    auto* q = static_cast<int8_t*>(out);
    auto* d = reinterpret_cast<float*>(q + k);
    for (int64_t b = 0; b < k / DWELL_QK8_0; ++b) {
        dwell_block_q8_0 blk;
        quantize_act_q8_0(x + b * DWELL_QK8_0, &blk, DWELL_QK8_0);
        std::memcpy(q + b * DWELL_QK8_0, blk.qs, DWELL_QK8_0);
        d[b] = dwell_fp16_to_fp32(blk.d);
    }
}

// Q8_1 activation row: k codes, then k / 32 float scales d, then k / 32
// float sums s.
size_t act_bytes_q8_1(int64_t k) {
    return round_up_64(static_cast<size_t>(k) + static_cast<size_t>(k / DWELL_QK8_0) * 8);
}

void quantize_q8_1(const float* x, int64_t k, void* out) {
    const int64_t nb = k / DWELL_QK8_0;
    auto* q = static_cast<int8_t*>(out);
    auto* d = reinterpret_cast<float*>(q + k);
    for (int64_t b = 0; b < nb; ++b) {
        ActBlockQ8_1 blk;
        quantize_act_q8_1(x + b * DWELL_QK8_0, &blk, DWELL_QK8_0);
        std::memcpy(q + b * DWELL_QK8_0, blk.qs, DWELL_QK8_0);
        d[b] = dwell_fp16_to_fp32(blk.d);
        d[nb + b] = dwell_fp16_to_fp32(blk.s);
    }
}

size_t act_bytes_q8_K(int64_t k) {
    return round_up_64(static_cast<size_t>(k / DWELL_QK_K) * sizeof(ActBlockQ8_K));
}

void quantize_q8_K(const float* x, int64_t k, void* out) {
    quantize_act_q8_K(x, static_cast<ActBlockQ8_K*>(out), k);
}

const unsigned char* act_row(const void* acts, size_t act_stride, int c) {
    return static_cast<const unsigned char*>(acts) + c * act_stride;
}

// Calls body(std::integral_constant<int, nc>) so the tile's column loops
// have a constant trip count and their arrays stay in registers.
template <class Body>
void for_cols(int nc, Body&& body) {
    static_assert(kCols == 4);
    switch (nc) {
        case 1:
            body(std::integral_constant<int, 1>{});
            break;
        case 2:
            body(std::integral_constant<int, 2>{});
            break;
        case 3:
            body(std::integral_constant<int, 3>{});
            break;
        default:
            body(std::integral_constant<int, 4>{});
            break;
    }
}

template <int NC>
void store(const float32x4_t (&sum)[NC], int nr, float* out, size_t out_stride) {
    for (int c = 0; c < NC; ++c) {
        float* o = out + c * out_stride;
        if (nr == kRows) {
            vst1q_f32(o, sum[c]);
        } else {
            float lanes[kRows];
            vst1q_f32(lanes, sum[c]);
            for (int r = 0; r < nr; ++r) o[r] = lanes[r];
        }
    }
}

// 4 unsigned bytes (one per row) widened to int32 lanes.
int32x4_t widen_u8x4(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(v)))));
}

int32x4_t widen_s8x4(const int8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return vmovl_s16(vget_low_s16(vmovl_s8(vcreate_s8(v))));
}

// An Engine provides
//   template <int K, int NC> static void dot(const int8x16_t* v,
//                                            const int8_t* const* x, int32x4_t* out);
// setting, for each column c < NC, lane r of out[c] to the exact sum over
// 4K codes of row r (in K vectors v laid out as above) times x[c][0..4K).
// K is a multiple of 4, NC at most kCols.

#if defined(__ARM_FEATURE_DOTPROD)
// The SDOT engine's product (both including files are built with dotprod):
// SDOT with a broadcast lane multiplies 4 codes of each of the 4 rows by the
// same 4 activation bytes.
template <int K, int NC>
void sdot_columns(const int8x16_t* v, const int8_t* const* x, int32x4_t* out) {
    static_assert(K % 4 == 0 && NC <= kCols);
    for (int c = 0; c < NC; ++c) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int q = 0; q < K / 4; ++q) {
            // Activation bytes 16q..16q+15: group g of them meets v[4q + g].
            const int8x16_t xv = vld1q_s8(x[c] + 16 * q);
            acc = vdotq_laneq_s32(acc, v[4 * q + 0], xv, 0);
            acc = vdotq_laneq_s32(acc, v[4 * q + 1], xv, 1);
            acc = vdotq_laneq_s32(acc, v[4 * q + 2], xv, 2);
            acc = vdotq_laneq_s32(acc, v[4 * q + 3], xv, 3);
        }
        out[c] = acc;
    }
}
#endif

// The tiles below follow one pattern: for_cols fixes NC = nc, each ggml
// block's codes are unpacked once into int8 vectors shared by every column,
// and the float epilogue is the scalar dot's expression.

// Every 32-value format: Q8_0's codes as they are; the others' from nibbles,
// with Q5's fifth bits on top, offset by 8 (Q4_0) or 16 (Q5_0) or left
// unsigned with an m (Q4_1, Q5_1). Q8_0 and Q5_0 take Q8_0 activations,
// Q4_1 and Q5_1 Q8_1 ones. The epilogues keep each scalar dot's float order.
template <class Engine, class Packed>
void tile_b32(int64_t k, const void* block, int nr, const void* acts, size_t act_stride, int nc,
              float* out, size_t out_stride) {
    constexpr bool kQ8 = std::is_same_v<Packed, PackedQ8_0>;
    constexpr bool kQ4_0 = std::is_same_v<Packed, PackedQ4_0>;
    constexpr bool kFive = kHasFifthBit<Packed>;
    constexpr bool kMin = kHasMin<Packed>;
    for_cols(nc, [&](auto cols) {
        constexpr int NC = cols;
        const int64_t nb = k / 32;
        const auto* w = static_cast<const Packed*>(block);
        const uint8x16_t low4 = vdupq_n_u8(0x0f);
        const uint8x16_t bit4 = vdupq_n_u8(0x10);
        const int8x16_t offset = vdupq_n_s8(kQ4_0 ? 8 : 16);
        const int8_t* xq[NC];
        const float* xd[NC];
        for (int c = 0; c < NC; ++c) {
            xq[c] = reinterpret_cast<const int8_t*>(act_row(acts, act_stride, c));
            xd[c] = reinterpret_cast<const float*>(xq[c] + k);
        }
        float32x4_t sum[NC];
        for (auto& s : sum) s = vdupq_n_f32(0.0f);
        for (int64_t b = 0; b < nb; ++b) {
            const Packed& wb = w[b];
            int8x16_t v[8];
            if constexpr (kQ8) {
                for (int g = 0; g < 8; ++g) v[g] = vld1q_s8(wb.q[g]);
            } else {
                // Vector g holds codes 4g..4g+3 of each row: low nibbles for
                // g < 4, high nibbles after, fifth bit g of hb on top.
                uint8x16_t hb = vdupq_n_u8(0);
                if constexpr (kFive) hb = vld1q_u8(wb.hb);
                uint8x16_t u[8];
                for (int g = 0; g < 4; ++g) {
                    const uint8x16_t q = vld1q_u8(wb.q[g]);
                    u[g] = vandq_u8(q, low4);
                    u[g + 4] = vshrq_n_u8(q, 4);
                }
                for (int g = 0; g < 8; ++g) {
                    if constexpr (kFive) {
                        const int8x16_t to_bit4 = vdupq_n_s8(static_cast<int8_t>(4 - g));
                        u[g] = vbslq_u8(bit4, vshlq_u8(hb, to_bit4), u[g]);
                    }
                    v[g] = vreinterpretq_s8_u8(u[g]);
                    if constexpr (!kMin) v[g] = vsubq_s8(v[g], offset);
                }
            }
            const int8_t* x[NC];
            for (int c = 0; c < NC; ++c) x[c] = xq[c] + b * 32;
            int32x4_t sumi[NC];
            Engine::template dot<8, NC>(v, x, sumi);
            const float32x4_t dw = vld1q_f32(wb.d);
            for (int c = 0; c < NC; ++c) {
                float32x4_t p;
                if constexpr (kQ8) {
                    // dot_q8_0_q8_0: sumi * (d_w * d_x).
                    p = vmulq_f32(vcvtq_f32_s32(sumi[c]), vmulq_n_f32(dw, xd[c][b]));
                } else if constexpr (kQ4_0) {
                    // dot_q4_0_q8_0: sumi * d_w * d_x, left to right.
                    p = vmulq_n_f32(vmulq_f32(vcvtq_f32_s32(sumi[c]), dw), xd[c][b]);
                } else {
                    // dot_q5_0_q8_0: (d_w * d_x) * sumi; dot_q4_1_q8_1 and
                    // dot_q5_1_q8_1 add m_w * s_x.
                    p = vmulq_f32(vmulq_n_f32(dw, xd[c][b]), vcvtq_f32_s32(sumi[c]));
                    if constexpr (kMin)
                        p = vaddq_f32(p, vmulq_n_f32(vld1q_f32(wb.m), xd[c][nb + b]));
                }
                sum[c] = vaddq_f32(sum[c], p);
            }
        }
        store(sum, nr, out, out_stride);
    });
}

// Q4_K and Q5_K.
template <class Engine, class Packed>
void tile_q45_K(int64_t k, const void* block, int nr, const void* acts, size_t act_stride, int nc,
                float* out, size_t out_stride) {
    constexpr bool kFive = std::is_same_v<Packed, PackedQ5_K>;
    for_cols(nc, [&](auto cols) {
        constexpr int NC = cols;
        const int64_t nb = k / DWELL_QK_K;
        const auto* w = static_cast<const Packed*>(block);
        const uint8x16_t low4 = vdupq_n_u8(0x0f);
        const uint8x16_t bit4 = vdupq_n_u8(0x10);
        const ActBlockQ8_K* xa[NC];
        for (int c = 0; c < NC; ++c) {
            xa[c] = reinterpret_cast<const ActBlockQ8_K*>(act_row(acts, act_stride, c));
        }
        float32x4_t sum[NC];
        for (auto& s : sum) s = vdupq_n_f32(0.0f);
        for (int64_t b = 0; b < nb; ++b) {
            const Packed& wb = w[b];
            int32x4_t sumi[NC], summ[NC];
            for (int c = 0; c < NC; ++c) sumi[c] = summ[c] = vdupq_n_s32(0);
            for (int p = 0; p < 4; ++p) {
                // Sub-block 2p from the low nibbles, 2p + 1 from the high ones.
                int8x16_t lo[8], hi[8];
                for (int v = 0; v < 8; ++v) {
                    const uint8x16_t q = vld1q_u8(wb.q[p][v]);
                    uint8x16_t l = vandq_u8(q, low4);
                    uint8x16_t h = vshrq_n_u8(q, 4);
                    if constexpr (kFive) {
                        // Bits 2p and 2p + 1 of qh become bit 4 of each code.
                        const uint8x16_t qh = vld1q_u8(wb.qh[v]);
                        l = vbslq_u8(bit4, vshlq_u8(qh, vdupq_n_s8(static_cast<int8_t>(4 - 2 * p))),
                                     l);
                        h = vbslq_u8(bit4, vshlq_u8(qh, vdupq_n_s8(static_cast<int8_t>(3 - 2 * p))),
                                     h);
                    }
                    lo[v] = vreinterpretq_s8_u8(l);
                    hi[v] = vreinterpretq_s8_u8(h);
                }
                const int8_t* xl[NC];
                const int8_t* xh[NC];
                for (int c = 0; c < NC; ++c) {
                    xl[c] = xa[c][b].qs + 64 * p;
                    xh[c] = xl[c] + 32;
                }
                int32x4_t dl[NC], dh[NC];
                Engine::template dot<8, NC>(lo, xl, dl);
                Engine::template dot<8, NC>(hi, xh, dh);
                const int32x4_t sc_l = widen_u8x4(wb.sc[2 * p]);
                const int32x4_t sc_h = widen_u8x4(wb.sc[2 * p + 1]);
                for (int c = 0; c < NC; ++c) {
                    sumi[c] = vmlaq_s32(sumi[c], dl[c], sc_l);
                    sumi[c] = vmlaq_s32(sumi[c], dh[c], sc_h);
                }
            }
            for (int j = 0; j < 8; ++j) {
                const int32x4_t mn = widen_u8x4(wb.mn[j]);
                for (int c = 0; c < NC; ++c) {
                    const int16_t* bs = xa[c][b].bsums;
                    summ[c] = vmlaq_n_s32(summ[c], mn, bs[2 * j] + bs[2 * j + 1]);
                }
            }
            const float32x4_t d = vld1q_f32(wb.d);
            const float32x4_t dmin = vld1q_f32(wb.dmin);
            for (int c = 0; c < NC; ++c) {
                // k_block_dot: d * x.d * sumi - dmin * x.d * summ.
                const float xd = xa[c][b].d;
                const float32x4_t t = vmulq_f32(vmulq_n_f32(d, xd), vcvtq_f32_s32(sumi[c]));
                const float32x4_t m = vmulq_f32(vmulq_n_f32(dmin, xd), vcvtq_f32_s32(summ[c]));
                sum[c] = vaddq_f32(sum[c], vsubq_f32(t, m));
            }
        }
        store(sum, nr, out, out_stride);
    });
}

template <class Engine>
void tile_q6_K(int64_t k, const void* block, int nr, const void* acts, size_t act_stride, int nc,
               float* out, size_t out_stride) {
    for_cols(nc, [&](auto cols) {
        constexpr int NC = cols;
        const int64_t nb = k / DWELL_QK_K;
        const auto* w = static_cast<const PackedQ6_K*>(block);
        const uint8x16_t low4 = vdupq_n_u8(0x0f);
        const uint8x16_t bits54 = vdupq_n_u8(0x30);
        const int8x16_t k32 = vdupq_n_s8(32);
        const ActBlockQ8_K* xa[NC];
        for (int c = 0; c < NC; ++c) {
            xa[c] = reinterpret_cast<const ActBlockQ8_K*>(act_row(acts, act_stride, c));
        }
        float32x4_t sum[NC];
        for (auto& s : sum) s = vdupq_n_f32(0.0f);
        for (int64_t b = 0; b < nb; ++b) {
            const PackedQ6_K& wb = w[b];
            int32x4_t sumi[NC];
            for (auto& s : sumi) s = vdupq_n_s32(0);
            for (int h = 0; h < 2; ++h) {
                for (int m = 0; m < 4; ++m) {
                    // Codes 128h + 32m + 0..31: sub-blocks 8h + 2m and 8h + 2m + 1.
                    int8x16_t code[8];
                    for (int v = 0; v < 8; ++v) {
                        const uint8x16_t l = vld1q_u8(wb.ql[h][m % 2][v]);
                        const uint8x16_t hb = vld1q_u8(wb.qh[h][v]);
                        const uint8x16_t nib = m < 2 ? vandq_u8(l, low4) : vshrq_n_u8(l, 4);
                        // Bits 2m, 2m + 1 of qh become bits 4, 5 of the code.
                        const uint8x16_t top = vandq_u8(
                            vshlq_u8(hb, vdupq_n_s8(static_cast<int8_t>(4 - 2 * m))), bits54);
                        code[v] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(nib, top)), k32);
                    }
                    const int e = 128 * h + 32 * m;
                    const int8_t* x0[NC];
                    const int8_t* x1[NC];
                    for (int c = 0; c < NC; ++c) {
                        x0[c] = xa[c][b].qs + e;
                        x1[c] = x0[c] + 16;
                    }
                    int32x4_t d0[NC], d1[NC];
                    Engine::template dot<4, NC>(code, x0, d0);
                    Engine::template dot<4, NC>(code + 4, x1, d1);
                    const int32x4_t sc0 = widen_s8x4(wb.sc[e / 16]);
                    const int32x4_t sc1 = widen_s8x4(wb.sc[e / 16 + 1]);
                    for (int c = 0; c < NC; ++c) {
                        sumi[c] = vmlaq_s32(sumi[c], d0[c], sc0);
                        sumi[c] = vmlaq_s32(sumi[c], d1[c], sc1);
                    }
                }
            }
            const float32x4_t d = vld1q_f32(wb.d);
            for (int c = 0; c < NC; ++c) {
                // dot_q6_K_q8_K: d * x.d * sumi.
                const float32x4_t p = vmulq_f32(vmulq_n_f32(d, xa[c][b].d), vcvtq_f32_s32(sumi[c]));
                sum[c] = vaddq_f32(sum[c], p);
            }
        }
        store(sum, nr, out, out_stride);
    });
}

// The kernel table of one level; nullptr for dtypes without a kernel.
// Engine::kNames names the Q4_0, Q8_0, Q4_K, Q6_K, Q5_0, Q4_1, Q5_1 and Q5_K
// kernels.
template <class Engine>
const GemmKernel* kernel_for(dwell_dtype t) {
    const auto& names = Engine::kNames;
    static_assert(std::size(Engine::kNames) == 8);
    static const GemmKernel kernels[] = {
        {names[0], DWELL_Q4_0, kRows, kCols, DWELL_QK4_0, &block_bytes<PackedQ4_0, DWELL_QK4_0>,
         &pack_b32<dwell_block_q4_0, PackedQ4_0>, &act_bytes_q8_0, &quantize_q8_0,
         &tile_b32<Engine, PackedQ4_0>},
        {names[1], DWELL_Q8_0, kRows, kCols, DWELL_QK8_0, &block_bytes<PackedQ8_0, DWELL_QK8_0>,
         &pack_b32<dwell_block_q8_0, PackedQ8_0>, &act_bytes_q8_0, &quantize_q8_0,
         &tile_b32<Engine, PackedQ8_0>},
        {names[2], DWELL_Q4_K, kRows, kCols, DWELL_QK_K, &block_bytes<PackedQ4_K, DWELL_QK_K>,
         &pack_q45_K<dwell_block_q4_K, PackedQ4_K>, &act_bytes_q8_K, &quantize_q8_K,
         &tile_q45_K<Engine, PackedQ4_K>},
        {names[3], DWELL_Q6_K, kRows, kCols, DWELL_QK_K, &block_bytes<PackedQ6_K, DWELL_QK_K>,
         &pack_q6_K, &act_bytes_q8_K, &quantize_q8_K, &tile_q6_K<Engine>},
        {names[4], DWELL_Q5_0, kRows, kCols, DWELL_QK5_0, &block_bytes<PackedQ5_0, DWELL_QK5_0>,
         &pack_b32<dwell_block_q5_0, PackedQ5_0>, &act_bytes_q8_0, &quantize_q8_0,
         &tile_b32<Engine, PackedQ5_0>},
        {names[5], DWELL_Q4_1, kRows, kCols, DWELL_QK4_1, &block_bytes<PackedQ4_1, DWELL_QK4_1>,
         &pack_b32<dwell_block_q4_1, PackedQ4_1>, &act_bytes_q8_1, &quantize_q8_1,
         &tile_b32<Engine, PackedQ4_1>},
        {names[6], DWELL_Q5_1, kRows, kCols, DWELL_QK5_1, &block_bytes<PackedQ5_1, DWELL_QK5_1>,
         &pack_b32<dwell_block_q5_1, PackedQ5_1>, &act_bytes_q8_1, &quantize_q8_1,
         &tile_b32<Engine, PackedQ5_1>},
        {names[7], DWELL_Q5_K, kRows, kCols, DWELL_QK_K, &block_bytes<PackedQ5_K, DWELL_QK_K>,
         &pack_q45_K<dwell_block_q5_K, PackedQ5_K>, &act_bytes_q8_K, &quantize_q8_K,
         &tile_q45_K<Engine, PackedQ5_K>},
    };
    for (const GemmKernel& kn : kernels) {
        if (kn.weight == t) return &kn;
    }
    return nullptr;
}

}  // namespace
}  // namespace dwell::cpu::neon_gemm

#endif  // defined(__aarch64__)
