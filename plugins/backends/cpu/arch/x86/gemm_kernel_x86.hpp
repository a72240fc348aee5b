// Layouts shared by the x86 blocked kernels (gemm_kernel_avx2.cpp,
// gemm_kernel_avx512.cpp): weight repacking and activation quantization,
// plain C++ with no intrinsics.
//
// Weight layout: one vector lane (32 bits) per weight row, L lanes per
// vector and RV vectors side by side, so a block holds R = L * RV rows. Each
// lane carries 4 consecutive quant bytes of its row; the kernel multiplies
// them with 4 activation bytes broadcast to every lane (vpdpbusd or
// pmaddubsw + pmaddwd), so every lane accumulates its own row's integer dot
// with no horizontal sums and the per-row scales are loaded as one vector.
// Rows past nr are zero (zero quants and zero scales), so padded lanes
// compute 0 and are never stored.
//
// Activation layouts keep ggml's numbers (the reference quantizers are
// called as they are) and only move them: the int8 values first, then per
// block the scale as f32 and the integer sums the weight offsets need.
//
// Everything sits in an anonymous namespace: each SIMD translation unit gets
// its own copy compiled with its own target flags, so no inline function
// compiled for AVX-512 can be picked by the linker for the AVX2 file.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "dwell/quant.h"
#include "dwell/tensor.h"
#include "quant/activation_quant.hpp"

namespace dwell::cpu::x86 {
namespace {

inline size_t round_up_64(size_t n) {
    return (n + 63) / 64 * 64;
}

inline const unsigned char* byte_ptr(const void* p) {
    return static_cast<const unsigned char*>(p);
}

// ---------------------------------------------------------------------------
// Activations, Q8_0 numbers: q[k] int8 | d[k/32] f32 | s[k/32] int32, where
// s = -offset * sum(q of the block). A weight stored as the unsigned code
// q_w + offset then gives sum((q_w) * x) = sum(code * x) + s exactly.

struct ActQ8_0 {
    static int64_t blocks(int64_t k) { return k / DWELL_QK8_0; }
    static size_t bytes(int64_t k) {
        return round_up_64(static_cast<size_t>(k) + 8 * static_cast<size_t>(blocks(k)));
    }
    static const int8_t* q(const void* a) { return static_cast<const int8_t*>(a); }
    static const float* d(const void* a, int64_t k) {
        return reinterpret_cast<const float*>(byte_ptr(a) + k);
    }
    static const int32_t* s(const void* a, int64_t k) {
        return reinterpret_cast<const int32_t*>(byte_ptr(a) + k + 4 * blocks(k));
    }
};

template <int Offset>
void quantize_act_q8_0_lanes(const float* x, int64_t k, void* out) {
    auto* base = static_cast<unsigned char*>(out);
    auto* q = reinterpret_cast<int8_t*>(base);
    auto* d = reinterpret_cast<float*>(base + k);
    auto* s = reinterpret_cast<int32_t*>(base + k + 4 * ActQ8_0::blocks(k));
    // The shared quantizer in chunks, so the numbers are quantize_act_q8_0's
    // by construction.
    constexpr int64_t kChunk = 64;
    dwell_block_q8_0 tmp[kChunk];
    const int64_t nb = ActQ8_0::blocks(k);
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
        const int64_t n = std::min(kChunk, nb - b0);
        quantize_act_q8_0(x + b0 * DWELL_QK8_0, tmp, n * DWELL_QK8_0);
        for (int64_t i = 0; i < n; ++i) {
            const int64_t b = b0 + i;
            std::memcpy(q + b * DWELL_QK8_0, tmp[i].qs, DWELL_QK8_0);
            d[b] = dwell_fp16_to_fp32(tmp[i].d);
            int32_t sum = 0;
            for (int j = 0; j < DWELL_QK8_0; ++j) sum += tmp[i].qs[j];
            s[b] = -Offset * sum;
        }
    }
    const size_t used = static_cast<size_t>(k) + 8 * static_cast<size_t>(nb);
    std::memset(base + used, 0, ActQ8_0::bytes(k) - used);
}

// ---------------------------------------------------------------------------
// Activations, Q8_1 numbers: ActQ8_0's shape, with s[k/32] holding ggml's
// f32 value of the fp16 s = fp16(d_f32 * sum(q)) instead of an integer sum
// (Q4_1 / Q5_1 take their min term m * s in float).
struct ActQ8_1 : ActQ8_0 {
    static const float* s(const void* a, int64_t k) {
        return reinterpret_cast<const float*>(byte_ptr(a) + k + 4 * blocks(k));
    }
};

inline void quantize_act_q8_1_lanes(const float* x, int64_t k, void* out) {
    auto* base = static_cast<unsigned char*>(out);
    const int64_t nb = ActQ8_0::blocks(k);
    auto* d = reinterpret_cast<float*>(base + k);
    auto* s = reinterpret_cast<float*>(base + k + 4 * nb);
    constexpr int64_t kChunk = 64;
    ActBlockQ8_1 tmp[kChunk];
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
        const int64_t n = std::min(kChunk, nb - b0);
        quantize_act_q8_1(x + b0 * DWELL_QK8_0, tmp, n * DWELL_QK8_0);
        for (int64_t i = 0; i < n; ++i) {
            std::memcpy(base + (b0 + i) * DWELL_QK8_0, tmp[i].qs, DWELL_QK8_0);
            d[b0 + i] = dwell_fp16_to_fp32(tmp[i].d);
            s[b0 + i] = dwell_fp16_to_fp32(tmp[i].s);
        }
    }
    const size_t used = static_cast<size_t>(k) + 8 * static_cast<size_t>(nb);
    std::memset(base + used, 0, ActQ8_0::bytes(k) - used);
}

