/* A freestanding Hexagon program (no libc: Linux system calls through
 * trap0) that checks every HVX kernel against its portable version, and the
 * portable float helpers against known values. CI runs it under
 * qemu-hexagon; exit status 0 means every check passed. */
#include "dsp_kernels.h"
#include "dsp_protocol.h"

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

/* A value with a random sign and a magnitude spread over 2^-12 .. 2^12,
 * or zero one time in sixteen: lane floats must keep each value's own
 * precision, not the row maximum's. */
static float fwide(void) {
    const uint32_t r = next();
    if ((r & 15u) == 0) return 0.0f;
    float v = 1.0f + (float)((r >> 4) & 1023u) * (1.0f / 1024.0f);
    int32_t e = (int32_t)((r >> 14) % 25u) - 12;
    for (; e > 0; --e) v *= 2.0f;
    for (; e < 0; ++e) v *= 0.5f;
    return (r >> 30) & 1u ? -v : v;
}

/* |got - want| <= rel * |want| + abs_tol, for every element. */
static int close_all(const float* got, const float* want, int32_t n, float rel, float abs_tol) {
    for (int32_t i = 0; i < n; ++i) {
        const float d = fabs_(got[i] - want[i]);
        if (!(d <= rel * fabs_(want[i]) + abs_tol)) return 0;
    }
    return 1;
}

#define K 256
#define N 7
#define V 200 /* not a multiple of 32: the kernels' tails run too */
static float va[V], vb[V], vr[V], vh[V];
static double vd[V];

/* Double-precision references without double division (no runtime
 * helper for it here): Newton steps from the float results. */
static double recip_d(double x) {
    double y = (double)(1.0f / (float)x);
    for (int i = 0; i < 2; ++i) y = y * (2.0 - x * y);
    return y;
}
static double sqrt_d(double x) {
    double y = (double)dsp_sqrtf((float)x);
    for (int i = 0; i < 2; ++i) y = 0.5 * (y + x * recip_d(y));
    return y;
}

