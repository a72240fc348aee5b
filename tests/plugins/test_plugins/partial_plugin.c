/* A backend that runs only ADD on f32 tensors of equal shape, so the
 * scheduler must split every layer between it and the next backend. Its
 * results must equal the cpu backend's exactly. Plain C on purpose.
 *
 * Failure injection, by [[backend]] options: fail_every = "N" fails every
 * Nth graph_compute call, fail_from = "N" every call from the Nth on (an
 * error status and message, nothing computed). delay_ms = "N" makes each
 * call take N ms longer: a slow device, for tests that must act while a
 * generation runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dwell/backend.h"
#include "dwell/plugin.h"

struct dwell_backend_context {
    char error[128];
    long adds_run;
    long calls;
    long fail_every;
    long fail_from;
    long delay_ms;
};

static char g_error[128];

static dwell_status device_count(void* self, uint32_t* count) {
    (void)self;
    *count = 1;
    return DWELL_OK;
}

static dwell_status device_info(void* self, uint32_t index, dwell_device_info* info) {
    (void)self;
    if (index != 0) {
        snprintf(g_error, sizeof g_error, "no device %u", index);
        return DWELL_ERR_INVALID_ARGUMENT;
    }
    dwell_device_info mine;
    memset(&mine, 0, sizeof mine);
    mine.struct_size = sizeof mine;
    mine.name = "adder0";
    mine.description = "test backend that only adds";
    mine.kind = DWELL_DEVICE_NPU;
    mine.hardware_id = "test:adder";
    mine.buffer_kind = DWELL_BUFFER_HOST;
    mine.available = 1;
    size_t n = info->struct_size < sizeof mine ? info->struct_size : sizeof mine;
    uint32_t keep = info->struct_size;
    memcpy(info, &mine, n);
    info->struct_size = keep;
    return DWELL_OK;
}

static const char* last_error(void* self) {
    (void)self;
    return g_error;
}

static dwell_status context_create(void* self, uint32_t device, const dwell_option* options,
                                   size_t n_options, const dwell_host_services* host,
                                   dwell_backend_context** out) {
    (void)self;
    (void)device;
    (void)host;
    *out = calloc(1, sizeof **out);
    if (!*out) return DWELL_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n_options; ++i) {
        if (strcmp(options[i].key, "fail_every") == 0) (*out)->fail_every = atol(options[i].value);
        if (strcmp(options[i].key, "fail_from") == 0) (*out)->fail_from = atol(options[i].value);
        if (strcmp(options[i].key, "delay_ms") == 0) (*out)->delay_ms = atol(options[i].value);
    }
    return DWELL_OK;
}

static void context_destroy(dwell_backend_context* ctx) {
    free(ctx);
}

static const char* context_last_error(dwell_backend_context* ctx) {
    return ctx->error;
}

static int same_shape_f32(const dwell_tensor* a, const dwell_tensor* b) {
    if (a->dtype != DWELL_F32 || b->dtype != DWELL_F32) return 0;
    for (int i = 0; i < DWELL_MAX_DIMS; ++i)
        if (a->ne[i] != b->ne[i]) return 0;
    return dwell_tensor_is_contiguous(a) && dwell_tensor_is_contiguous(b);
}

static int32_t supports_op(dwell_backend_context* ctx, const dwell_graph* g, int32_t node) {
    const dwell_node* n = dwell_graph_node(g, node);
    if (!n) return 0;
    if (n->op != DWELL_OP_ADD || n->n_inputs != 2) {
        snprintf(ctx->error, sizeof ctx->error, "only add is supported here");
        return 0;
    }
    const dwell_tensor* a = dwell_graph_tensor(g, n->inputs[0]);
    const dwell_tensor* b = dwell_graph_tensor(g, n->inputs[1]);
    return a && b && same_shape_f32(a, b);
}

static dwell_status graph_compute(dwell_backend_context* ctx, const dwell_graph* g,
                                  const int32_t* ids, size_t n_ids) {
    ctx->calls++;
    if (ctx->delay_ms > 0) {
        const struct timespec pause = {ctx->delay_ms / 1000, (ctx->delay_ms % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
    if ((ctx->fail_every > 0 && ctx->calls % ctx->fail_every == 0) ||
        (ctx->fail_from > 0 && ctx->calls >= ctx->fail_from)) {
        snprintf(ctx->error, sizeof ctx->error, "injected failure (call %ld)", ctx->calls);
        return DWELL_ERR_INTERNAL;
    }
    for (size_t i = 0; i < n_ids; ++i) {
        if (!supports_op(ctx, g, ids[i])) {
            snprintf(ctx->error, sizeof ctx->error, "node %d is not an add of equal f32 shapes",
                     ids[i]);
            return DWELL_ERR_UNSUPPORTED;
        }
        const dwell_node* n = dwell_graph_node(g, ids[i]);
        const dwell_tensor* a = dwell_graph_tensor(g, n->inputs[0]);
        const dwell_tensor* b = dwell_graph_tensor(g, n->inputs[1]);
        const dwell_tensor* o = dwell_graph_tensor(g, n->output);
        const int64_t count = dwell_tensor_nelements(a);
        for (int64_t j = 0; j < count; ++j)
            ((float*)o->data)[j] = ((const float*)a->data)[j] + ((const float*)b->data)[j];
        ctx->adds_run++;
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
    NULL, /* release_weights: this backend keeps no copies */
    NULL, /* op_times: no per-op times */
    NULL, /* reconfigure: nothing to change */
};

DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                    dwell_plugin_info* info) {
    dwell_plugin_info mine;
    memset(&mine, 0, sizeof mine);
    mine.struct_size = sizeof mine;
    mine.abi_major = DWELL_ABI_MAJOR;
    mine.abi_minor = DWELL_ABI_MINOR;
    mine.name = "partial";
    mine.version = "0.0.1";
    mine.description = "test backend: ADD only";
    mine.kind = DWELL_PLUGIN_BACKEND;
    mine.backend = &kBackend;
    if (host->abi_major != DWELL_ABI_MAJOR) {
        mine.error = "host ABI major differs";
        dwell_plugin_info_copy(info, &mine);
        return DWELL_ERR_ABI_MISMATCH;
    }
    dwell_plugin_info_copy(info, &mine);
    return DWELL_OK;
}