// ---------------------------------------------------------------------------
// Activations, Q8_K numbers: q[k] int8 | d[k/256] f32 | neg32[k/256][16]
// int32 (-32 * each 16-value sum, Q6_K's code offset) | pairs[k/256][4]
// int32 (the 32-value sums of sub-blocks 2i and 2i+1 as two int16, for a
// 16-bit multiply-add with two Q4_K mins) | negpairs[k/256][8] int32 (minus
// the 16-value sums 2i and 2i+1 as two int16: a pmaddwd with the Q6_K scales
// of those sub-blocks gives their share of the code offset divided by 32,
// since -32 * sum itself can overflow int16).

struct ActQ8_K {
    static int64_t blocks(int64_t k) { return k / DWELL_QK_K; }
    static size_t bytes(int64_t k) {
        return round_up_64(static_cast<size_t>(k) + kMetaBytes * static_cast<size_t>(blocks(k)));
    }
    static constexpr size_t kMetaBytes = 116;
    static const int8_t* q(const void* a) { return static_cast<const int8_t*>(a); }
    static const float* d(const void* a, int64_t k) {
        return reinterpret_cast<const float*>(byte_ptr(a) + k);
    }
    static const int32_t* neg32(const void* a, int64_t k) {
        return reinterpret_cast<const int32_t*>(byte_ptr(a) + k + 4 * blocks(k));
    }
    static const int32_t* pairs(const void* a, int64_t k) {
        return reinterpret_cast<const int32_t*>(byte_ptr(a) + k + 68 * blocks(k));
    }
    static const int32_t* negpairs(const void* a, int64_t k) {
        return reinterpret_cast<const int32_t*>(byte_ptr(a) + k + 84 * blocks(k));
    }
};

// The sums every Q8_K layout carries, from the 16 16-value sums of block b.
inline void put_q8_K_sums(const int32_t (&bsum)[16], int64_t b, int64_t nb, unsigned char* meta) {
    auto* neg32 = reinterpret_cast<int32_t*>(meta + 4 * nb);
    auto* pairs = reinterpret_cast<uint32_t*>(meta + 68 * nb);
    auto* negpairs = reinterpret_cast<uint32_t*>(meta + 84 * nb);
    for (int s = 0; s < 16; ++s) neg32[16 * b + s] = -32 * bsum[s];
    for (int i = 0; i < 8; ++i) {
        negpairs[8 * b + i] =
            static_cast<uint32_t>(static_cast<uint16_t>(-bsum[2 * i])) |
            (static_cast<uint32_t>(static_cast<uint16_t>(-bsum[2 * i + 1])) << 16);
    }
    for (int i = 0; i < 4; ++i) {
        const int lo = bsum[4 * i] + bsum[4 * i + 1];
        const int hi = bsum[4 * i + 2] + bsum[4 * i + 3];
        pairs[4 * b + i] = static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                           (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16);
    }
}

