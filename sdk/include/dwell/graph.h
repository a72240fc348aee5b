/* dwell SDK — the graph IR shared by model plugins (producers) and backends
 * (consumers).
 *
 * A graph is a flat array of tensors and a topologically ordered array of
 * nodes. Each node reads up to DWELL_MAX_INPUTS tensors and writes exactly one
 * output tensor (ATTENTION additionally writes the new keys and values into
 * its cache inputs). Leaves (inputs, weights, KV caches) are tensors no node
 * writes.
 *
 * Op contract — shapes use ne[] order (row length first). "[a, b]" means
 * ne[0]=a, ne[1]=b. All activations are F32 unless stated.
 *
 *  GET_ROWS      in0 table [n, R] (any weight dtype), in1 ids I32 [k]
 *                -> [n, k] F32: row ids[i] of the table, dequantized.
 *  MATMUL        in0 weight [K, N] (any weight dtype), in1 x [K, M]
 *                -> [N, M]: out[m][n] = sum_k W[n][k] * x[m][k].
 *  ADD, MUL      in0 [n, ...], in1 same shape, or [n] broadcast over rows.
 *  SCALE         in0 -> in0 * fparams[0].
 *  RMS_NORM      in0 [n, R] -> x / sqrt(mean(x^2) + eps); fparams[0] = eps.
 *  LAYER_NORM    in0 [n, R] -> (x - mean) / sqrt(var + eps); fparams[0] = eps.
 *  ROPE          in0 [head_dim, n_head, T], in1 positions I32 [T], and
 *                since ABI 1.5 an optional in2: frequency factors F32
 *                [n_rot/2] (Llama 3 rope_freqs, LongRoPE short/long factors).
 *                iparams[0] = mode (DWELL_ROPE_NORM pairs (2i, 2i+1),
 *                DWELL_ROPE_NEOX pairs (i, i + n_rot/2)), iparams[1] = n_rot
 *                (rotated dims, <= head_dim; the rest pass through).
 *                fparams[0] = freq_base, fparams[1] = freq_scale (linear
 *                position scaling; 1 = none), fparams[2] = attn_factor
 *                (ABI 1.5: cos and sin are multiplied by it; 0, what a
 *                plugin passing two fparams leaves, and 1 mean none).
 *                theta_i = freq_scale * (pos * freq_base^(-2i/n_rot) / f_i),
 *                f_i = in2[i] (1 without in2); the pair is rotated by theta_i
 *                and scaled by attn_factor.
 *  ATTENTION     in0 q [hd, n_head, T], in1 k [hd, n_kv, T], in2 v [hd, n_kv, T],
 *                in3, in4 the cache (below), in5 positions I32 [T].
 *                First writes k/v of token t into cache row positions[t]
 *                (converted to the cache dtype), then for each token t and
 *                head h attends causally over cache rows 0..positions[t] with
 *                kv head h / (n_head / n_kv) (GQA). fparams[0] = scale.
 *                Since ABI 1.5: iparams[0] = window (0 = none): token t
 *                attends only to rows max(0, positions[t] - window + 1) ..
 *                positions[t], i.e. the window counts the token itself;
 *                fparams[1] = logit soft-cap c (0 = none): each scaled
 *                score s becomes c * tanh(s / c) before the softmax. Both
 *                >= 0; a backend checks both and declines values it does
 *                not implement (1.4 hosts leave them 0).
 *                -> [hd, n_head, T].
 *                Cache rows hold hd * n_kv values in F32, F16, Q8_0 (whole
 *                blocks of 32, so hd * n_kv is a multiple of 32; a block may
 *                span two heads) or FP8_E4M3 (since ABI 1.4, an FP8 key
 *                cache holds each key minus a running offset and rounds it
 *                against the token's own query: quant.h,
 *                dwell_fp8_encode_key; values are plain E4M3). Two forms:
 *                contiguous: in3 k_cache [hd * n_kv, n_ctx], in4 v_cache
 *                (same shape and dtype); row r is position r.
 *                paged: in3 a page space [hd * n_kv, rows_per_page, n_pages]
 *                (nb[1] = row bytes, nb[2] = page bytes, which may exceed
 *                rows_per_page rows), in4 the page table I32 [2, n_logical]:
 *                position r of K is row r % rows_per_page of page
 *                table[r / rows_per_page][0], of V of page [..][1]. The
 *                table names a distinct page for every (logical page, K/V)
 *                the op writes; pages it only reads may be shared with other
 *                sequences. Only in3 is written.
 *  SILU, GELU    elementwise (GELU: tanh approximation).
 *  SWIGLU        in0 gate, in1 up (same shape) -> silu(gate) * up.
 *  SOFTMAX       in0 [n, R] -> softmax over each row.
 *  TOPK          in0 [n, R] -> I32 [k, R]: indices of the k largest values
 *                per row, largest first; iparams[0] = k.
 *  GATHER        in0 [n, R], in1 ids I32 [k, R] -> [k, R]: x[r][ids[r][i]].
 *  EXPERT_MATMUL in0 weights [K, N, E], in1 x [K, T], in2 ids I32 [k, T]
 *                -> [N, k, T]: expert ids[t][i] applied to token t.
 *  MOE_COMBINE   in0 y [N, k, T], in1 w [k, T] -> [N, T]: sum_i w[t][i] * y[t][i].
 *  CPY           in0 -> same shape in dtype iparams[0] (a dwell_dtype): conversion
 *                or quantization.
 *  SOFTCAP       (ABI 1.5) in0 -> c * tanh(in0 / c), elementwise; fparams[0] = c > 0
 *                (Gemma 2's final-logit soft-capping).
 *  SHORT_CONV    (ABI 1.6) in0 x [C, T], in1 kernel [K, C] F32 or F16 (row c
 *                holds channel c's K taps, oldest first; 2 <= K <= 16), in2
 *                the layer's carried state F32 [C, K - 1] from
 *                dwell_graph_builder.recurrent_state (row j is the input K - 1
 *                - j steps before the batch's first token; zeros in a fresh
 *                sequence). With xx = the K - 1 state rows then the T rows of
 *                x: out[t][c] = sum_j kernel[c][j] * xx[t + j][c] -> [C, T].
 *                Then writes the last K - 1 rows of xx into in2: the state
 *                the next batch of the same sequence starts from (LFM2's
 *                short convolution). Only in2 is written; T >= 1.
 *  SIGMOID       (ABI 1.7) in0 -> 1 / (1 + exp(-in0)), elementwise.
 *  SOFTPLUS      (ABI 1.7) in0 -> log(1 + exp(in0)), elementwise; in0 itself
 *                above 20, where the two agree in F32.
 *  SLICE         (ABI 1.7) in0 [n, ...] -> [m, ...]: out[..][i] =
 *                in0[..][iparams[0] + i] with m = iparams[1], 0 <= iparams[0]
 *                and iparams[0] + m <= n: a column range of every row (a fused
 *                projection's parts, a gate interleaved with its query).
 *  GATED_DELTA_NET (ABI 1.7) the gated delta rule of linear-attention layers
 *                (Qwen3.5, Qwen3-Next). in0 q [Dk, Hk, T], in1 k [Dk, Hk, T],
 *                in2 v [Dv, Hv, T], in3 g [Hv, T] (log decay, <= 0 in
 *                practice), in4 beta [Hv, T], in5 the layer's carried state
 *                F32 [Dk, Dv, Hv] from recurrent_state (S_h[j][i] = element
 *                (i, j, h): row j of head h is value dim j; zeros in a fresh
 *                sequence). Hv is a multiple of Hk; value head h reads query
 *                and key head h % Hk. iparams[0] = 1: q and k rows are first
 *                L2-normalised, x / sqrt(sum x^2 + fparams[1]) with
 *                fparams[1] > 0 (0: taken as they are); fparams[0] = the
 *                scale of the output. For each token t
 *                in order and head h, with q, k, v its rows:
 *                  S_h *= exp(g[t][h]);
 *                  d[j] = beta[t][h] * (v[j] - sum_i S_h[j][i] k[i]);
 *                  S_h[j][i] += k[i] d[j];
 *                  out[t][h][j] = fparams[0] * sum_i S_h[j][i] q[i]
 *                -> [Dv, Hv, T]; S_h after the last token is written into
 *                in5. Only in5 is written; T >= 1.
 *  SPARSIFY      (ABI 1.9) in0 x [n, ...] -> same shape: each row (one
 *                token's n values) with its smallest-magnitude entries set
 *                to +0, the rest copied. iparams[0] = mode:
 *                DWELL_SPARSIFY_FRACTION zeroes the floor(fparams[0] * n)
 *                entries that come first in the order (|x|, index)
 *                ascending (ties go to the lower index; NaN sorts above
 *                every number, so it is never zeroed), 0 <= fparams[0] < 1;
 *                DWELL_SPARSIFY_THRESHOLD zeroes every entry with |x| <
 *                fparams[0] (>= 0). The host inserts it before the
 *                projections' MATMULs when activation sparsity is on; a
 *                backend may then skip the weight columns of zeroed inputs.
 *
 * Thread-safety: a graph is immutable while a backend executes it.
 * Ownership: the host owns graphs, tensors and node arrays; a plugin must
 * not keep pointers into them past the call it received them in. */
