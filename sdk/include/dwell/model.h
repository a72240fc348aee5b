/* dwell SDK — the model-architecture plugin interface.
 *
 * A model plugin reads the model's hyper-parameters through dwell_metadata
 * (GGUF keys or pack metadata), declares the weight tensors it needs, and
 * builds the forward graph for a batch of tokens through the host's
 * dwell_graph_builder. It never touches a backend.
 *
 * Graph conventions the host relies on:
 *  - builder->input("tokens", I32, [T]) and builder->input("positions", I32,
 *    [T]) are filled by the host with the batch's token ids and positions;
 *    builder->input("out_rows", I32, [R]) with the indices (0..T-1) of the
 *    batch rows whose logits are wanted.
 *  - builder->kv_cache(layer, 0|1) returns the key|value cache of a layer,
 *    shaped [kv_width, n_ctx] as declared in dwell_model_info.
 *  - set_output marks the logits tensor, [n_vocab, R] F32.
 *  - ABI 1.6: builder->recurrent_state(layer, which, ...) returns the
 *    sequence's carried state `which` (0 or 1) of a layer, F32, of
 *    dwell_model_info.state_elems[which] elements, for hybrid models (LFM2's
 *    convolution state; a linear-attention state). The host owns it per
 *    session: zero in a fresh sequence, copied by fork, carried by session
 *    files, restored when a step fails, and kept as it is by a context
 *    shift (so only state that depends on the last tokens alone, such as a
 *    short convolution's, stays exact across one). Only ops that document
 *    writing it (SHORT_CONV) may write it.
 *
 * Thread-safety: calls on one model object come from one thread at a time
 * (the host serialises build_graph across sessions); different model
 * objects may be used concurrently.
 * Ownership: the plugin owns its dwell_model; the host owns metadata and
 * builder objects, valid only during the call they are passed to. */
#ifndef DWELL_MODEL_H
#define DWELL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "dwell/graph.h"
#include "dwell/plugin.h"
#include "dwell/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Read-only access to the model file's key/value metadata and tensor table. */
typedef struct dwell_metadata {
    uint32_t struct_size;
    void* self;
    /* Each getter returns 1 and sets *out when the key exists with a
     * compatible type, else 0. Integers of any width and sign convert to
     * int64 (a uint64 above INT64_MAX is reported absent); integers and
     * floats convert to double. Strings are NOT NUL-terminated: use *len. */
    int32_t (*get_int)(void* self, const char* key, int64_t* out);
    int32_t (*get_float)(void* self, const char* key, double* out);
    int32_t (*get_string)(void* self, const char* key, const char** out, size_t* len);
    /* Array length, 0 if the key is absent or not an array. */
    int32_t (*get_array_length)(void* self, const char* key, uint64_t* out);
    /* Shape and dtype of a tensor stored in the file; 0 if absent. */
    int32_t (*get_tensor)(void* self, const char* name, dwell_dtype* dtype, int32_t* n_dims,
                          int64_t ne[DWELL_MAX_DIMS]);
} dwell_metadata;

typedef struct dwell_model dwell_model; /* opaque, plugin-owned */

typedef struct dwell_model_info {
    uint32_t struct_size;
    int64_t n_vocab;
    int64_t n_ctx_train;
    int32_t n_layer;
    int64_t kv_width; /* head_dim * n_head_kv: elements per cached token per layer */
    /* ABI 1.6 (check DWELL_HAS_FIELD): F32 elements of the carried
     * per-sequence states 0 and 1 of each layer that has them; 0 = none.
     * A model with state_elems[0] > 0 is hybrid (see recurrent_state). */
    int64_t state_elems[2];
    /* ABI 1.7 (check DWELL_HAS_FIELD): DWELL_MODEL_* bits. */
    uint32_t flags;
} dwell_model_info;

/* dwell_model_info.flags. STATE_SPANS_CONTEXT: the carried state sums up
 * every token the sequence has seen (a gated delta net's), not a window of
 * the last few, so it cannot be kept exact when tokens are dropped: the
 * host refuses a context shift instead of continuing from a state that
 * still holds them. */
enum { DWELL_MODEL_STATE_SPANS_CONTEXT = 1u << 0 };

typedef struct dwell_tensor_decl {
    uint32_t struct_size;
    const char* name;
    int32_t n_dims;
    int64_t ne[DWELL_MAX_DIMS];
    int32_t required; /* 0: optional (e.g. output.weight when embeddings are tied) */
} dwell_tensor_decl;

