/* The portable C versions of dwell's DSP kernels (dsp_kernels.h). */
#include "dsp_kernels.h"

float dsp_fp16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    union {
        uint32_t u;
        float f;
    } v;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float */
        const float f = (float)man * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    v.u = exp == 31 ? sign | 0x7f800000u | (man << 13) : sign | ((exp + 112u) << 23) | (man << 13);
    return v.f;
}

/* Round to nearest, ties to even; overflow to infinity. */
uint16_t dsp_f32_to_fp16(float f) {
    union {
        float f;
        uint32_t u;
    } v = {f};
    const uint32_t sign = (v.u >> 16) & 0x8000u;
    const uint32_t a = v.u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504 */
    if (a < 0x38800000u) {                                   /* below 2^-14: subnormal */
        union {
            uint32_t u;
            float f;
        } x = {a};
        const float s = x.f * 16777216.0f; /* units of 2^-24 */
        uint32_t m = (uint32_t)s;
        const float rest = s - (float)m;
        if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
        return (uint16_t)(sign | m);
    }
    const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float dsp_sqrtf(float x) {
    if (!(x > 0.0f)) return x == 0.0f ? 0.0f : (x - x) / (x - x);
    union {
        float f;
        uint32_t u;
    } v = {x};
    v.u = (v.u >> 1) + 0x1fc00000u; /* halves the exponent: a first guess */
    float y = v.f;
    for (int i = 0; i < 4; ++i) y = 0.5f * (y + x / y);
    return y;
}

/* e^x = 2^n * e^r, |r| <= ln2 / 2, e^r by its Taylor series to r^8. */
float dsp_expf(float x) {
    if (x > 88.7f) return 1.0f / 0.0f;
    if (x < -103.0f) return 0.0f;
    const float ln2 = 0.69314718056f;
    const float t = x / ln2;
    const int32_t n = (int32_t)(t < 0 ? t - 0.5f : t + 0.5f);
    const float r = x - (float)n * ln2;
    float p = 1.0f / 40320.0f;
    p = p * r + 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n in two steps, so n down to -126 - 24 stays in range. */
    union {
        uint32_t u;
        float f;
    } a, b;
    const int32_t n1 = n / 2, n2 = n - n / 2;
    a.u = (uint32_t)(n1 + 127) << 23;
    b.u = (uint32_t)(n2 + 127) << 23;
    return p * a.f * b.f;
}

/* Reduced to [-pi/4, pi/4] in double (positions times frequencies reach
 * thousands of radians), then Taylor polynomials. */
void dsp_sincosf(float x, float* s, float* c) {
    const double half_pi = 1.57079632679489661923;
    const double q = (double)x * 0.63661977236758134308; /* 2 / pi */
    const int64_t n = (int64_t)(q < 0 ? q - 0.5 : q + 0.5);
    const double y = (double)x - (double)n * half_pi;
    const double y2 = y * y;
    /* Multiplications only: the DSP has no divide instruction. */
    const double sy =
        y *
        (1 - y2 * (1.0 / 6) *
                 (1 - y2 * (1.0 / 20) *
                          (1 - y2 * (1.0 / 42) * (1 - y2 * (1.0 / 72) * (1 - y2 * (1.0 / 110))))));
    const double cy =
        1 - y2 * 0.5 *
                (1 - y2 * (1.0 / 12) *
                         (1 - y2 * (1.0 / 30) * (1 - y2 * (1.0 / 56) * (1 - y2 * (1.0 / 90)))));
    switch ((int)(n & 3)) {
        case 0:
            *s = (float)sy;
            *c = (float)cy;
            break;
        case 1:
            *s = (float)cy;
            *c = (float)-sy;
            break;
        case 2:
            *s = (float)-sy;
            *c = (float)-cy;
            break;
        default:
            *s = (float)-cy;
            *c = (float)sy;
            break;
    }
}

void dsp_quantize_row_q8_0(const float* x, dsp_block_q8_0* out, int32_t k) {
    for (int32_t b = 0; b < k / 32; ++b) {
        float amax = 0.0f;
        for (int i = 0; i < 32; ++i) {
            const float a = x[b * 32 + i] < 0 ? -x[b * 32 + i] : x[b * 32 + i];
            amax = a > amax ? a : amax;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = dsp_f32_to_fp16(d);
        for (int i = 0; i < 32; ++i) {
            const float v = x[b * 32 + i] * id;
            out[b].qs[i] = (int8_t)(v < 0 ? v - 0.5f : v + 0.5f); /* round half away */
        }
    }
}

static uint16_t load_u16(const uint8_t* p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* The int8 values of weight block b of a row (Q4_0: nibble - 8). */
void dsp_weight_block_i8(const uint8_t* row, int32_t wtype, int32_t b, int8_t q[32], float* d) {
    if (wtype == DSP_W_Q8_0) {
        const uint8_t* blk = row + b * 34;
        *d = dsp_fp16_to_f32(load_u16(blk));
        for (int i = 0; i < 32; ++i) q[i] = (int8_t)blk[2 + i];
        return;
    }
    const uint8_t* blk = row + b * 18;
    *d = dsp_fp16_to_f32(load_u16(blk));
    for (int i = 0; i < 16; ++i) {
        q[i] = (int8_t)((blk[2 + i] & 15) - 8);
        q[i + 16] = (int8_t)((blk[2 + i] >> 4) - 8);
    }
}

void dsp_matmul_ref(const uint8_t* w, size_t row_bytes, int32_t wtype, const dsp_block_q8_0* x,
                    float* out, int32_t k, int32_t n_rows) {
    for (int32_t n = 0; n < n_rows; ++n) {
        const uint8_t* row = w + (size_t)n * row_bytes;
        float sum = 0.0f;
        for (int32_t b = 0; b < k / 32; ++b) {
            int8_t q[32];
            float dw;
            dsp_weight_block_i8(row, wtype, b, q, &dw);
            int32_t dot = 0;
            for (int i = 0; i < 32; ++i) dot += (int32_t)q[i] * x[b].qs[i];
            sum += (float)dot * (dw * dsp_fp16_to_f32(x[b].d));
        }
        out[n] = sum;
    }
}

void dsp_rms_norm_ref(const float* x, float* out, int32_t n, float eps) {
    float s = 0.0f;
    for (int32_t i = 0; i < n; ++i) s += x[i] * x[i];
    const float scale = 1.0f / dsp_sqrtf(s / (float)n + eps);
    for (int32_t i = 0; i < n; ++i) out[i] = x[i] * scale;
}

void dsp_swiglu_ref(const float* gate, const float* up, float* out, int32_t n) {
    for (int32_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + dsp_expf(-gate[i])) * up[i];
}

void dsp_binary_ref(const float* a, const float* b, float* out, int32_t n, int32_t b_len,
                    int32_t op) {
    for (int32_t i = 0; i < n; ++i) {
        const float y = b[i % b_len];
        out[i] = op == 0 ? a[i] + y : a[i] * y;
    }
}

void dsp_rope_ref(const float* x, float* out, int32_t hd, int32_t n_head, int32_t n_rot,
                  int32_t neox, int32_t pos, float theta_scale, float freq_scale) {
    for (int32_t h = 0; h < n_head; ++h) {
        const float* xh = x + h * hd;
        float* oh = out + h * hd;
        for (int32_t i = n_rot; i < hd; ++i) oh[i] = xh[i];
        float theta = (float)pos * freq_scale;
        for (int32_t i = 0; i < n_rot / 2; ++i) {
            float s, c;
            dsp_sincosf(theta, &s, &c);
            const int32_t a = neox ? i : 2 * i;
            const int32_t b = neox ? i + n_rot / 2 : 2 * i + 1;
            const float x0 = xh[a], x1 = xh[b];
            oh[a] = x0 * c - x1 * s;
            oh[b] = x0 * s + x1 * c;
            theta *= theta_scale;
        }
    }
}
