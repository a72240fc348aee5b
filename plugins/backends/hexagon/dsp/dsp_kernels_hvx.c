/* HVX versions of dwell's DSP kernels (dsp_kernels.h), 128-byte vectors,
 * integer instructions only. The matmul takes int8 x int8 dot products with
 * vrmpy and does the float arithmetic around them (block scales, the row
 * sums) in the portable version's order, so both give identical results.
 * The float kernels (RMSNorm, SwiGLU, add/mul, RoPE) compute on lane floats
 * (dsp_hvx_lanefloat.h) and agree with the portable versions to about a
 * float's rounding. Without HVX the portable versions stand in. */
#include "dsp_kernels.h"

#if defined(__HVX__) && __HVX_LENGTH__ == 128
#include "dsp_hvx_lanefloat.h"

/* Four blocks of 32 per vector: vrmpy sums groups of 4 byte products into
 * 32 words; block j of the vector is words 8j .. 8j + 7. */
void dsp_matmul_hvx(const uint8_t* w, size_t row_bytes, int32_t wtype, const dsp_block_q8_0* x,
                    float* out, int32_t k, int32_t n_rows) {
    const int32_t blocks = k / 32;
    int8_t xq[128] __attribute__((aligned(128)));
    int8_t wq[128] __attribute__((aligned(128)));
    int32_t dots[32] __attribute__((aligned(128)));
    float dw[4];
    for (int32_t n = 0; n < n_rows; ++n) {
        const uint8_t* row = w + (size_t)n * row_bytes;
        float sum = 0.0f;
        for (int32_t b0 = 0; b0 < blocks; b0 += 4) {
            const int32_t nb = blocks - b0 < 4 ? blocks - b0 : 4;
            for (int32_t j = 0; j < 4; ++j) {
                for (int i = 0; i < 32; ++i) {
                    xq[32 * j + i] = j < nb ? x[b0 + j].qs[i] : 0;
                    wq[32 * j + i] = 0;
                }
                if (j < nb) dsp_weight_block_i8(row, wtype, b0 + j, wq + 32 * j, &dw[j]);
            }
            const HVX_Vector acc = Q6_Vw_vrmpy_VbVb(*(const HVX_Vector*)wq, *(const HVX_Vector*)xq);
            *(HVX_Vector*)dots = acc;
            for (int32_t j = 0; j < nb; ++j) {
                int32_t dot = 0;
                for (int i = 0; i < 8; ++i) dot += dots[8 * j + i];
                sum += (float)dot * (dw[j] * dsp_fp16_to_f32(x[b0 + j].d));
            }
        }
        out[n] = sum;
    }
}

/* 32 floats from p (n < 32 of them: the rest read as zero). */
static inline lf_vec load_lanes(const float* p, int32_t n) {
    if (n >= 32) return lf_from_bits(*(const HVX_UVector*)p);
    float t[32] __attribute__((aligned(128)));
    for (int32_t i = 0; i < 32; ++i) t[i] = i < n ? p[i] : 0.0f;
    return lf_from_bits(*(const HVX_Vector*)t);
}

static inline void store_lanes(float* p, int32_t n, lf_vec v) {
    if (n >= 32) {
        *(HVX_UVector*)p = lf_to_bits(v);
        return;
    }
    float t[32] __attribute__((aligned(128)));
    *(HVX_Vector*)t = lf_to_bits(v);
    for (int32_t i = 0; i < n; ++i) p[i] = t[i];
}

void dsp_rms_norm_hvx(const float* x, float* out, int32_t n, float eps) {
    lf_vec acc = lf_splat_float(0.0f);
    for (int32_t i = 0; i < n; i += 32) {
        const lf_vec v = load_lanes(x + i, n - i);
        acc = lf_add(acc, lf_mul(v, v));
    }
    const float scale = 1.0f / dsp_sqrtf(lf_sum_lanes(acc) / (float)n + eps);
    const lf_vec s = lf_splat_float(scale);
    for (int32_t i = 0; i < n; i += 32)
        store_lanes(out + i, n - i, lf_mul(load_lanes(x + i, n - i), s));
}

/* silu(g) * u = g * u / (1 + 2^(-g log2 e)) */
void dsp_swiglu_hvx(const float* gate, const float* up, float* out, int32_t n) {
    const lf_vec minus_log2e = lf_splat_float(-1.44269504089f);
    const lf_vec one = lf_splat_float(1.0f);
    for (int32_t i = 0; i < n; i += 32) {
        const lf_vec g = load_lanes(gate + i, n - i);
        const lf_vec denom = lf_add(one, lf_exp2(lf_mul(g, minus_log2e)));
        const lf_vec silu = lf_mul(g, lf_recip_positive(denom));
        store_lanes(out + i, n - i, lf_mul(silu, load_lanes(up + i, n - i)));
    }
}

