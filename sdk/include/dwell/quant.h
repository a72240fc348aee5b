/* dwell SDK — reference (scalar) encoders and decoders of the block
 * formats in tensor.h. They define the formats: SIMD kernels in any
 * plugin must produce and consume exactly these bits.
 *
 * Thread-safety: pure functions. Ownership: callers own all buffers. */
#ifndef DWELL_QUANT_H
#define DWELL_QUANT_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dwell/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Clamped conversions: NaN or infinite input never reaches an undefined
 * float -> int conversion. */
static inline int8_t dwell_round_to_q8(float v) {
    const float r = roundf(v);
    if (!(r > -127.0f)) return r == r ? -127 : 0;
    if (r >= 127.0f) return 127;
    return (int8_t)r;
}

static inline uint8_t dwell_q4_nibble(float v) { /* v = x / d, in [-8, 7.5] for finite x */
    const float s = v + 8.5f;
    if (!(s > 0.0f)) return 0;
    if (s >= 15.0f) return 15;
    return (uint8_t)s;
}

/* n must be a multiple of DWELL_QK8_0. d = max|x| / 127, q = round(x / d). */
static inline void dwell_quantize_row_q8_0(const float* x, dwell_block_q8_0* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const float* xb = x + b * DWELL_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < DWELL_QK8_0; ++j) amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = dwell_fp32_to_fp16(d);
        for (int j = 0; j < DWELL_QK8_0; ++j) y[b].qs[j] = dwell_round_to_q8(xb[j] * id);
    }
}

static inline void dwell_dequantize_row_q8_0(const dwell_block_q8_0* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const float d = dwell_fp16_to_fp32(x[b].d);
        for (int j = 0; j < DWELL_QK8_0; ++j) y[b * DWELL_QK8_0 + j] = d * (float)x[b].qs[j];
    }
}

/* The value of largest magnitude maps to -8, so d = max / -8 keeps its sign
 * and the full 16 levels are used. */
