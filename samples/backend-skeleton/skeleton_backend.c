/* The smallest useful dwell backend: one device that runs ADD and MUL on
 * f32 tensors (MUL also with its second operand repeated along rows, the
 * shape of a norm weight) and declines every other node, which then runs
 * on the next backend the manifest lists. Start a vendor plugin from here:
 * replace device_info with your probe, the loops in graph_compute with
 * calls into your library, and claim more ops in supports_op as your
 * kernels pass dwell-conformance (conformance.toml lists the rest).
 *
 * Thread-safety: the host calls a context from one thread at a time; the
 * plugin-level calls (device_count, device_info) touch no state.
 * Ownership: the host owns every tensor; the context is ours (calloc/free). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwell/backend.h"
#include "dwell/plugin.h"

struct dwell_backend_context {
    char error[160];
};

static dwell_status device_count(void* self, uint32_t* count) {
    (void)self;
    *count = 1;
    return DWELL_OK;
}

static dwell_status device_info(void* self, uint32_t index, dwell_device_info* info) {
    (void)self;
    if (index != 0) return DWELL_ERR_INVALID_ARGUMENT;
    dwell_device_info mine;
    memset(&mine, 0, sizeof mine);
    mine.struct_size = sizeof mine;
    mine.name = "skeleton0";
    mine.description = "sample backend: f32 add and mul on the host";
    mine.kind = DWELL_DEVICE_NPU; /* what a vendor plugin would report */
    mine.hardware_id = "sample:skeleton";
    mine.buffer_kind = DWELL_BUFFER_HOST; /* reads and writes tensor->data */
    mine.available = 1;
    /* Copy no more than the host's struct holds (it may be an older one). */
    const uint32_t keep = info->struct_size;
    memcpy(info, &mine, keep < sizeof mine ? keep : sizeof mine);
    info->struct_size = keep;
    return DWELL_OK;
}

static const char* last_error(void* self) {
    (void)self;
    return "no error";
}

static dwell_status context_create(void* self, uint32_t device, const dwell_option* options,
                                   size_t n_options, const dwell_host_services* host,
                                   dwell_backend_context** out) {
    (void)self;
    (void)device;
    (void)options;
    (void)n_options;
    (void)host;
    *out = calloc(1, sizeof **out);
    return *out ? DWELL_OK : DWELL_ERR_OUT_OF_MEMORY;
}

static void context_destroy(dwell_backend_context* ctx) {
    free(ctx);
}

static const char* context_last_error(dwell_backend_context* ctx) {
    return ctx->error;
}

/* How many elements of b repeat along a: 0 if the shapes do not fit. */
static int64_t operand_period(const dwell_tensor* a, const dwell_tensor* b, int allow_rows) {
    if (a->dtype != DWELL_F32 || b->dtype != DWELL_F32) return 0;
    if (!dwell_tensor_is_contiguous(a) || !dwell_tensor_is_contiguous(b)) return 0;
    const int64_t na = dwell_tensor_nelements(a), nb = dwell_tensor_nelements(b);
    if (na == nb) {
        for (int i = 0; i < DWELL_MAX_DIMS; ++i)
            if (a->ne[i] != b->ne[i]) return 0;
        return nb;
    }
    return allow_rows && nb == a->ne[0] ? nb : 0;
}

static int32_t supports_op(dwell_backend_context* ctx, const dwell_graph* g, int32_t node) {
    const dwell_node* n = dwell_graph_node(g, node);
    if (!n || (n->op != DWELL_OP_ADD && n->op != DWELL_OP_MUL) || n->n_inputs != 2) {
        snprintf(ctx->error, sizeof ctx->error, "the skeleton runs only add and mul");
        return 0;
    }
    const dwell_tensor* a = dwell_graph_tensor(g, n->inputs[0]);
    const dwell_tensor* b = dwell_graph_tensor(g, n->inputs[1]);
    if (!a || !b || operand_period(a, b, n->op == DWELL_OP_MUL) == 0) {
        snprintf(ctx->error, sizeof ctx->error, "%s: f32 operands of equal shape only",
                 dwell_op_name(n->op));
        return 0;
    }
    return 1;
}

static dwell_status graph_compute(dwell_backend_context* ctx, const dwell_graph* g,
                                  const int32_t* ids, size_t n_ids) {
    for (size_t i = 0; i < n_ids; ++i) {
        if (!supports_op(ctx, g, ids[i])) return DWELL_ERR_UNSUPPORTED;
        const dwell_node* n = dwell_graph_node(g, ids[i]);
        const dwell_tensor* a = dwell_graph_tensor(g, n->inputs[0]);
        const dwell_tensor* b = dwell_graph_tensor(g, n->inputs[1]);
        const dwell_tensor* o = dwell_graph_tensor(g, n->output);
        const float* x = a->data;
        const float* y = b->data;
        float* out = o->data;
        const int64_t count = dwell_tensor_nelements(a);
        const int64_t period = operand_period(a, b, n->op == DWELL_OP_MUL);
        for (int64_t j = 0; j < count; ++j)
            out[j] = n->op == DWELL_OP_ADD ? x[j] + y[j % period] : x[j] * y[j % period];
    }
    return DWELL_OK;
}

static const dwell_backend_plugin kBackend = {
    sizeof(dwell_backend_plugin),
    NULL,
    device_count,
    device_info,
    last_error,
    context_create,
    context_destroy,
    context_last_error,
    supports_op,
    graph_compute,
    NULL, /* release_weights: no copies of weights are kept */
    NULL, /* op_times: no device timers */
    NULL, /* reconfigure: nothing the thermal governor can change */
};

DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                    dwell_plugin_info* info) {
    dwell_plugin_info mine;
    memset(&mine, 0, sizeof mine);
    mine.struct_size = sizeof mine;
    mine.abi_major = DWELL_ABI_MAJOR;
    mine.abi_minor = DWELL_ABI_MINOR;
    mine.name = "skeleton";
    mine.version = "0.1.0";
    mine.description = "sample backend: f32 add and mul";
    mine.kind = DWELL_PLUGIN_BACKEND;
    mine.backend = &kBackend;
    if (host->abi_major != DWELL_ABI_MAJOR) {
        mine.error = "built for another major version of the dwell ABI";
        dwell_plugin_info_copy(info, &mine);
        return DWELL_ERR_ABI_MISMATCH;
    }
    dwell_plugin_info_copy(info, &mine);
    return DWELL_OK;
}