static void check_elementwise_kernels(void) {
    for (int i = 0; i < V; ++i) {
        va[i] = fwide();
        vb[i] = fwide();
    }
    /* add and mul, with a full-length second operand and broadcast rows */
    static const int32_t b_lens[3] = {V, 64, 24};
    for (int t = 0; t < 3; ++t) {
        for (int32_t op = 0; op < 2; ++op) {
            dsp_binary_ref(va, vb, vr, V, b_lens[t], op);
            dsp_binary_hvx(va, vb, vh, V, b_lens[t], op);
            int ok = 1;
            for (int i = 0; i < V; ++i) {
                const double y = vb[i % b_lens[t]];
                vd[i] = op == 0 ? (double)va[i] + y : (double)va[i] * y;
                /* a sum is within a float rounding of the larger operand */
                const double mag = op == 0 ? fabs_(va[i]) + fabs_((float)y) : fabs_((float)vd[i]);
                ok &= fabs_((float)((double)vh[i] - vd[i])) <= 1.2e-7f * (float)mag;
            }
            ok &= close_all(vh, vr, V, 2.5e-7f, 0.0f) || op == 0;
            check(ok, op == 0 ? "add: hvx ~ portable ~ exact (b_len 200 / 64 / 24)"
                              : "mul: hvx ~ portable ~ exact (b_len 200 / 64 / 24)");
        }
    }
    /* RMSNorm against a double-precision reference */
    dsp_rms_norm_ref(va, vr, V, 1e-5f);
    dsp_rms_norm_hvx(va, vh, V, 1e-5f);
    double ss = 0.0;
    for (int i = 0; i < V; ++i) ss += (double)va[i] * va[i];
    const double scale = recip_d(sqrt_d(ss * (1.0 / V) + 1e-5));
    for (int i = 0; i < V; ++i) vd[i] = va[i] * scale;
    int ok = close_all(vh, vr, V, 1e-6f, 0.0f);
    for (int i = 0; i < V; ++i) ok &= fabs_((float)(vh[i] - vd[i])) <= 1e-6f * fabs_((float)vd[i]);
    check(ok, "rms_norm: hvx ~ portable ~ double reference");
    /* SwiGLU over gates in [-20, 20] and around zero */
    for (int i = 0; i < V; ++i) va[i] = (float)(int32_t)(next() % 4001u - 2000) * 0.01f;
    va[0] = 0.0f;
    va[1] = 1e-4f;
    va[2] = -70.0f;
    va[3] = 70.0f;
    dsp_swiglu_ref(va, vb, vr, V);
    dsp_swiglu_hvx(va, vb, vh, V);
    ok = 1;
    for (int i = 0; i < V; ++i) {
        const double g = va[i];
        const double want = g * recip_d(1.0 + (double)dsp_expf(-va[i])) * vb[i];
        ok &= fabs_((float)(vh[i] - want)) <= 2e-6f * fabs_((float)want) + 1e-30f;
        ok &= fabs_(vh[i] - vr[i]) <= 2e-6f * fabs_(vr[i]) + 1e-30f;
    }
    check(ok, "swiglu: hvx ~ portable ~ reference");
    /* RoPE, both pairings, a position in the thousands, partial rotation */
    static float xr[4 * 64], rr[4 * 64], rh[4 * 64];
    for (int i = 0; i < 4 * 64; ++i) xr[i] = frand();
    for (int32_t neox = 0; neox < 2; ++neox) {
        for (int32_t t = 0; t < 2; ++t) {
            const int32_t n_rot = t ? 32 : 64;
            dsp_rope_ref(xr, rr, 64, 4, n_rot, neox, 1234, 0.7498942f, 1.0f);
            dsp_rope_hvx(xr, rh, 64, 4, n_rot, neox, 1234, 0.7498942f, 1.0f);
            check(close_all(rh, rr, 4 * 64, 1e-6f, 1e-7f),
                  neox ? (t ? "rope neox n_rot 32: hvx ~ portable" : "rope neox: hvx ~ portable")
                       : (t ? "rope n_rot 32: hvx ~ portable" : "rope: hvx ~ portable"));
        }
    }
}
static uint8_t weights[N * (K / 32) * 34];
static dsp_block_q8_0 xq[K / 32];
static float x[K], a_out[N], b_out[N];

/* A batch through the dispatcher, as the skel runs it: RMSNorm, a weight
 * mul, a Q8_0 matmul, SwiGLU, a residual add and RoPE over one arena
 * (fd 7). Each op's output is checked against the portable kernel applied
 * to the inputs the batch itself produced. */
enum {
    A_X = 0,
    A_W = 512,
    A_T1 = 1024,
    A_T2 = 1536,
    A_T3 = 2048,
    A_T4 = 2560,
    A_T5 = 3072,
    A_T6 = 3584,
    A_POS = 4096,
    A_MAT = 4160,
    A_END = A_MAT + 64 * 2 * 34
};
static uint8_t arena[A_END] __attribute__((aligned(128)));
static dwell_dsp_batch batch;
static dwell_dsp_result result;
static float want[128];

static void* resolve_arena(void* user, dwell_dsp_ref ref) {
    (void)user;
    return ref.fd == 7 && ref.offset < A_END ? arena + ref.offset : 0;
}

static dwell_dsp_op* add_op(uint32_t kind, int32_t k, int32_t n, int32_t m, uint32_t a, uint32_t b,
                            uint32_t out) {
    dwell_dsp_op* op = &batch.ops[batch.n_ops++];
    op->kind = kind;
    op->k = k;
    op->n = n;
    op->m = m;
    op->a.fd = op->b.fd = op->out.fd = op->w.fd = 7;
    op->a.offset = a;
    op->b.offset = b;
    op->out.offset = out;
    return op;
}