inline void quantize_act_q8_K_lanes(const float* x, int64_t k, void* out) {
    auto* base = static_cast<unsigned char*>(out);
    const int64_t nb = ActQ8_K::blocks(k);
    auto* q = reinterpret_cast<int8_t*>(base);
    auto* d = reinterpret_cast<float*>(base + k);
    ActBlockQ8_K tmp;
    for (int64_t b = 0; b < nb; ++b) {
        quantize_act_q8_K(x + b * DWELL_QK_K, &tmp, DWELL_QK_K);
        std::memcpy(q + b * DWELL_QK_K, tmp.qs, DWELL_QK_K);
        d[b] = tmp.d;
        int32_t bsum[16];
        for (int s = 0; s < 16; ++s) bsum[s] = tmp.bsums[s];
        put_q8_K_sums(bsum, b, nb, base + k);
    }
    const size_t used = static_cast<size_t>(k) + ActQ8_K::kMetaBytes * static_cast<size_t>(nb);
    std::memset(base + used, 0, ActQ8_K::bytes(k) - used);
}

// ---------------------------------------------------------------------------
// Weights. `Lanes` rows per vector, RV vectors: R = Lanes * RV rows a block.
// Vector v of a group holds, in lane l, 4 bytes of row (v % RV) * Lanes + l;
// within a block every layout below is [position][rv][lane][4 bytes].

// Copies 4 bytes of each of the R rows at src_offset (row r's bytes at
// w + r * row_bytes + src_offset, zero for r >= nr) into one group of RV
// vectors at dst, optionally flipping the sign bit (int8 -> uint8 + 128).
template <int R, bool Flip = false>
inline void put_lanes(const unsigned char* w, size_t row_bytes, int nr, size_t src_offset,
                      unsigned char* dst) {
    for (int r = 0; r < R; ++r) {
        uint32_t v = 0;
        if (r < nr) std::memcpy(&v, w + r * row_bytes + src_offset, 4);
        if (Flip) v ^= 0x80808080u;
        std::memcpy(dst + 4 * r, &v, 4);
    }
}