#ifndef DWELL_GRAPH_H
#define DWELL_GRAPH_H

#include <stdint.h>

#include "dwell/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DWELL_MAX_INPUTS 6
#define DWELL_MAX_PARAMS 8

/* Values are part of the ABI: never renumber, only append. */
typedef enum dwell_op {
    DWELL_OP_NONE = 0, /* a leaf: input, weight or cache */
    DWELL_OP_GET_ROWS = 1,
    DWELL_OP_MATMUL = 2,
    DWELL_OP_ADD = 3,
    DWELL_OP_MUL = 4,
    DWELL_OP_SCALE = 5,
    DWELL_OP_RMS_NORM = 6,
    DWELL_OP_LAYER_NORM = 7,
    DWELL_OP_ROPE = 8,
    DWELL_OP_ATTENTION = 9,
    DWELL_OP_SILU = 10,
    DWELL_OP_GELU = 11,
    DWELL_OP_SWIGLU = 12,
    DWELL_OP_SOFTMAX = 13,
    DWELL_OP_TOPK = 14,
    DWELL_OP_GATHER = 15,
    DWELL_OP_EXPERT_MATMUL = 16,
    DWELL_OP_MOE_COMBINE = 17,
    DWELL_OP_CPY = 18,
    DWELL_OP_SOFTCAP = 19,         /* ABI 1.5 */
    DWELL_OP_SHORT_CONV = 20,      /* ABI 1.6 */
    DWELL_OP_SIGMOID = 21,         /* ABI 1.7 */
    DWELL_OP_SOFTPLUS = 22,        /* ABI 1.7 */
    DWELL_OP_SLICE = 23,           /* ABI 1.7 */
    DWELL_OP_GATED_DELTA_NET = 24, /* ABI 1.7 */
    DWELL_OP_SPARSIFY = 25,        /* ABI 1.9 */
    DWELL_OP_COUNT = 26,
    DWELL_OP_MIN_ENUM_ = -0x7fffffff - 1, /* 32 bits; any int32 loads safely */
    DWELL_OP_MAX_ENUM_ = 0x7fffffff
} dwell_op;

