/* The DSP side's batch dispatcher (dsp_protocol.h): checks each op and runs
 * it with the HVX kernels (the portable ones when built without HVX, as in
 * the host-side test double). */
#include "dsp_kernels.h"
#include "dsp_protocol.h"

static void fail(dwell_dsp_result* res, int32_t op, const char* why) {
    res->status = 1;
    res->failed_op = op;
    int i = 0;
    for (; why[i] && i < (int)sizeof res->message - 1; ++i) res->message[i] = why[i];
    res->message[i] = 0;
}

/* Scratch for one activation row quantized to Q8_0 (K up to 16384). */
static dsp_block_q8_0 g_xq[16384 / 32];

void dwell_dsp_run_batch(const dwell_dsp_batch* batch, dwell_dsp_resolve_fn resolve, void* user,
                         dwell_dsp_result* res) {
    res->status = 0;
    res->failed_op = -1;
    res->message[0] = 0;
    if (batch->version != DWELL_DSP_PROTOCOL_VERSION || batch->n_ops > DWELL_DSP_MAX_OPS) {
        fail(res, -1, "batch version or op count not understood");
        return;
    }
    for (uint32_t i = 0; i < batch->n_ops; ++i) {
        const dwell_dsp_op* op = &batch->ops[i];
        float* out = (float*)resolve(user, op->out);
        const float* a = (const float*)resolve(user, op->a);
        if (out == 0 || (op->kind != DWELL_DSP_MATMUL && a == 0)) {
            fail(res, (int32_t)i, "a buffer of the op is not mapped");
            return;
        }
        switch (op->kind) {
            case DWELL_DSP_MATMUL: {
                const uint8_t* w = (const uint8_t*)resolve(user, op->w);
                if (w == 0 || a == 0) {
                    fail(res, (int32_t)i, "matmul weights or x not mapped");
                    return;
                }
                if (op->wtype == 0) {
                    for (int32_t m = 0; m < op->m; ++m)
                        for (int32_t n = 0; n < op->n; ++n) {
                            const float* wr = (const float*)(w + (uint64_t)n * op->w_row_bytes);
                            float s = 0.0f;
                            for (int32_t j = 0; j < op->k; ++j)
                                s += wr[j] * a[(int64_t)m * op->k + j];
                            out[(int64_t)m * op->n + n] = s;
                        }
                    break;
                }
                if (op->k % 32 != 0 || op->k > 16384) {
                    fail(res, (int32_t)i, "matmul K must be a multiple of 32, at most 16384");
                    return;
                }
                for (int32_t m = 0; m < op->m; ++m) {
                    dsp_quantize_row_q8_0(a + (int64_t)m * op->k, g_xq, op->k);
                    dsp_matmul_hvx(w, (size_t)op->w_row_bytes, op->wtype, g_xq,
                                   out + (int64_t)m * op->n, op->k, op->n);
                }
                break;
            }
            case DWELL_DSP_RMS_NORM:
                for (int32_t r = 0; r < op->n; ++r)
                    dsp_rms_norm_hvx(a + (int64_t)r * op->k, out + (int64_t)r * op->k, op->k,
                                     op->f0);
                break;
            case DWELL_DSP_SWIGLU:
            case DWELL_DSP_ADD:
            case DWELL_DSP_MUL: {
                const float* b = (const float*)resolve(user, op->b);
                if (b == 0) {
                    fail(res, (int32_t)i, "the second operand is not mapped");
                    return;
                }
                if (op->kind == DWELL_DSP_SWIGLU) {
                    dsp_swiglu_hvx(a, b, out, op->k);
                } else {
                    dsp_binary_hvx(a, b, out, op->k, op->b_len, op->kind == DWELL_DSP_ADD ? 0 : 1);
                }
                break;
            }
            case DWELL_DSP_ROPE: {
                const int32_t* pos = (const int32_t*)resolve(user, op->b);
                if (pos == 0) {
                    fail(res, (int32_t)i, "rope positions not mapped");
                    return;
                }
                /* k = head_dim, n = heads, m = tokens */
                for (int32_t t = 0; t < op->m; ++t) {
                    const int64_t off = (int64_t)t * op->n * op->k;
                    dsp_rope_hvx(a + off, out + off, op->k, op->n, op->b_len, op->i0, pos[t],
                                 op->f0, op->f1);
                }
                break;
            }
            default:
                fail(res, (int32_t)i, "unknown op kind");
                return;
        }
    }
}