inline uint16_t load_u16(const unsigned char* p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Q4_0 and Q8_0, whose blocks are an fp16 d then the quants: quants
// [block][j][R lanes][4 bytes] (bytes 4j..4j+3 of the block's qs; Q4_0's
// low nibbles are elements 4j.., high nibbles 16 + 4j..; Q8_0's sign bit
// flipped when Flip so they read as uint8 q + 128) and the scales [block][R]
// fp16. With G = 0 the scales follow all the quants in their own 64-byte
// aligned region; with G > 0 every group of G blocks is its quants then its
// scales padded to 64 bytes, so one-token decode reads a single stream.
template <int R, typename Block, bool Flip, int G = 0>
struct PackD16 {
    static constexpr int kQsBytes = sizeof(Block::qs);
    static constexpr size_t kQuantBytes = kQsBytes * R;  // per block of 32
    static constexpr size_t kScaleBytes = 2 * R;         // per block of 32
    static constexpr size_t kGroupBytes = G * kQuantBytes + (G * kScaleBytes + 63) / 64 * 64;
    // Bytes of the stream per block, on average.
    static constexpr size_t kStreamBytes = G > 0 ? kGroupBytes / G : kQuantBytes;
    static size_t quant_offset(int64_t b) {
        const auto ub = static_cast<size_t>(b);
        if constexpr (G > 0) return ub / G * kGroupBytes + ub % G * kQuantBytes;
        return ub * kQuantBytes;
    }
    static size_t scale_offset(int64_t k, int64_t b) {
        const auto ub = static_cast<size_t>(b);
        if constexpr (G > 0) return ub / G * kGroupBytes + G * kQuantBytes + ub % G * kScaleBytes;
        return static_cast<size_t>(k / 32) * kQuantBytes + ub * kScaleBytes;
    }
    static size_t bytes(int64_t k) {
        const auto nb = static_cast<size_t>(k / 32);
        if constexpr (G > 0) return (nb + G - 1) / G * kGroupBytes;
        return nb * kQuantBytes + round_up_64(nb * kScaleBytes);
    }
    static void pack(const void* w, size_t row_bytes, int nr, int64_t k, void* out) {
        const auto* src = byte_ptr(w);
        auto* dst = static_cast<unsigned char*>(out);
        std::memset(dst, 0, bytes(k));
        for (int64_t b = 0; b < k / 32; ++b) {
            const size_t blk = static_cast<size_t>(b) * sizeof(Block);
            for (int j = 0; j < kQsBytes / 4; ++j) {
                put_lanes<R, Flip>(src, row_bytes, nr, blk + offsetof(Block, qs) + 4 * j,
                                   dst + quant_offset(b) + j * 4 * R);
            }
            for (int r = 0; r < nr; ++r) {
                std::memcpy(dst + scale_offset(k, b) + r * 2, src + r * row_bytes + blk, 2);
            }
        }
    }
};

template <int R, int G = 0>
using PackQ4_0 = PackD16<R, dwell_block_q4_0, false, G>;
template <int R, bool Flip, int G = 0>
using PackQ8_0 = PackD16<R, dwell_block_q8_0, Flip, G>;

// Q4_1, Q5_0 and Q5_1, per block of 32: nibbles [j = 0..3][R][4] (the
// file's qs bytes 4j..4j+3: low nibbles elements 4j.., high ones 16 + 4j..),
// for 5-bit codes followed by the fifth bits [R][4]: bit 2j of byte t is
// element 4j + t's, bit 2j + 1 element 16 + 4j + t's, so code vector i
// (i = 2j low nibbles, 2j + 1 high ones) finds its bits at bit i of every
// byte. Then d [block][R] fp16 and, with a min, m [block][R] fp16, each in
// its own 64-byte aligned region.
template <int R, typename Block, bool Five, bool Min>
struct PackB32 {
    static constexpr size_t kQuantBytes = (Five ? 20 : 16) * R;
    static size_t region(int64_t k) { return round_up_64(static_cast<size_t>(k / 32) * 2 * R); }
    static size_t d_offset(int64_t k) { return round_up_64((k / 32) * kQuantBytes); }
    static size_t m_offset(int64_t k) { return d_offset(k) + region(k); }
    static size_t bytes(int64_t k) { return m_offset(k) + (Min ? region(k) : 0); }
    static void pack(const void* w, size_t row_bytes, int nr, int64_t k, void* out) {
        const auto* src = byte_ptr(w);
        auto* dst = static_cast<unsigned char*>(out);
        std::memset(dst, 0, bytes(k));
        for (int64_t b = 0; b < k / 32; ++b) {
            const size_t blk = static_cast<size_t>(b) * sizeof(Block);
            unsigned char* q = dst + b * kQuantBytes;
            for (int j = 0; j < 4; ++j) {
                put_lanes<R>(src, row_bytes, nr, blk + offsetof(Block, qs) + 4 * j, q + j * 4 * R);
            }
            for (int r = 0; r < nr; ++r) {
                const unsigned char* row = src + r * row_bytes + blk;
                if constexpr (Five) {
                    uint8_t qh[4];
                    std::memcpy(qh, row + offsetof(Block, qh), 4);
                    const uint32_t h = dwell_q5_high_bits(qh);
                    for (int t = 0; t < 4; ++t) {
                        uint8_t v = 0;
                        for (int j = 0; j < 4; ++j) {
                            v |= static_cast<uint8_t>(((h >> (4 * j + t)) & 1u) << (2 * j));
                            v |=
                                static_cast<uint8_t>(((h >> (16 + 4 * j + t)) & 1u) << (2 * j + 1));
                        }
                        q[16 * R + 4 * r + t] = v;
                    }
                }
                std::memcpy(dst + d_offset(k) + (b * R + r) * 2, row + offsetof(Block, d), 2);
                if constexpr (Min) {
                    std::memcpy(dst + m_offset(k) + (b * R + r) * 2, row + offsetof(Block, m), 2);
                }
            }
        }
    }
};

template <int R>
using PackQ4_1 = PackB32<R, dwell_block_q4_1, false, true>;
template <int R>
using PackQ5_0 = PackB32<R, dwell_block_q5_0, true, false>;
template <int R>
using PackQ5_1 = PackB32<R, dwell_block_q5_1, true, true>;

// Q4_K and Q5_K, per super-block of 256: quants [p = 0..3][j = 0..7][R][4]
// (bytes 32p + 4j.. of qs: low nibbles are sub-block 2p, high ones 2p + 1);
// for Q5_K the fifth bits follow as [p][h = 0..1][R][4], bit 2(j % 4) of
// byte t holding element 64p + 4j + t's and bit 2(j % 4) + 1 element
// 64p + 32 + 4j + t's for j in 4h..4h+3. Then 64-byte aligned meta: scales
// [8][R] uint8, mins [4][R][2] uint8 (sub-blocks 2i and 2i+1 side by side),
// d [R] fp16, dmin [R] fp16.
template <int R, bool Five>
struct PackK45 {
    using Block = std::conditional_t<Five, dwell_block_q5_K, dwell_block_q4_K>;
    static constexpr size_t kNibbleBytes = 128 * R;
    static constexpr size_t kQuantBytes = kNibbleBytes + (Five ? 32 * R : 0);
    static constexpr size_t kScales = kQuantBytes;
    static constexpr size_t kMins = kScales + 8 * R;
    static constexpr size_t kD = kMins + 8 * R;
    static constexpr size_t kDmin = kD + 2 * R;
    static constexpr size_t kChunk = kQuantBytes + (20 * R + 63) / 64 * 64;
    static size_t bytes(int64_t k) { return static_cast<size_t>(k / DWELL_QK_K) * kChunk; }
    static void pack(const void* w, size_t row_bytes, int nr, int64_t k, void* out) {
        const auto* src = byte_ptr(w);
        auto* dst = static_cast<unsigned char*>(out);
        std::memset(dst, 0, bytes(k));
        for (int64_t b = 0; b < k / DWELL_QK_K; ++b) {
            const size_t blk = static_cast<size_t>(b) * sizeof(Block);
            unsigned char* chunk = dst + b * kChunk;
            for (int p = 0; p < 4; ++p) {
                for (int j = 0; j < 8; ++j) {
                    put_lanes<R>(src, row_bytes, nr, blk + offsetof(Block, qs) + 32 * p + 4 * j,
                                 chunk + (p * 8 + j) * 4 * R);
                }
            }
            for (int r = 0; r < nr; ++r) {
                const unsigned char* row = src + r * row_bytes + blk;
                if constexpr (Five) {
                    const unsigned char* qh = row + offsetof(Block, qh);
                    for (int p = 0; p < 4; ++p) {
                        for (int h = 0; h < 2; ++h) {
                            for (int t = 0; t < 4; ++t) {
                                uint8_t v = 0;
                                for (int jj = 0; jj < 4; ++jj) {
                                    const uint8_t e = qh[4 * (4 * h + jj) + t];
                                    v |= static_cast<uint8_t>(((e >> (2 * p)) & 1) << (2 * jj));
                                    v |= static_cast<uint8_t>(((e >> (2 * p + 1)) & 1)
                                                              << (2 * jj + 1));
                                }
                                chunk[kNibbleBytes + ((p * 2 + h) * R + r) * 4 + t] = v;
                            }
                        }
                    }
                }
                uint8_t scales[DWELL_K_SCALE_SIZE];
                std::memcpy(scales, row + offsetof(Block, scales), sizeof scales);
                for (int j = 0; j < 8; ++j) {
                    uint8_t sc, mn;
                    dwell_k_scale_min(scales, j, &sc, &mn);
                    chunk[kScales + j * R + r] = sc;
                    chunk[kMins + (j / 2) * 2 * R + 2 * r + j % 2] = mn;
                }
                std::memcpy(chunk + kD + 2 * r, row + offsetof(Block, d), 2);
                std::memcpy(chunk + kDmin + 2 * r, row + offsetof(Block, dmin), 2);
            }
        }
    }
};

template <int R>
using PackQ4_K = PackK45<R, false>;
template <int R>
using PackQ5_K = PackK45<R, true>;

// The 256 codes 0..63 of one Q6_K super-block, in element order.
inline void q6_K_codes(const unsigned char* row, uint8_t (&codes)[DWELL_QK_K]) {
    const unsigned char* ql = row + offsetof(dwell_block_q6_K, ql);
    const unsigned char* qh = row + offsetof(dwell_block_q6_K, qh);
    for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 32; ++l) {
            const int e = 128 * h;
            const uint8_t hb = qh[32 * h + l];
            const uint8_t l0 = ql[64 * h + l], l1 = ql[64 * h + 32 + l];
            codes[e + l] = static_cast<uint8_t>((l0 & 15) | ((hb & 3) << 4));
            codes[e + 32 + l] = static_cast<uint8_t>((l1 & 15) | (((hb >> 2) & 3) << 4));
            codes[e + 64 + l] = static_cast<uint8_t>((l0 >> 4) | (((hb >> 4) & 3) << 4));
            codes[e + 96 + l] = static_cast<uint8_t>((l1 >> 4) | (((hb >> 6) & 3) << 4));
        }
    }
}

