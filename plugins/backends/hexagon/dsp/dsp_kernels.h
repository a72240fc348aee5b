/* dwell's Hexagon DSP-side kernels: what the hexagon plugin's host side
 * sends work to. Plain C11 with no library calls (the DSP image and the
 * freestanding qemu-hexagon test have no libc), so the same file builds
 * for the DSP, for the test program, and natively for the host-side test
 * double that plays the DSP.
 *
 * Every kernel has a portable C version (_ref) and an HVX version (_hvx,
 * 128-byte vectors), built when __HVX__ is defined, else the portable one
 * under that name. HVX versions use integer instructions only (qemu-hexagon
 * does not run HVX float): vrmpy int8 dot products for the matmul, lane
 * floats emulated in integers for the others (dsp_hvx_lanefloat.h).
 *
 * Matmul activations are int8: a row of x is quantized to Q8_0 blocks (32
 * values, one fp16 scale) first, and each weight block's integer dot with it
 * is scaled by both blocks' scales — the numerics of dwell's CPU backend.
 *
 * Thread-safety: every function is pure (writes only its output).
 * Ownership: callers own all buffers. */
#ifndef DWELL_DSP_KERNELS_H
#define DWELL_DSP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dwell_dtype values the DSP takes for weights. */
enum { DSP_W_Q8_0 = 3, DSP_W_Q4_0 = 4 };

typedef struct dsp_block_q8_0 {
    uint16_t d; /* fp16 */
    int8_t qs[32];
} dsp_block_q8_0;

float dsp_fp16_to_f32(uint16_t h);
uint16_t dsp_f32_to_fp16(float f);
float dsp_sqrtf(float x);
float dsp_expf(float x);
void dsp_sincosf(float x, float* s, float* c);

/* The 32 int8 values of weight block b of a Q4_0 / Q8_0 row (Q4_0:
 * nibble - 8) and its scale. */
void dsp_weight_block_i8(const uint8_t* row, int32_t wtype, int32_t b, int8_t q[32], float* d);

/* x[k] -> k / 32 Q8_0 blocks (k a multiple of 32). */
void dsp_quantize_row_q8_0(const float* x, dsp_block_q8_0* out, int32_t k);

/* out[n] = sum over blocks of (int dot of W row n's block with x's block)
 * * d_w * d_x, for n in [0, n_rows). W rows are `row_bytes` apart, in
 * Q4_0 (18-byte blocks) or Q8_0 (34-byte blocks) layout. */
void dsp_matmul_ref(const uint8_t* w, size_t row_bytes, int32_t wtype, const dsp_block_q8_0* x,
                    float* out, int32_t k, int32_t n_rows);
void dsp_matmul_hvx(const uint8_t* w, size_t row_bytes, int32_t wtype, const dsp_block_q8_0* x,
                    float* out, int32_t k, int32_t n_rows);

void dsp_rms_norm_ref(const float* x, float* out, int32_t n, float eps);
void dsp_rms_norm_hvx(const float* x, float* out, int32_t n, float eps);
void dsp_swiglu_ref(const float* gate, const float* up, float* out, int32_t n);
void dsp_swiglu_hvx(const float* gate, const float* up, float* out, int32_t n);
/* op 0: add, 1: mul; b repeats every b_len values. */
void dsp_binary_ref(const float* a, const float* b, float* out, int32_t n, int32_t b_len,
                    int32_t op);
void dsp_binary_hvx(const float* a, const float* b, float* out, int32_t n, int32_t b_len,
                    int32_t op);
/* x [hd, n_head] of one token at `pos`; pairs (2i, 2i+1) or, with neox,
 * (i, i + n_rot / 2); theta_i = pos * freq_scale * theta_scale^i, where the
 * host passes theta_scale = freq_base^(-2 / n_rot) (no pow on the DSP). */
void dsp_rope_ref(const float* x, float* out, int32_t hd, int32_t n_head, int32_t n_rot,
                  int32_t neox, int32_t pos, float theta_scale, float freq_scale);
void dsp_rope_hvx(const float* x, float* out, int32_t hd, int32_t n_head, int32_t n_rot,
                  int32_t neox, int32_t pos, float theta_scale, float freq_scale);

#ifdef __cplusplus
}
#endif
#endif /* DWELL_DSP_KERNELS_H */
