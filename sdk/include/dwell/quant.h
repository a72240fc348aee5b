/* dwell SDK — reference (scalar) encoders and decoders of the block
 * formats in tensor.h. They define the formats: SIMD kernels in any
 * plugin must produce and consume exactly these bits.
 *
 * Thread-safety: pure functions. Ownership: callers own all buffers. */
#ifndef DWELL_QUANT_H
#define DWELL_QUANT_H

#include <math.h>
#include <stdint.h>

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

/* Any dtype of tensor.h that has a reference decoder, one row of n values;
 * src must be aligned for its block type (2 bytes for the fp16-scaled
 * formats). Returns 0 on success, -1 for a dtype without one. */
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
        default:
            return -1;
    }
}

#ifdef __cplusplus
}
#endif
#endif /* DWELL_QUANT_H */