static inline void dwell_quantize_row_q4_0(const float* x, dwell_block_q4_0* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK4_0; ++b) {
        const float* xb = x + b * DWELL_QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < DWELL_QK4_0; ++j) {
            if (fabsf(xb[j]) > amax) {
                amax = fabsf(xb[j]);
                max = xb[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = dwell_fp32_to_fp16(d);
        for (int j = 0; j < DWELL_QK4_0 / 2; ++j) {
            y[b].qs[j] = (uint8_t)(dwell_q4_nibble(xb[j] * id) |
                                   (dwell_q4_nibble(xb[j + DWELL_QK4_0 / 2] * id) << 4));
        }
    }
}

static inline void dwell_dequantize_row_q4_0(const dwell_block_q4_0* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK4_0; ++b) {
        const float d = dwell_fp16_to_fp32(x[b].d);
        for (int j = 0; j < DWELL_QK4_0 / 2; ++j) {
            y[b * DWELL_QK4_0 + j] = ((int)(x[b].qs[j] & 0x0f) - 8) * d;
            y[b * DWELL_QK4_0 + j + DWELL_QK4_0 / 2] = ((int)(x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

/* FP8_E4M3 is the OCP 8-bit float "E4M3FN": sign bit, 4 exponent bits
 * (bias 7), 3 mantissa bits. Exponent 0 codes the subnormals m * 2^-9.
 * There are no infinities: the all-ones exponent holds normal values
 * except mantissa 7, so 0x7f / 0xff are the only NaNs and the largest
 * finite magnitude is 448 (0x7e). Decoding is exact for every code. */
static inline float dwell_fp8_e4m3_to_fp32(uint8_t v) {
    const uint32_t sign = (uint32_t)(v & 0x80u) << 24;
    const uint32_t mag = v & 0x7fu;
    uint32_t bits;
    if (mag == 0x7fu) {
        bits = sign | 0x7fc00000u;
    } else if (mag >= 8u) { /* normal: re-bias the exponent from 7 to 127 */
        bits = sign | ((mag + ((127u - 7u) << 3)) << 20);
    } else { /* m * 2^-9 is a normal float: exact */
        const float f = (float)mag * (1.0f / 512.0f);
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Round to nearest, ties to even, in the OCP "saturating" mode: magnitudes
 * of 448 and beyond (infinities included) become +-448, since a finite
 * input must not turn into the NaN code, and NaN stays NaN (0x7f with the
 * input's sign). */
static inline uint8_t dwell_fp32_to_fp8_e4m3(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
    const uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
    if (absx >= 0x43e00000u) return (uint8_t)(sign | 0x7eu); /* >= 448 */
    if (absx < 0x3c800000u) {                                /* below 2^-6: subnormal */
        float a;
        memcpy(&a, &absx, sizeof a);
        /* In units of 2^-9 the code is |f| rounded to an integer; 8 is the
         * smallest normal, whose code is also 8. Both steps are exact. */
        const float s = a * 512.0f;
        uint32_t m = (uint32_t)s;
        const float rest = s - (float)m;
        if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
        return (uint8_t)(sign | m);
    }
    /* Drop 20 of the 23 mantissa bits (a carry moves into the exponent),
     * then re-bias the exponent from 127 to 7. */
    const uint32_t r = absx + 0x7ffffu + ((absx >> 20) & 1u);
    return (uint8_t)(sign | ((r >> 20) - ((127u - 7u) << 3)));
}

/* FP8_E4M3 key caches (ABI 1.4). A key carries a large part that changes
 * slowly with the position (RoPE's low-frequency pairs turn it by a
 * fraction of a radian over hundreds of tokens); E4M3's 3 mantissa bits
 * would round that part with errors as large as the differences between
 * keys that attention looks at. So a key cache stores each key minus an
 * offset that follows the slow part, derived from the codes already
 * stored, with nothing stored beside them:
 *
 *   offset(p) = (1/16) * sum of decode(row p') over p' < 16 * floor(p / 16)
 *
 * (per value of the row; 0 for the first 16 positions), which is the sum of
 * the earlier blocks' mean of 16 codes, i.e. the running mean of the keys.
 * Row p decodes to decode(row p) + offset(p), so q . key(p) is
 * q . decode(row p) + (1/16) * the sum of the earlier blocks' q . decode
 * dots, which attention has computed anyway. Value caches are plain E4M3.
 *
 * Each value of a new key goes to one of the two E4M3 codes nearest to
 * key - offset: in element order, the one that keeps |sum q_i *
 * (decoded_i - (key_i - offset_i))| smallest so far, q being the sum of the
 * query heads that read this KV head for the same token (the token's own
 * attention then sees almost none of the rounding); a tie or q == NULL
 * (no query, as in a context shift) takes the nearest. Either neighbour
 * decodes correctly, so a backend whose float rounding differs from
 * dwell_fp8_encode_key at a near-tie stays compatible; one that always
 * rounds to nearest is compatible too, only less accurate (stories260K's
 * perplexity: +0.8% at ctx 512 instead of +0.4%). */
#define DWELL_FP8_KEY_BLOCK 16

/* The other E4M3 code next to x, on the far side of x from code c (the
 * nearest); c itself when x is c's value, NaN or beyond +-448. */
static inline uint8_t dwell_fp8_e4m3_other_neighbour(uint8_t c, float x) {
    const float v = dwell_fp8_e4m3_to_fp32(c);
    const uint8_t mag = (uint8_t)(c & 0x7fu), sign = (uint8_t)(c & 0x80u);
    if (v == x || x != x) return c;
    if (mag == 0) return (uint8_t)((x < 0.0f ? 0x80u : 0u) | 1u);
    if (fabsf(v) < fabsf(x)) return mag >= 0x7eu ? c : (uint8_t)(sign | (mag + 1u));
    return (uint8_t)(sign | (mag - 1u));
}

/* One head's key x[0..n) to E4M3 codes as described above; offset may be
 * NULL (all zero), q NULL for plain rounding to nearest. key - offset is a
 * float subtraction; the running error is a double, in which each term
 * q_i * (decoded_i - r_i) is exact, so every compiler (contracting to FMA
 * or not) makes the same choices. */
static inline double dwell_fp8_key_error_term(float q, uint8_t c, float r) {
    return (double)q * ((double)dwell_fp8_e4m3_to_fp32(c) - (double)r);
}

static inline void dwell_fp8_encode_key(const float* x, const float* offset, const float* q,
                                        int64_t n, uint8_t* out) {
    double err = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float r = offset != NULL ? x[i] - offset[i] : x[i];
        const uint8_t c0 = dwell_fp32_to_fp8_e4m3(r);
        const uint8_t c1 = q != NULL ? dwell_fp8_e4m3_other_neighbour(c0, r) : c0;
        if (c1 == c0) {
            out[i] = c0;
            if (q != NULL && r == r) err += dwell_fp8_key_error_term(q[i], c0, r);
            continue;
        }
        const double e0 = err + dwell_fp8_key_error_term(q[i], c0, r);
        const double e1 = err + dwell_fp8_key_error_term(q[i], c1, r);
        const int far = fabs(e1) < fabs(e0);
        out[i] = far ? c1 : c0;
        err = far ? e1 : e0;
    }
}

/* Decoders of the formats shared with ggml. Each block has a one-block
 * function (blocks must be suitably aligned: callers reading from a mapped
 * file copy the block first) and a row function over n / block elements.
 * Products are formed in the same order as ggml's reference decoders so that
 * both produce identical floats, not merely close ones. */

static inline void dwell_dequantize_block_q4_1(const dwell_block_q4_1* b, float* y) {
    const float d = dwell_fp16_to_fp32(b->d);
    const float m = dwell_fp16_to_fp32(b->m);
    for (int j = 0; j < DWELL_QK4_1 / 2; ++j) {
        y[j] = (float)(b->qs[j] & 0x0f) * d + m;
        y[j + DWELL_QK4_1 / 2] = (float)(b->qs[j] >> 4) * d + m;
    }
}

/* The 32 fifth bits, assembled little-endian whatever the host order. */
static inline uint32_t dwell_q5_high_bits(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | ((uint32_t)qh[1] << 8) | ((uint32_t)qh[2] << 16) |
           ((uint32_t)qh[3] << 24);
}

static inline void dwell_dequantize_block_q5_0(const dwell_block_q5_0* b, float* y) {
    const float d = dwell_fp16_to_fp32(b->d);
    const uint32_t qh = dwell_q5_high_bits(b->qh);
    for (int j = 0; j < DWELL_QK5_0 / 2; ++j) {
        const int lo = (int)(b->qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
        const int hi = (int)(b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = (float)(lo - 16) * d;
        y[j + DWELL_QK5_0 / 2] = (float)(hi - 16) * d;
    }
}

static inline void dwell_dequantize_block_q5_1(const dwell_block_q5_1* b, float* y) {
    const float d = dwell_fp16_to_fp32(b->d);
    const float m = dwell_fp16_to_fp32(b->m);
    const uint32_t qh = dwell_q5_high_bits(b->qh);
    for (int j = 0; j < DWELL_QK5_1 / 2; ++j) {
        const int lo = (int)(b->qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
        const int hi = (int)(b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = (float)lo * d + m;
        y[j + DWELL_QK5_1 / 2] = (float)hi * d + m;
    }
}

/* Scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block: the
 * first four pairs fill the low 6 bits of bytes 0..7; the last four keep
 * their low 4 bits in bytes 8..11 and their top 2 bits in the otherwise
 * unused top bits of bytes 0..7. */
static inline void dwell_k_scale_min(const uint8_t scales[DWELL_K_SCALE_SIZE], int j, uint8_t* sc,
                                     uint8_t* mn) {
    if (j < 4) {
        *sc = (uint8_t)(scales[j] & 63);
        *mn = (uint8_t)(scales[j + 4] & 63);
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
        *mn = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

static inline void dwell_dequantize_block_q4_K(const dwell_block_q4_K* b, float* y) {
    const float d = dwell_fp16_to_fp32(b->d);
    const float dmin = dwell_fp16_to_fp32(b->dmin);
    for (int p = 0; p < DWELL_QK_K / 64; ++p) { /* pairs of sub-blocks share 32 bytes */
        const uint8_t* q = b->qs + 32 * p;
        uint8_t sc, mn;
        dwell_k_scale_min(b->scales, 2 * p, &sc, &mn);
        const float d_lo = d * (float)sc, m_lo = dmin * (float)mn;
        dwell_k_scale_min(b->scales, 2 * p + 1, &sc, &mn);
        const float d_hi = d * (float)sc, m_hi = dmin * (float)mn;
        for (int l = 0; l < 32; ++l) {
            y[64 * p + l] = d_lo * (float)(q[l] & 0x0f) - m_lo;
            y[64 * p + 32 + l] = d_hi * (float)(q[l] >> 4) - m_hi;
        }
    }
}

static inline void dwell_dequantize_block_q5_K(const dwell_block_q5_K* b, float* y) {
    const float d = dwell_fp16_to_fp32(b->d);
    const float dmin = dwell_fp16_to_fp32(b->dmin);
    for (int p = 0; p < DWELL_QK_K / 64; ++p) {
        const uint8_t* q = b->qs + 32 * p;
        uint8_t sc, mn;
        dwell_k_scale_min(b->scales, 2 * p, &sc, &mn);
        const float d_lo = d * (float)sc, m_lo = dmin * (float)mn;
        dwell_k_scale_min(b->scales, 2 * p + 1, &sc, &mn);
        const float d_hi = d * (float)sc, m_hi = dmin * (float)mn;
        for (int l = 0; l < 32; ++l) {
            const int lo = (q[l] & 0x0f) | (((b->qh[l] >> (2 * p)) & 1) << 4);
            const int hi = (q[l] >> 4) | (((b->qh[l] >> (2 * p + 1)) & 1) << 4);
            y[64 * p + l] = d_lo * (float)lo - m_lo;
            y[64 * p + 32 + l] = d_hi * (float)hi - m_hi;
        }
    }
}

static inline void dwell_dequantize_block_q6_K(const dwell_block_q6_K* b, float* y) {
    const float d = dwell_fp16_to_fp32(b->d);
    for (int h = 0; h < 2; ++h) { /* two halves of 128 elements */
        const uint8_t* ql = b->ql + 64 * h;
        const uint8_t* qh = b->qh + 32 * h;
        const int8_t* sc = b->scales + 8 * h;
        float* yh = y + 128 * h;
        for (int l = 0; l < 32; ++l) {
            const int s = l / 16; /* 16-element sub-block within each quarter */
            const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            yh[l] = d * (float)sc[s] * (float)q0;
            yh[l + 32] = d * (float)sc[s + 2] * (float)q1;
            yh[l + 64] = d * (float)sc[s + 4] * (float)q2;
            yh[l + 96] = d * (float)sc[s + 6] * (float)q3;
        }
    }
}

/* Rows of n values (n a multiple of the block size). */
static inline void dwell_dequantize_row_q4_1(const dwell_block_q4_1* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK4_1; ++b)
        dwell_dequantize_block_q4_1(x + b, y + b * DWELL_QK4_1);
}

static inline void dwell_dequantize_row_q5_0(const dwell_block_q5_0* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK5_0; ++b)
        dwell_dequantize_block_q5_0(x + b, y + b * DWELL_QK5_0);
}

static inline void dwell_dequantize_row_q5_1(const dwell_block_q5_1* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK5_1; ++b)
        dwell_dequantize_block_q5_1(x + b, y + b * DWELL_QK5_1);
}

static inline void dwell_dequantize_row_q4_K(const dwell_block_q4_K* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b)
        dwell_dequantize_block_q4_K(x + b, y + b * DWELL_QK_K);
}

static inline void dwell_dequantize_row_q5_K(const dwell_block_q5_K* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b)
        dwell_dequantize_block_q5_K(x + b, y + b * DWELL_QK_K);
}

static inline void dwell_dequantize_row_q6_K(const dwell_block_q6_K* x, float* y, int64_t n) {
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b)
        dwell_dequantize_block_q6_K(x + b, y + b * DWELL_QK_K);
}

/* ------------------------------------------------------------------------
 * The dwell row formats I4_G, I6_G and I8_C (layouts in tensor.h). Their
 * rows are byte streams: fields are read and written byte by byte, so a row
 * may start at any address and the bytes do not depend on the host's order. */

static inline uint16_t dwell_load_u16le(const uint8_t* p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline void dwell_store_u16le(uint8_t* p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xffu);
    p[1] = (uint8_t)(v >> 8);
}

static inline float dwell_load_f32le(const uint8_t* p) {
    const uint32_t u =
        (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline void dwell_store_f32le(uint8_t* p, float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(u >> (8 * i));
}

/* Bits per code of a group format: 4 for I4_G, 6 for I6_G, 0 otherwise. */
static inline int dwell_group_bits(dwell_dtype t) {
    return t == DWELL_I6_G ? 6 : dwell_group_size(t) ? 4 : 0;
}

/* The len codes of one group's stream (bits = 4 or 6). */
static inline void dwell_unpack_codes(int bits, const uint8_t* src, uint8_t* codes, int64_t len) {
    int64_t k = 0;
    if (bits == 4) {
        for (; k + 2 <= len; k += 2, ++src) {
            codes[k] = (uint8_t)(*src & 0x0f);
            codes[k + 1] = (uint8_t)(*src >> 4);
        }
        if (k < len) codes[k] = (uint8_t)(*src & 0x0f);
        return;
    }
    for (; k + 4 <= len; k += 4, src += 3) { /* four codes fill three bytes exactly */
        codes[k] = (uint8_t)(src[0] & 63);
        codes[k + 1] = (uint8_t)((src[0] >> 6) | ((src[1] & 15) << 2));
        codes[k + 2] = (uint8_t)((src[1] >> 4) | ((src[2] & 3) << 4));
        codes[k + 3] = (uint8_t)(src[2] >> 2);
    }
    for (int64_t t = 0; k < len; ++k, ++t) { /* 1..3 codes left, bit t * 6 of src */
        const int sh = (int)((t * 6) & 7);
        unsigned v = (unsigned)src[(t * 6) >> 3] >> sh;
        if (sh > 2) v |= (unsigned)src[((t * 6) >> 3) + 1] << (8 - sh);
        codes[k] = (uint8_t)(v & 63u);
    }
}

/* The reverse: codes (each below 2^bits) to a zero-padded stream of
 * dwell_group_code_bytes(bits, len) bytes. */
static inline void dwell_pack_codes(int bits, const uint8_t* codes, uint8_t* dst, int64_t len) {
    memset(dst, 0, dwell_group_code_bytes(bits, len));
    for (int64_t k = 0; k < len; ++k) {
        const int64_t bit = k * bits;
        const int sh = (int)(bit & 7);
        dst[bit >> 3] |= (uint8_t)((unsigned)codes[k] << sh);
        if (sh + bits > 8) dst[(bit >> 3) + 1] |= (uint8_t)(codes[k] >> (8 - sh));
    }
}

/* round((x - m) * id) clamped to 0..qmax; NaN gives 0. Written without
 * branches on the value so the compiler can vectorise the loops below. */
static inline int dwell_group_code(float x, float m, float id, int qmax) {
    float v = (x - m) * id + 0.5f;
    v = v > 0.0f ? v : 0.0f;
    v = v < (float)qmax ? v : (float)qmax;
    return (int)v; /* v >= 0, so truncation is floor */
}

/* Squared error of coding x[0..len) with step d and offset m, both exactly
 * as the decoder will see them. Eight partial sums keep the loop free of a
 * serial dependency. */
static inline float dwell_group_sse(const float* x, int64_t len, int qmax, float d, float m) {
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        for (int l = 0; l < 8; ++l) {
            const float e = x[i + l] - ((float)dwell_group_code(x[i + l], m, id, qmax) * d + m);
            acc[l] += e * e;
        }
    }
    for (int l = 0; i < len; ++i, ++l) {
        const float e = x[i] - ((float)dwell_group_code(x[i], m, id, qmax) * d + m);
        acc[l] += e * e;
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

static inline void dwell_group_codes(const float* x, int64_t len, int qmax, float d, float m,
                                     uint8_t* q) {
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int64_t i = 0; i < len; ++i) q[i] = (uint8_t)dwell_group_code(x[i], m, id, qmax);
}

/* The encoder's running best (step, offset) for one group, as fp16 bits. */
typedef struct dwell_group_fit {
    uint16_t d, m;
    float sse;
} dwell_group_fit;

/* Rounds a candidate to fp16 first, so the error measured is the error of
 * the bits that will be stored, and keeps it if it beats the best. */
static inline void dwell_group_try(const float* x, int64_t len, int qmax, float d, float m,
                                   dwell_group_fit* best) {
    const uint16_t hd = dwell_fp32_to_fp16(d > 0.0f ? d : 0.0f);
    const uint16_t hm = dwell_fp32_to_fp16(m);
    const float sse = dwell_group_sse(x, len, qmax, dwell_fp16_to_fp32(hd), dwell_fp16_to_fp32(hm));
    if (sse < best->sse) {
        best->d = hd;
        best->m = hm;
        best->sse = sse;
    }
}

/* Candidate ranges [min + i * f * range, max - j * f * range] for i, j in
 * 0..STEPS: clipping a tail of a group buys finer steps for the rest. */
#define DWELL_GROUP_SHRINK_STEPS 4
#define DWELL_GROUP_SHRINK_FRACTION 0.02f

/* Encodes one group of len <= DWELL_GROUP_SIZE values into `out` (scale,
 * min, code stream): the (min, step) of lowest squared error among the
 * shrunken ranges and a power-of-two step, then polished by least-squares
 * refits of step and min to the chosen codes. */
static inline void dwell_quantize_group(int bits, const float* x_in, int64_t len, uint8_t* out) {
    const int qmax = (1 << bits) - 1;
    float x[DWELL_GROUP_SIZE];
    uint8_t q[DWELL_GROUP_SIZE];
    float mn = 65504.0f, mx = -65504.0f;
    for (int64_t i = 0; i < len; ++i) {
        /* NaN codes as 0 and the rest is held to the fp16 range, so the
         * min and step always fit their fp16 fields. */
        float v = x_in[i] == x_in[i] ? x_in[i] : 0.0f;
        v = v < -65504.0f ? -65504.0f : v > 65504.0f ? 65504.0f : v;
        x[i] = v;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    dwell_group_fit best = {0, dwell_fp32_to_fp16(mn), INFINITY};
    if (len > 0 && mx > mn) {
        const float range = mx - mn;
        for (int i = 0; i <= DWELL_GROUP_SHRINK_STEPS; ++i) {
            for (int j = 0; j <= DWELL_GROUP_SHRINK_STEPS; ++j) {
                const float lo = mn + range * DWELL_GROUP_SHRINK_FRACTION * (float)i;
                const float hi = mx - range * DWELL_GROUP_SHRINK_FRACTION * (float)j;
                dwell_group_try(x, len, qmax, (hi - lo) / (float)qmax, lo, &best);
            }
        }
        {
            /* The smallest power-of-two step that spans the range: exact
             * for data already on a dyadic grid (two levels such as +-1,
             * weights that were quantized before), where range / qmax
             * rounded to fp16 is not. */
            int e;
            const float f = frexpf(range / (float)qmax, &e);
            dwell_group_try(x, len, qmax, ldexpf(1.0f, f == 0.5f ? e - 1 : e), mn, &best);
        }
        for (int iter = 0; iter < 2; ++iter) {
            dwell_group_codes(x, len, qmax, dwell_fp16_to_fp32(best.d), dwell_fp16_to_fp32(best.m),
                              q);
            double sq = 0, sqq = 0, sx = 0, sqx = 0;
            for (int64_t i = 0; i < len; ++i) {
                sq += q[i];
                sqq += (double)q[i] * q[i];
                sx += x[i];
                sqx += (double)q[i] * x[i];
            }
            const double det = (double)len * sqq - sq * sq;
            if (!(det > 0.0)) break; /* all codes equal: nothing to fit */
            const double d = ((double)len * sqx - sq * sx) / det;
            if (!(d > 0.0)) break;
            dwell_group_try(x, len, qmax, (float)d, (float)((sx - d * sq) / (double)len), &best);
        }
    }
    dwell_store_u16le(out, best.d);
    dwell_store_u16le(out + 2, best.m);
    dwell_group_codes(x, len, qmax, dwell_fp16_to_fp32(best.d), dwell_fp16_to_fp32(best.m), q);
    dwell_pack_codes(bits, q, out + 4, len);
}

/* group <= DWELL_GROUP_SIZE. */
static inline void dwell_quantize_row_ig(int bits, int64_t group, const float* x, void* dst,
                                         int64_t n) {
    uint8_t* y = (uint8_t*)dst;
    for (int64_t g = 0; g < n; g += group) {
        const int64_t len = n - g < group ? n - g : group;
        dwell_quantize_group(bits, x + g, len, y);
        y += 4 + dwell_group_code_bytes(bits, len);
    }
}

static inline void dwell_dequantize_row_ig(int bits, int64_t group, const void* src, float* y,
                                           int64_t n) {
    const uint8_t* p = (const uint8_t*)src;
    uint8_t q[DWELL_GROUP_SIZE];
    for (int64_t g = 0; g < n; g += group) {
        const int64_t len = n - g < group ? n - g : group;
        const float d = dwell_fp16_to_fp32(dwell_load_u16le(p));
        const float m = dwell_fp16_to_fp32(dwell_load_u16le(p + 2));
        dwell_unpack_codes(bits, p + 4, q, len);
        for (int64_t i = 0; i < len; ++i) y[g + i] = (float)q[i] * d + m;
        p += 4 + dwell_group_code_bytes(bits, len);
    }
}

/* One row of n values (any n >= 1) to dwell_row_bytes(DWELL_I4_G, n) bytes. */
static inline void dwell_quantize_row_i4g(const float* x, void* y, int64_t n) {
    dwell_quantize_row_ig(4, DWELL_GROUP_SIZE, x, y, n);
}

static inline void dwell_dequantize_row_i4g(const void* x, float* y, int64_t n) {
    dwell_dequantize_row_ig(4, DWELL_GROUP_SIZE, x, y, n);
}

static inline void dwell_quantize_row_i4g64(const float* x, void* y, int64_t n) {
    dwell_quantize_row_ig(4, 64, x, y, n);
}

static inline void dwell_dequantize_row_i4g64(const void* x, float* y, int64_t n) {
    dwell_dequantize_row_ig(4, 64, x, y, n);
}

static inline void dwell_quantize_row_i4g32(const float* x, void* y, int64_t n) {
    dwell_quantize_row_ig(4, 32, x, y, n);
}

static inline void dwell_dequantize_row_i4g32(const void* x, float* y, int64_t n) {
    dwell_dequantize_row_ig(4, 32, x, y, n);
}

static inline void dwell_quantize_row_i6g(const float* x, void* y, int64_t n) {
    dwell_quantize_row_ig(6, DWELL_GROUP_SIZE, x, y, n);
}

static inline void dwell_dequantize_row_i6g(const void* x, float* y, int64_t n) {
    dwell_dequantize_row_ig(6, DWELL_GROUP_SIZE, x, y, n);
}

/* d = max|x| / 127 over the finite values, q = round(x / d): infinities
 * saturate to +-127 and NaN codes as 0. */
static inline void dwell_quantize_row_i8c(const float* x, void* dst, int64_t n) {
    uint8_t* y = (uint8_t*)dst;
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        const float a = fabsf(x[i]);
        if (a > amax && a <= FLT_MAX) amax = a;
    }
    const float d = amax / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    dwell_store_f32le(y, d);
    for (int64_t i = 0; i < n; ++i) y[4 + i] = (uint8_t)dwell_round_to_q8(x[i] * id);
}

static inline void dwell_dequantize_row_i8c(const void* src, float* y, int64_t n) {
    const uint8_t* p = (const uint8_t*)src;
    const float d = dwell_load_f32le(p);
    for (int64_t i = 0; i < n; ++i) y[i] = (float)(int8_t)p[4 + i] * d;
}

/* Any dtype of tensor.h that has a reference decoder, one row of n values;
 * src must be aligned for its block type (2 bytes for the fp16-scaled block
 * formats, none for the row formats). Returns 0 on success, -1 for a dtype
 * without one. */
static inline int dwell_dequantize_row(dwell_dtype t, const void* src, float* dst, int64_t n) {
    switch (t) {
        case DWELL_F32:
            memcpy(dst, src, (size_t)n * sizeof(float));
            return 0;
        case DWELL_F16:
            for (int64_t i = 0; i < n; ++i) dst[i] = dwell_fp16_to_fp32(((const uint16_t*)src)[i]);
            return 0;
        case DWELL_BF16:
            for (int64_t i = 0; i < n; ++i) dst[i] = dwell_bf16_to_fp32(((const uint16_t*)src)[i]);
            return 0;
        case DWELL_Q8_0:
            dwell_dequantize_row_q8_0((const dwell_block_q8_0*)src, dst, n);
            return 0;
        case DWELL_Q4_0:
            dwell_dequantize_row_q4_0((const dwell_block_q4_0*)src, dst, n);
            return 0;
        case DWELL_Q4_1:
            dwell_dequantize_row_q4_1((const dwell_block_q4_1*)src, dst, n);
            return 0;
        case DWELL_Q5_0:
            dwell_dequantize_row_q5_0((const dwell_block_q5_0*)src, dst, n);
            return 0;
        case DWELL_Q5_1:
            dwell_dequantize_row_q5_1((const dwell_block_q5_1*)src, dst, n);
            return 0;
        case DWELL_Q4_K:
            dwell_dequantize_row_q4_K((const dwell_block_q4_K*)src, dst, n);
            return 0;
        case DWELL_Q5_K:
            dwell_dequantize_row_q5_K((const dwell_block_q5_K*)src, dst, n);
            return 0;
        case DWELL_Q6_K:
            dwell_dequantize_row_q6_K((const dwell_block_q6_K*)src, dst, n);
            return 0;
        case DWELL_I4_G:
            dwell_dequantize_row_i4g(src, dst, n);
            return 0;
        case DWELL_I4_G64:
            dwell_dequantize_row_i4g64(src, dst, n);
            return 0;
        case DWELL_I4_G32:
            dwell_dequantize_row_i4g32(src, dst, n);
            return 0;
        case DWELL_I6_G:
            dwell_dequantize_row_i6g(src, dst, n);
            return 0;
        case DWELL_I8_C:
            dwell_dequantize_row_i8c(src, dst, n);
            return 0;
        default:
            return -1;
    }
}

/* The reverse, for the dtypes that have a reference encoder. */
static inline int dwell_quantize_row(dwell_dtype t, const float* src, void* dst, int64_t n) {
    switch (t) {
        case DWELL_F32:
            memcpy(dst, src, (size_t)n * sizeof(float));
            return 0;
        case DWELL_F16:
            for (int64_t i = 0; i < n; ++i) ((uint16_t*)dst)[i] = dwell_fp32_to_fp16(src[i]);
            return 0;
        case DWELL_Q8_0:
            dwell_quantize_row_q8_0(src, (dwell_block_q8_0*)dst, n);
            return 0;
        case DWELL_Q4_0:
            dwell_quantize_row_q4_0(src, (dwell_block_q4_0*)dst, n);
            return 0;
        case DWELL_I4_G:
            dwell_quantize_row_i4g(src, dst, n);
            return 0;
        case DWELL_I4_G64:
            dwell_quantize_row_i4g64(src, dst, n);
            return 0;
        case DWELL_I4_G32:
            dwell_quantize_row_i4g32(src, dst, n);
            return 0;
        case DWELL_I6_G:
            dwell_quantize_row_i6g(src, dst, n);
            return 0;
        case DWELL_I8_C:
            dwell_quantize_row_i8c(src, dst, n);
            return 0;
        default:
            return -1;
    }
}

/* Whether dwell_quantize_row / dwell_dequantize_row handle t, so a caller
 * can refuse a dtype before allocating anything. */
static inline int dwell_has_encoder(dwell_dtype t) {
    switch (t) {
        case DWELL_F32:
        case DWELL_F16:
        case DWELL_Q8_0:
        case DWELL_Q4_0:
        case DWELL_I4_G:
        case DWELL_I4_G64:
        case DWELL_I4_G32:
        case DWELL_I6_G:
        case DWELL_I8_C:
            return 1;
        default:
            return 0;
    }
}

static inline int dwell_has_decoder(dwell_dtype t) {
    switch (t) {
        case DWELL_F32:
        case DWELL_F16:
        case DWELL_BF16:
        case DWELL_Q8_0:
        case DWELL_Q4_0:
        case DWELL_Q4_1:
        case DWELL_Q5_0:
        case DWELL_Q5_1:
        case DWELL_Q4_K:
        case DWELL_Q5_K:
        case DWELL_Q6_K:
        case DWELL_I4_G:
        case DWELL_I4_G64:
        case DWELL_I4_G32:
        case DWELL_I6_G:
        case DWELL_I8_C:
            return 1;
        default:
            return 0;
    }
}

#ifdef __cplusplus
}
#endif
#endif /* DWELL_QUANT_H */