// The chunk both Q6_K packs share: QuantBytes of codes per super-block, laid
// out by the pack, then meta: scales [16][R] int8, d [R] fp16.
template <int R, size_t QuantBytes>
struct PackQ6_KChunk {
    static constexpr size_t kQuantBytes = QuantBytes;
    static constexpr size_t kScales = kQuantBytes;
    static constexpr size_t kD = kScales + 16 * R;
    static constexpr size_t kChunk = kQuantBytes + (18 * R + 63) / 64 * 64;
    static size_t bytes(int64_t k) { return static_cast<size_t>(k / DWELL_QK_K) * kChunk; }
    // place(chunk, r, codes) stores row r's 256 decoded codes in the chunk.
    template <class Place>
    static void pack_rows(const void* w, size_t row_bytes, int nr, int64_t k, void* out,
                          Place place) {
        const auto* src = byte_ptr(w);
        auto* dst = static_cast<unsigned char*>(out);
        std::memset(dst, 0, bytes(k));
        uint8_t codes[DWELL_QK_K];
        for (int64_t b = 0; b < k / DWELL_QK_K; ++b) {
            const size_t blk = static_cast<size_t>(b) * sizeof(dwell_block_q6_K);
            unsigned char* chunk = dst + b * kChunk;
            for (int r = 0; r < nr; ++r) {
                const unsigned char* row = src + r * row_bytes + blk;
                q6_K_codes(row, codes);
                place(chunk, r, codes);
                for (int s = 0; s < 16; ++s) {
                    chunk[kScales + s * R + r] = row[offsetof(dwell_block_q6_K, scales) + s];
                }
                std::memcpy(chunk + kD + 2 * r, row + offsetof(dwell_block_q6_K, d), 2);
            }
        }
    }
};

