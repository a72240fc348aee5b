/* What the hexagon plugin's host side sends the DSP in one FastRPC call:
 * a batch of ops over shared (rpcmem) buffers named by file descriptor and
 * offset, and what comes back. Shared by the host side, the DSP-side
 * dispatcher and the test double; plain C, fixed-size little-endian fields.
 *
 * Thread-safety: plain data. Ownership: the host owns every buffer. */
#ifndef DWELL_DSP_PROTOCOL_H
#define DWELL_DSP_PROTOCOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DWELL_DSP_PROTOCOL_VERSION 1
#define DWELL_DSP_MAX_OPS 64
/* The FastRPC method batches go to: dwell_dsp.idl's `run`, the first
 * method after the open (0) and close (1) of a remote_handle64 interface.
 * Its arguments, as the IDL compiler marshals them: input buffer 0 holds
 * the two sequence lengths (dwell_dsp_run_lengths), input buffer 1 the
 * batch, output buffer 0 the result. */
#define DWELL_DSP_METHOD_RUN 2

typedef struct dwell_dsp_run_lengths {
    uint32_t batch_len;
    uint32_t result_len;
} dwell_dsp_run_lengths;

enum dwell_dsp_op_kind {
    DWELL_DSP_MATMUL = 1,   /* out[m][n] = W[n] . x[m]; wtype 0 (f32), 3 (q8_0), 4 (q4_0) */
    DWELL_DSP_RMS_NORM = 2, /* rows of n; f0 = eps */
    DWELL_DSP_SWIGLU = 3,   /* silu(a) * b, count values */
    DWELL_DSP_ADD = 4,      /* a + b, b repeating every b_len */
    DWELL_DSP_MUL = 5,
    DWELL_DSP_ROPE = 6 /* [hd, n_head] per token, positions from `b` (int32) */
};

typedef struct dwell_dsp_ref {
    int32_t fd;      /* rpcmem buffer, mapped to the DSP */
    uint32_t offset; /* bytes into it */
} dwell_dsp_ref;

typedef struct dwell_dsp_op {
    uint32_t kind;
    int32_t wtype;
    int32_t k, n, m;      /* matmul: K, N, rows of x; others: row length, rows, - */
    int32_t b_len;        /* add/mul broadcast; rope: n_rot */
    int32_t i0;           /* rope: neox */
    float f0, f1;         /* rms_norm eps; rope theta_scale, freq_scale */
    uint64_t w_row_bytes; /* matmul */
    dwell_dsp_ref w, a, b, out;
} dwell_dsp_op;

typedef struct dwell_dsp_batch {
    uint32_t version;
    uint32_t n_ops;
    dwell_dsp_op ops[DWELL_DSP_MAX_OPS];
} dwell_dsp_batch;

typedef struct dwell_dsp_result {
    int32_t status; /* 0: every op ran */
    int32_t failed_op;
    char message[120];
} dwell_dsp_result;

/* Runs a batch, resolving (fd, offset) to addresses with `resolve` (null
 * when the buffer is not mapped). Writes the outcome to `res`. The DSP skel
 * and the host's test double both call this. */
typedef void* (*dwell_dsp_resolve_fn)(void* user, dwell_dsp_ref ref);
void dwell_dsp_run_batch(const dwell_dsp_batch* batch, dwell_dsp_resolve_fn resolve, void* user,
                         dwell_dsp_result* res);

#ifdef __cplusplus
}
#endif
#endif /* DWELL_DSP_PROTOCOL_H */
