/* A freestanding Hexagon program (no libc: Linux system calls through
 * trap0) that checks every HVX kernel against its portable version, and the
 * portable float helpers against known values. CI runs it under
 * qemu-hexagon; exit status 0 means every check passed. */
#include "dsp_kernels.h"

static long sys3(long n, long a, long b, long c) {
    register long r6 __asm__("r6") = n;
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r6), "r"(r1), "r"(r2) : "memory");
    return r0;
}

static void say(const char* s) {
    long n = 0;
    while (s[n]) ++n;
    sys3(64 /* write */, 1, (long)s, n);
}

static uint32_t rng = 12345u;
static uint32_t next(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}
static float frand(void) {
    return (float)(int32_t)(next() % 2001u - 1000) * 0.001f;
}

static int failures = 0;
static void check(int ok, const char* what) {
    say(ok ? "ok   " : "FAIL ");
    say(what);
    say("\n");
    failures += !ok;
}

static float fabs_(float x) {
    return x < 0 ? -x : x;
}

#define K 256
#define N 7
static uint8_t weights[N * (K / 32) * 34];
static dsp_block_q8_0 xq[K / 32];
static float x[K], a_out[N], b_out[N];

void _start(void) {
    /* matmul: HVX == portable, bit for bit, for both weight types. */
    for (int t = 0; t < 2; ++t) {
        const int32_t wtype = t ? DSP_W_Q8_0 : DSP_W_Q4_0;
        const size_t row_bytes = (size_t)(K / 32) * (t ? 34 : 18);
        for (size_t i = 0; i < N * row_bytes; ++i) weights[i] = (uint8_t)next();
        for (int32_t n = 0; n < N; ++n) {
            for (int32_t b = 0; b < K / 32; ++b) {
                const uint16_t d = dsp_f32_to_fp16(0.01f + (float)(next() % 100u) * 0.001f);
                uint8_t* blk = weights + n * row_bytes + (size_t)b * (t ? 34 : 18);
                blk[0] = (uint8_t)d;
                blk[1] = (uint8_t)(d >> 8);
            }
        }
        for (int i = 0; i < K; ++i) x[i] = frand();
        dsp_quantize_row_q8_0(x, xq, K);
        dsp_matmul_ref(weights, row_bytes, wtype, xq, a_out, K, N);
        dsp_matmul_hvx(weights, row_bytes, wtype, xq, b_out, K, N);
        int same = 1;
        for (int n = 0; n < N; ++n) same &= a_out[n] == b_out[n];
        check(same, t ? "matmul q8_0: hvx == portable" : "matmul q4_0: hvx == portable");
        /* and the portable one against a float dot of the dequantized values */
        int near = 1;
        for (int n = 0; n < N; ++n) {
            float ref = 0.0f, mag = 0.0f;
            for (int32_t b = 0; b < K / 32; ++b) {
                int8_t q[32];
                float dw;
                dsp_weight_block_i8(weights + n * row_bytes, wtype, b, q, &dw);
                for (int i = 0; i < 32; ++i) {
                    ref += dw * (float)q[i] * x[b * 32 + i];
                    mag += fabs_(dw * (float)q[i] * x[b * 32 + i]);
                }
            }
            near &= fabs_(a_out[n] - ref) <= 0.02f * mag + 1e-6f;
        }
        check(near, "matmul: portable ~ float reference (int8 activations)");
    }
#ifdef __HVX__
    say("HVX kernels: built and run as HVX\n");
#else
    say("HVX kernels: not built (no HVX): portable only\n");
#endif
    /* helpers */
    check(fabs_(dsp_sqrtf(2.0f) - 1.41421356f) < 1e-6f, "sqrt(2)");
    check(fabs_(dsp_expf(1.0f) - 2.71828183f) < 3e-6f, "exp(1)");
    check(fabs_(dsp_expf(-10.0f) - 4.539993e-5f) < 1e-10f, "exp(-10)");
    float s, c;
    dsp_sincosf(1000.0f, &s, &c);
    check(fabs_(s - 0.82687954f) < 2e-6f && fabs_(c - 0.56237907f) < 2e-6f, "sincos(1000)");
    check(dsp_fp16_to_f32(dsp_f32_to_fp16(0.333333f)) == 0.33325195f, "fp16 round trip");
    float v[4] = {1, 1, 1, 1}, o[4];
    dsp_rms_norm_ref(v, o, 4, 0.0f);
    check(fabs_(o[0] - 1.0f) < 1e-6f, "rms_norm of ones");
    float g[2] = {0.0f, 2.0f}, u[2] = {3.0f, 1.0f};
    dsp_swiglu_ref(g, u, o, 2);
    check(o[0] == 0.0f && fabs_(o[1] - 1.7615942f) < 1e-5f, "swiglu");
    say(failures ? "dsp selftest: FAILED\n" : "dsp selftest: all passed\n");
    sys3(93 /* exit */, failures ? 1 : 0, 0, 0);
    for (;;) {
    }
}
