/* A backend that runs only ADD on f32 tensors of equal shape, so the
 * scheduler must split every layer between it and the next backend. Its
 * results must equal the cpu backend's exactly. Plain C on purpose.
 *
 * Failure injection, by [[backend]] options, counting graph_compute calls
 * from 1:
 *   fail_every = "N"  an error status (and message, nothing computed) on
 *                     every Nth call; fail_from = "N" on every call from the
 *                     Nth on; fail_at = "N" on the Nth call only.
 *   hang_at = "N"     the Nth call sleeps hang_ms (default 2000) ms before
 *                     computing: a hang past the step deadline; it then
 *                     writes its results as if nothing happened.
 *   overrun_at = "N"  the Nth call writes kOverrunFloats values past the end
 *                     of each output (a wrong-size result). Only safe on a
 *                     backend whose steps run isolated (step_timeout_ms).
 *   reshape_at = "N"  the Nth call computes, then reports each output one
 *                     row longer (its descriptor changed).
 * delay_ms = "N" makes each call take N ms longer: a slow device, for tests
 * that must act while a generation runs.
 * offer_attention = "1" makes supports_op accept ATTENTION too, which
 * graph_compute then refuses (the host reruns it on the next backend): for
 * tests of where the scheduler places attention; offer_rope = "1" the same
 * for ROPE. offer_short_conv = "1" accepts SHORT_CONV (ABI 1.6), and
 * graph_compute then scribbles over its state and fails: the host must put
 * the state back before it reruns the node elsewhere. offer_gated_delta_net
 * = "1" does the same with GATED_DELTA_NET (ABI 1.7) and its state (in5).
 *
 * Built twice: as "partial" against this SDK, and as "partial13" reporting
 * ABI 1.3 (PARTIAL_ABI_MINOR), from before the FP8 key encoding. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dwell/backend.h"
#include "dwell/plugin.h"

#ifndef PARTIAL_ABI_MINOR
#define PARTIAL_ABI_MINOR DWELL_ABI_MINOR
#endif
#ifndef PARTIAL_NAME
#define PARTIAL_NAME "partial"
#endif

struct dwell_backend_context {
    char error[128];
    long adds_run;
    long calls;
    long fail_every;
    long fail_from;
    long fail_at;
    long hang_at;
    long hang_ms;
    long overrun_at;
    long reshape_at;
    long delay_ms;
    long offer_attention;
    long offer_rope;
    long offer_short_conv;
    long offer_gated_delta_net;
};

enum { kOverrunFloats = 16 };

static void sleep_ms(long ms) {
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
}

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
    (*out)->hang_ms = 2000;
    for (size_t i = 0; i < n_options; ++i) {
        const char* k = options[i].key;
        const long v = atol(options[i].value);
        if (strcmp(k, "fail_every") == 0) (*out)->fail_every = v;
        if (strcmp(k, "fail_from") == 0) (*out)->fail_from = v;
        if (strcmp(k, "fail_at") == 0) (*out)->fail_at = v;
        if (strcmp(k, "hang_at") == 0) (*out)->hang_at = v;
        if (strcmp(k, "hang_ms") == 0) (*out)->hang_ms = v;
        if (strcmp(k, "overrun_at") == 0) (*out)->overrun_at = v;
        if (strcmp(k, "reshape_at") == 0) (*out)->reshape_at = v;
        if (strcmp(k, "delay_ms") == 0) (*out)->delay_ms = v;
        if (strcmp(k, "offer_attention") == 0) (*out)->offer_attention = v;
        if (strcmp(k, "offer_rope") == 0) (*out)->offer_rope = v;
        if (strcmp(k, "offer_short_conv") == 0) (*out)->offer_short_conv = v;
        if (strcmp(k, "offer_gated_delta_net") == 0) (*out)->offer_gated_delta_net = v;
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
    if (n->op == DWELL_OP_ATTENTION && ctx->offer_attention) return 1;
    if (n->op == DWELL_OP_ROPE && ctx->offer_rope) return 1;
    if (n->op == DWELL_OP_SHORT_CONV && ctx->offer_short_conv) return 1;
    if (n->op == DWELL_OP_GATED_DELTA_NET && ctx->offer_gated_delta_net) return 1;
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
    if (ctx->delay_ms > 0) sleep_ms(ctx->delay_ms);
    if (ctx->calls == ctx->hang_at) sleep_ms(ctx->hang_ms);
    if ((ctx->fail_every > 0 && ctx->calls % ctx->fail_every == 0) ||
        (ctx->fail_from > 0 && ctx->calls >= ctx->fail_from) || ctx->calls == ctx->fail_at) {
        snprintf(ctx->error, sizeof ctx->error, "injected failure (call %ld)", ctx->calls);
        return DWELL_ERR_INTERNAL;
    }
    for (size_t i = 0; i < n_ids; ++i) {
        const dwell_op op = dwell_graph_node(g, ids[i])->op;
        if (op == DWELL_OP_SHORT_CONV || op == DWELL_OP_GATED_DELTA_NET) {
            /* A device that failed halfway through: the state is half
             * advanced (here: garbage) when the error comes back. */
            const dwell_node* n = dwell_graph_node(g, ids[i]);
            const dwell_tensor* st = dwell_graph_tensor(g, dwell_node_state_tensor(n));
            for (int64_t j = 0; j < dwell_tensor_nelements(st); ++j) ((float*)st->data)[j] = 1e3f;
            snprintf(ctx->error, sizeof ctx->error, "%s failed halfway (injected)",
                     dwell_op_name(op));
            return DWELL_ERR_INTERNAL;
        }
        if (op == DWELL_OP_ATTENTION || op == DWELL_OP_ROPE) {
            snprintf(ctx->error, sizeof ctx->error,
                     "attention and rope are offered, never computed");
            return DWELL_ERR_UNSUPPORTED;
        }
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
        if (ctx->calls == ctx->overrun_at)
            for (int64_t j = count; j < count + kOverrunFloats; ++j) ((float*)o->data)[j] = 1.0f;
        ctx->adds_run++;
    }
    /* After the loop: every node above checked the shapes as given. */
    if (ctx->calls == ctx->reshape_at) {
        for (size_t i = 0; i < n_ids; ++i) {
            dwell_tensor* o = dwell_graph_tensor(g, dwell_graph_node(g, ids[i])->output);
            o->ne[1] += 1;
        }
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
    mine.abi_minor = PARTIAL_ABI_MINOR;
    mine.name = PARTIAL_NAME;
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