#define AT(off) ((float*)(arena + (off)))
static void check_dispatched_batch(void) {
    for (int i = 0; i < 128; ++i) AT(A_X)[i] = frand() * 4.0f;
    for (int i = 0; i < 64; ++i) AT(A_W)[i] = 0.5f + frand();
    ((int32_t*)(arena + A_POS))[0] = 17;
    ((int32_t*)(arena + A_POS))[1] = 901;
    for (int i = 0; i < 64 * 2 * 34; ++i) arena[A_MAT + i] = (uint8_t)next();
    for (int r = 0; r < 64 * 2; ++r) {
        const uint16_t d = dsp_f32_to_fp16(0.002f + (float)(next() % 100u) * 0.0001f);
        arena[A_MAT + r * 34] = (uint8_t)d;
        arena[A_MAT + r * 34 + 1] = (uint8_t)(d >> 8);
    }
    batch.version = DWELL_DSP_PROTOCOL_VERSION;
    batch.n_ops = 0;
    add_op(DWELL_DSP_RMS_NORM, 64, 2, 0, A_X, 0, A_T1)->f0 = 1e-5f;
    add_op(DWELL_DSP_MUL, 128, 0, 0, A_T1, A_W, A_T2)->b_len = 64;
    dwell_dsp_op* mm = add_op(DWELL_DSP_MATMUL, 64, 64, 2, A_T2, 0, A_T3);
    mm->wtype = DSP_W_Q8_0;
    mm->w.offset = A_MAT;
    mm->w_row_bytes = 2 * 34;
    add_op(DWELL_DSP_SWIGLU, 128, 0, 0, A_T3, A_T2, A_T4);
    add_op(DWELL_DSP_ADD, 128, 0, 0, A_T4, A_X, A_T5)->b_len = 128;
    dwell_dsp_op* rope = add_op(DWELL_DSP_ROPE, 16, 4, 2, A_T5, A_POS, A_T6);
    rope->b_len = 16;
    rope->f0 = 0.3162278f; /* 10000^(-2/16) */
    rope->f1 = 1.0f;
    dwell_dsp_run_batch(&batch, resolve_arena, 0, &result);
    check(result.status == 0, "dispatcher: a six-op batch runs");
    for (int r = 0; r < 2; ++r) dsp_rms_norm_ref(AT(A_X) + 64 * r, want + 64 * r, 64, 1e-5f);
    check(close_all(AT(A_T1), want, 128, 2e-6f, 1e-7f), "dispatcher: rms_norm");
    dsp_binary_ref(AT(A_T1), AT(A_W), want, 128, 64, 1);
    check(close_all(AT(A_T2), want, 128, 2e-7f, 0.0f), "dispatcher: mul");
    for (int r = 0; r < 2; ++r) {
        dsp_quantize_row_q8_0(AT(A_T2) + 64 * r, xq, 64);
        dsp_matmul_ref(arena + A_MAT, 2 * 34, DSP_W_Q8_0, xq, want + 64 * r, 64, 64);
    }
    int same = 1;
    for (int i = 0; i < 128; ++i) same &= AT(A_T3)[i] == want[i];
    check(same, "dispatcher: matmul q8_0 (bit-identical)");
    dsp_swiglu_ref(AT(A_T3), AT(A_T2), want, 128);
    check(close_all(AT(A_T4), want, 128, 2e-6f, 1e-30f), "dispatcher: swiglu");
    dsp_binary_ref(AT(A_T4), AT(A_X), want, 128, 128, 0);
    check(close_all(AT(A_T5), want, 128, 1e-6f, 1e-6f), "dispatcher: add");
    for (int t = 0; t < 2; ++t)
        dsp_rope_ref(AT(A_T5) + 64 * t, want + 64 * t, 16, 4, 16, 0, ((int32_t*)(arena + A_POS))[t],
                     0.3162278f, 1.0f);
    check(close_all(AT(A_T6), want, 128, 1e-6f, 1e-6f), "dispatcher: rope");
    batch.ops[2].w.fd = 8;
    dwell_dsp_run_batch(&batch, resolve_arena, 0, &result);
    check(result.status != 0 && result.failed_op == 2,
          "dispatcher: an unmapped buffer fails its op");
}

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
    check_elementwise_kernels();
    check_dispatched_batch();
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