// Q6_K, per super-block: codes 0..63 one byte each, [s = 0..15][j = 0..3]
// [R][4] (elements 16s + 4j..), then PackQ6_KChunk's meta. Unpacking the
// 6-bit codes costs 22% more bytes than the file's layout but no decoding in
// the inner loop (the AVX2 kernel; AVX-512 uses PackQ6_Kp).
template <int R>
struct PackQ6_K : PackQ6_KChunk<R, 256 * R> {
    static void pack(const void* w, size_t row_bytes, int nr, int64_t k, void* out) {
        PackQ6_K::pack_rows(w, row_bytes, nr, k, out,
                            [](unsigned char* chunk, int r, const uint8_t* codes) {
                                for (int g = 0; g < DWELL_QK_K / 4; ++g) {
                                    std::memcpy(chunk + (g * R + r) * 4, codes + 4 * g, 4);
                                }
                            });
    }
};

// Q6_K at the file's size: the low 4 bits of the codes as Q4_K's nibbles,
// [p = 0..3][j = 0..7][R][4] (low nibble element 64p + 4j + t, high nibble
// 64p + 32 + 4j + t), then the top 2 bits [p][q = 0..3][R][4]: bits 2i..2i+1
// of byte t belong to code vector i of the group (0: low nibbles of j = 2q,
// 1: high nibbles of j = 2q, 2 and 3: the same for j = 2q + 1). Meta as
// PackQ6_K. The kernel rebuilds each code with a shift and a masked or.
template <int R>
struct PackQ6_Kp : PackQ6_KChunk<R, 192 * R> {
    static constexpr size_t kNibbleBytes = 128 * R;
    static void pack(const void* w, size_t row_bytes, int nr, int64_t k, void* out) {
        PackQ6_Kp::pack_rows(
            w, row_bytes, nr, k, out, [](unsigned char* chunk, int r, const uint8_t* c) {
                for (int p = 0; p < 4; ++p) {
                    for (int j = 0; j < 8; ++j) {
                        for (int t = 0; t < 4; ++t) {
                            const int e = 64 * p + 4 * j + t;
                            chunk[((p * 8 + j) * R + r) * 4 + t] =
                                static_cast<uint8_t>((c[e] & 15) | ((c[e + 32] & 15) << 4));
                        }
                    }
                    for (int q = 0; q < 4; ++q) {
                        for (int t = 0; t < 4; ++t) {
                            const int e = 64 * p + 8 * q + t;
                            const int top[4] = {c[e] >> 4, c[e + 32] >> 4, c[e + 4] >> 4,
                                                c[e + 36] >> 4};
                            chunk[kNibbleBytes + ((p * 4 + q) * R + r) * 4 + t] =
                                static_cast<uint8_t>(top[0] | (top[1] << 2) | (top[2] << 4) |
                                                     (top[3] << 6));
                        }
                    }
                }
            });
    }
};

}  // namespace
}  // namespace dwell::cpu::x86