void dsp_binary_hvx(const float* a, const float* b, float* out, int32_t n, int32_t b_len,
                    int32_t op) {
    float bt[32] __attribute__((aligned(128)));
    for (int32_t i = 0; i < n; i += 32) {
        const int32_t len = n - i < 32 ? n - i : 32;
        lf_vec y;
        if (b_len % 32 == 0) {
            y = load_lanes(b + i % b_len, len);
        } else {
            for (int32_t j = 0; j < 32; ++j) bt[j] = j < len ? b[(i + j) % b_len] : 0.0f;
            y = lf_from_bits(*(const HVX_Vector*)bt);
        }
        const lf_vec x = load_lanes(a + i, len);
        store_lanes(out + i, len, op == 0 ? lf_add(x, y) : lf_mul(x, y));
    }
}

/* The pairs of each head are gathered into two planes (first and second
 * element), rotated 32 at a time, and scattered back. */
#define ROPE_MAX_PAIRS 256
void dsp_rope_hvx(const float* x, float* out, int32_t hd, int32_t n_head, int32_t n_rot,
                  int32_t neox, int32_t pos, float theta_scale, float freq_scale) {
    const int32_t half = n_rot / 2;
    if (half > ROPE_MAX_PAIRS) {
        dsp_rope_ref(x, out, hd, n_head, n_rot, neox, pos, theta_scale, freq_scale);
        return;
    }
    float cs[ROPE_MAX_PAIRS] __attribute__((aligned(128)));
    float sn[ROPE_MAX_PAIRS] __attribute__((aligned(128)));
    float p0[ROPE_MAX_PAIRS] __attribute__((aligned(128)));
    float p1[ROPE_MAX_PAIRS] __attribute__((aligned(128)));
    float theta = (float)pos * freq_scale;
    for (int32_t i = 0; i < half; ++i) {
        dsp_sincosf(theta, &sn[i], &cs[i]);
        theta *= theta_scale;
    }
    for (int32_t h = 0; h < n_head; ++h) {
        const float* xh = x + h * hd;
        float* oh = out + h * hd;
        for (int32_t i = 0; i < half; ++i) {
            p0[i] = xh[neox ? i : 2 * i];
            p1[i] = xh[neox ? i + half : 2 * i + 1];
        }
        for (int32_t i = 0; i < half; i += 32) {
            const int32_t len = half - i;
            const lf_vec a = load_lanes(p0 + i, len), b = load_lanes(p1 + i, len);
            const lf_vec c = load_lanes(cs + i, len), s = load_lanes(sn + i, len);
            store_lanes(p0 + i, len, lf_add(lf_mul(a, c), lf_neg(lf_mul(b, s))));
            store_lanes(p1 + i, len, lf_add(lf_mul(a, s), lf_mul(b, c)));
        }
        for (int32_t i = 0; i < half; ++i) {
            oh[neox ? i : 2 * i] = p0[i];
            oh[neox ? i + half : 2 * i + 1] = p1[i];
        }
        for (int32_t i = n_rot; i < hd; ++i) oh[i] = xh[i];
    }
}

#else

void dsp_matmul_hvx(const uint8_t* w, size_t row_bytes, int32_t wtype, const dsp_block_q8_0* x,
                    float* out, int32_t k, int32_t n_rows) {
    dsp_matmul_ref(w, row_bytes, wtype, x, out, k, n_rows);
}

void dsp_rms_norm_hvx(const float* x, float* out, int32_t n, float eps) {
    dsp_rms_norm_ref(x, out, n, eps);
}

void dsp_swiglu_hvx(const float* gate, const float* up, float* out, int32_t n) {
    dsp_swiglu_ref(gate, up, out, n);
}

void dsp_binary_hvx(const float* a, const float* b, float* out, int32_t n, int32_t b_len,
                    int32_t op) {
    dsp_binary_ref(a, b, out, n, b_len, op);
}

void dsp_rope_hvx(const float* x, float* out, int32_t hd, int32_t n_head, int32_t n_rot,
                  int32_t neox, int32_t pos, float theta_scale, float freq_scale) {
    dsp_rope_ref(x, out, hd, n_head, n_rot, neox, pos, theta_scale, freq_scale);
}

#endif