typedef struct dwell_batch {
    uint32_t struct_size;
    int32_t n_tokens;  /* tokens in this step */
    int32_t n_outputs; /* rows of logits wanted */
    /* ABI 1.5 (check DWELL_HAS_FIELD): positions the session's KV cache
     * holds, for choices that depend on the context size (LongRoPE's short
     * or long factors). */
    int32_t n_ctx;
} dwell_batch;

/* The host's graph builder. Every function returns a tensor id >= 0, or -1
 * on error (the message is then in last_error). Shapes are checked and
 * inferred by the host. */
typedef struct dwell_graph_builder {
    uint32_t struct_size;
    void* self;
    int32_t (*input)(void* self, const char* name, dwell_dtype dtype, int32_t n_dims,
                     const int64_t* ne);
    int32_t (*weight)(void* self, const char* name); /* a declared tensor; -1 if absent */
    int32_t (*kv_cache)(void* self, int32_t layer, int32_t which /* 0 = K, 1 = V */);
    int32_t (*op)(void* self, dwell_op op, const int32_t* inputs, int32_t n_inputs,
                  const int32_t* iparams, int32_t n_iparams, const float* fparams,
                  int32_t n_fparams);
    /* A view with another shape of the same contiguous data (no node). */
    int32_t (*reshape)(void* self, int32_t tensor, int32_t n_dims, const int64_t* ne);
    /* Tag the nodes added from now on with a layer index (-1: none). */
    void (*set_layer)(void* self, int32_t layer);
    dwell_status (*set_output)(void* self, int32_t tensor);
    const char* (*last_error)(void* self);
    /* ABI 1.5 (check DWELL_HAS_FIELD): rows [first_row, first_row + n_rows)
     * of a declared 2-D weight [K, N], as a weight [K, n_rows] of its own
     * that shares the file's data (no copy, no node): the parts of a fused
     * weight such as attn_qkv or a gate/up ffn_up. -1 if the weight is
     * absent or the rows are out of range. */
    int32_t (*weight_rows)(void* self, const char* name, int64_t first_row, int64_t n_rows);
    /* ABI 1.6 (check DWELL_HAS_FIELD): the layer's carried state `which`
     * (0 or 1), as an F32 tensor of the given shape, whose element count
     * must equal dwell_model_info.state_elems[which]. -1 if the model
     * declared no such state or the shape does not match. */
    int32_t (*recurrent_state)(void* self, int32_t layer, int32_t which, int32_t n_dims,
                               const int64_t* ne);
    /* ABI 1.8 (check DWELL_HAS_FIELD): a read-only F32 tensor of the given
     * shape holding a copy of `data` (as many floats as the shape has
     * elements), for values a plugin computes from the metadata rather than
     * reads from the file (YaRN's RoPE frequency factors). Backends see it as
     * a weight named `name`; a second call with the same name returns the
     * first tensor. -1 on a bad shape or a name the file's tensors use. */
    int32_t (*constant)(void* self, const char* name, int32_t n_dims, const int64_t* ne,
                        const float* data);
} dwell_graph_builder;

typedef struct dwell_model_plugin {
    uint32_t struct_size;
    const char* const* architectures; /* general.architecture values served */
    size_t n_architectures;

    /* Makes the model object for a file whose general.architecture this
     * plugin lists. Several plugins may list one architecture (variants of a
     * family that share its name, such as dense and mixture-of-experts
     * "llama" files): the host offers the file to each of them in a fixed
     * order (plugin search folders in order, file names sorted within a
     * folder) and the first that accepts serves it. A plugin declines a file
     * that is not its variant by returning DWELL_ERR_UNSUPPORTED with a
     * one-line reason; the host then offers the file to the next plugin and,
     * if every one declines, reports each plugin's reason. Any other failure
     * status refuses the file itself and ends the search.
     * On failure writes a one-line reason into error[0..error_size). */
    dwell_status (*create)(const dwell_metadata* meta, const dwell_host_services* host,
                           dwell_model** out, char* error, size_t error_size);
    void (*destroy)(dwell_model* model);
    const char* (*last_error)(dwell_model* model);
    dwell_status (*get_info)(dwell_model* model, dwell_model_info* info);
    /* Calls `declare` once per tensor the model reads. */
    dwell_status (*declare_tensors)(dwell_model* model,
                                    void (*declare)(void* user, const dwell_tensor_decl* decl),
                                    void* user);
    dwell_status (*build_graph)(dwell_model* model, const dwell_graph_builder* builder,
                                const dwell_batch* batch);
} dwell_model_plugin;

#ifdef __cplusplus
}
#endif
#endif /* DWELL_MODEL_H */
