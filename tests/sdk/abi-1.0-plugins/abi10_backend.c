/* A backend plugin as it was written against ABI 1.0 and never rebuilt:
 * compiled with tests/sdk/abi-1.0 as its only SDK include path. It runs
 * ADD and MUL on f32 tensors (MUL also with a second operand repeated
 * along rows) and declines every other node.
 *
 * What it exercises in a newer host: its dwell_backend_plugin table ends
 * at graph_compute (no 1.1+ entries), so the host must read the table by
 * struct_size; the host's dwell_tensor has grown since 1.0, so this plugin
 * must reach tensors through dwell_graph_tensor(), which steps by the
 * host's tensor_stride rather than by its own sizeof(dwell_tensor). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwell/backend.h"
#include "dwell/plugin.h"

#if DWELL_ABI_MAJOR != 1 || DWELL_ABI_MINOR != 0
#error "build this plugin against the frozen ABI 1.0 headers (tests/sdk/abi-1.0) only"
#endif

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
    mine.name = "addmul0";
    mine.description = "ABI 1.0 test backend: f32 add and mul";
    mine.kind = DWELL_DEVICE_NPU;
    mine.hardware_id = "test:abi10-addmul";
    mine.buffer_kind = DWELL_BUFFER_HOST;
    mine.available = 1;
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

/* Elements of b that repeat along a, or 0 when the operands do not fit. */
static int64_t operand_period(const dwell_tensor* a, const dwell_tensor* b, int rows_ok) {
    if (a->dtype != DWELL_F32 || b->dtype != DWELL_F32) return 0;
    if (!dwell_tensor_is_contiguous(a) || !dwell_tensor_is_contiguous(b)) return 0;
    const int64_t na = dwell_tensor_nelements(a), nb = dwell_tensor_nelements(b);
    if (na == nb) {
        for (int i = 0; i < DWELL_MAX_DIMS; ++i)
            if (a->ne[i] != b->ne[i]) return 0;
        return nb;
    }
    return rows_ok && nb == a->ne[0] ? nb : 0;
}

static int32_t supports_op(dwell_backend_context* ctx, const dwell_graph* g, int32_t node) {
    const dwell_node* n = dwell_graph_node(g, node);
    if (!n || (n->op != DWELL_OP_ADD && n->op != DWELL_OP_MUL) || n->n_inputs != 2) {
        snprintf(ctx->error, sizeof ctx->error, "abi10-addmul runs only add and mul");
        return 0;
    }
    const dwell_tensor* a = dwell_graph_tensor(g, n->inputs[0]);
    const dwell_tensor* b = dwell_graph_tensor(g, n->inputs[1]);
    if (!a || !b || operand_period(a, b, n->op == DWELL_OP_MUL) == 0) {
        snprintf(ctx->error, sizeof ctx->error, "%s: f32 operands of matching shape only",
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

/* The whole 1.0 table: ten entries, nothing after graph_compute. */
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
};

DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                    dwell_plugin_info* info) {
    dwell_plugin_info mine;
    memset(&mine, 0, sizeof mine);
    mine.struct_size = sizeof mine;
    mine.abi_major = DWELL_ABI_MAJOR;
    mine.abi_minor = DWELL_ABI_MINOR;
    mine.name = "abi10-addmul";
    mine.version = "1.0.0";
    mine.description = "ABI 1.0 test backend: f32 add and mul";
    mine.kind = DWELL_PLUGIN_BACKEND;
    mine.backend = &kBackend;
    if (host->abi_major != DWELL_ABI_MAJOR) {
        mine.error = "built for dwell ABI 1.0";
        dwell_plugin_info_copy(info, &mine);
        return DWELL_ERR_ABI_MISMATCH;
    }
    dwell_plugin_info_copy(info, &mine);
    return DWELL_OK;
}