enum { DWELL_ROPE_NORM = 0, DWELL_ROPE_NEOX = 1 };
enum { DWELL_SPARSIFY_FRACTION = 0, DWELL_SPARSIFY_THRESHOLD = 1 };

typedef struct dwell_node {
    dwell_op op;
    int32_t output; /* index into dwell_graph.tensors */
    int32_t n_inputs;
    int32_t inputs[DWELL_MAX_INPUTS];
    int32_t iparams[DWELL_MAX_PARAMS];
    float fparams[DWELL_MAX_PARAMS];
    int32_t layer; /* model layer this node belongs to, -1 if none */
} dwell_node;

typedef struct dwell_graph {
    uint32_t struct_size;
    int32_t n_tensors;
    dwell_tensor* tensors;
    int32_t n_nodes;
    const dwell_node* nodes;
    /* Bytes from one element of `tensors` / `nodes` to the next. A newer
     * host may append fields to dwell_tensor or dwell_node; index through
     * dwell_graph_tensor() and dwell_graph_node(), never tensors[i]. */
    uint32_t tensor_stride;
    uint32_t node_stride;
} dwell_graph;

/* Element i, or NULL when i is out of range. A plugin built against a newer
 * minor version reads fields appended after ABI 1.0 only when the stride
 * shows the host's elements contain them. */
