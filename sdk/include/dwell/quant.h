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

/* Any dtype of tensor.h that has a reference decoder, one row of n values.
 * Returns 0 on success, -1 for a dtype without one. */
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