static inline dwell_tensor* dwell_graph_tensor(const dwell_graph* g, int32_t i) {
    if (!g || !g->tensors || i < 0 || i >= g->n_tensors) return (dwell_tensor*)0;
    size_t stride = g->tensor_stride ? g->tensor_stride : sizeof(dwell_tensor);
    return (dwell_tensor*)((char*)g->tensors + (size_t)i * stride);
}

/* Tensor i's flags (DWELL_TENSOR_*), 0 when the host's tensors predate
 * the field (ABI < 1.2) or i is out of range. */
static inline uint32_t dwell_graph_tensor_flags(const dwell_graph* g, int32_t i) {
    const dwell_tensor* t = dwell_graph_tensor(g, i);
    size_t stride;
    if (!t) return 0;
    stride = g->tensor_stride ? g->tensor_stride : sizeof(dwell_tensor);
    if (stride < offsetof(dwell_tensor, flags) + sizeof(uint32_t)) return 0;
    return t->flags;
}

static inline const dwell_node* dwell_graph_node(const dwell_graph* g, int32_t i) {
    if (!g || !g->nodes || i < 0 || i >= g->n_nodes) return (const dwell_node*)0;
    size_t stride = g->node_stride ? g->node_stride : sizeof(dwell_node);
    return (const dwell_node*)((const char*)g->nodes + (size_t)i * stride);
}

static inline const char* dwell_op_name(dwell_op op) {
    static const char* const names[DWELL_OP_COUNT] = {
        "none",       "get_rows",      "matmul",      "add",     "mul",
        "scale",      "rms_norm",      "layer_norm",  "rope",    "attention",
        "silu",       "gelu",          "swiglu",      "softmax", "topk",
        "gather",     "expert_matmul", "moe_combine", "cpy",     "softcap",
        "short_conv", "sigmoid",       "softplus",    "slice",   "gated_delta_net",
        "sparsify"};
    return (op >= 0 && op < DWELL_OP_COUNT) ? names[op] : "unknown";
}

/* The tensor (an input) a node advances in place as its layer's carried state
 * (SHORT_CONV's in2, GATED_DELTA_NET's in5), or -1 when it writes none. */
static inline int32_t dwell_node_state_tensor(const dwell_node* n) {
    int32_t op;
    if (!n) return -1;
    memcpy(&op, &n->op, sizeof op); /* a raw int: any value loads safely */
    if (op == DWELL_OP_SHORT_CONV && n->n_inputs == 3) return n->inputs[2];
    if (op == DWELL_OP_GATED_DELTA_NET && n->n_inputs == 6) return n->inputs[5];
    return -1;
}

#ifdef __cplusplus
}
#endif
#endif /* DWELL_GRAPH_H */
