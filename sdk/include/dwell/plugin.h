/* dwell SDK — the plugin entry point and ABI version negotiation.
 *
 * Every plugin shared library exports exactly one C symbol:
 *
 *   dwell_status dwell_plugin_query(const dwell_host_services* host,
 *                                   dwell_plugin_info* info);
 *
 * Negotiation runs both ways. The host passes its ABI version inside
 * `host`; the plugin fills `info` (always including the ABI version it was
 * built for, even when it refuses) and returns DWELL_ERR_ABI_MISMATCH if it
 * cannot work with the host's major version. The host in turn refuses a
 * plugin whose major version differs from its own. Minor versions only add
 * things, so a newer minor on either side stays compatible.
 *
 * Struct evolution: every struct that crosses the ABI starts with
 * `struct_size`. A reader only touches fields that lie inside the size the
 * writer declared (DWELL_HAS_FIELD). New fields are appended, never inserted.
 *
 * Thread-safety: dwell_plugin_query may be called once per load, from any
 * thread. Host services may be called from any thread, for as long as the
 * host keeps the plugin loaded (never after the last context or model made
 * by the plugin is destroyed).
 * Ownership: strings and tables a plugin returns in dwell_plugin_info are
 * static storage of the plugin and stay valid until it is unloaded. */
#ifndef DWELL_PLUGIN_H
#define DWELL_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dwell/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DWELL_ABI_MAJOR 1
/* Minor versions: 1.1 dwell_host_services.weights_copied; 1.2
 * dwell_tensor.flags; 1.3 dwell_backend_plugin.reconfigure; 1.4 FP8_E4M3 key
 * caches hold offset keys (quant.h); 1.5 windowed and soft-capped
 * ATTENTION, DWELL_OP_SOFTCAP, ROPE frequency factors (in2) and attention
 * factor (fparams[2]) (graph.h), dwell_graph_builder.weight_rows (model.h);
 * 1.6 DWELL_OP_SHORT_CONV (graph.h), carried per-sequence state:
 * dwell_model_info.state_elems and dwell_graph_builder.recurrent_state
 * (model.h); 1.7 DWELL_OP_SIGMOID, SOFTPLUS, SLICE and GATED_DELTA_NET
 * (graph.h), dwell_model_info.flags with DWELL_MODEL_STATE_SPANS_CONTEXT
 * (model.h); 1.8 dwell_graph_builder.constant (model.h); 1.9
 * DWELL_OP_SPARSIFY (graph.h), dwell_backend_plugin.weight_reads
 * (backend.h). sdk/ABI.md has the details. */
#define DWELL_ABI_MINOR 9

#if defined(_WIN32)
#define DWELL_PLUGIN_EXPORT __declspec(dllexport)
#else
#define DWELL_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#define DWELL_PLUGIN_QUERY_SYMBOL "dwell_plugin_query"

/* True when a struct whose writer declared `size_field` bytes contains `field`. */
#define DWELL_HAS_FIELD(ptr, type, field) \
    ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

enum { DWELL_LOG_DEBUG = 0, DWELL_LOG_INFO = 1, DWELL_LOG_WARN = 2, DWELL_LOG_ERROR = 3 };

/* Services the host offers every plugin. The struct and its callbacks stay
 * valid for as long as any context created with them exists; services may
 * be called from any thread. */
typedef struct dwell_host_services {
    uint32_t struct_size;
    uint32_t abi_major;
    uint32_t abi_minor;
    void* host; /* opaque, passed back to every service */
    /* Log one line through the host's logger. */
    void (*log)(void* host, int level, const char* plugin, const char* message);
    /* Memory from the host's page pool, counted against its budget. Returns
     * NULL when the budget would be exceeded. Freed with page_free. */
    void* (*page_alloc)(void* host, size_t bytes);
    void (*page_free)(void* host, void* ptr);
    /* ABI 1.1. A backend that keeps its own copy of weight bytes (e.g.
     * repacked for its kernels) tells the host, which may then drop the
     * resident pages of a memory-mapped model file behind
     * [data, data + bytes): the bytes stay readable (the OS reads them
     * back from the file), they just stop counting against memory. Check
     * DWELL_HAS_FIELD before calling; NULL when the host has no use for it. */
    void (*weights_copied)(void* host, const void* data, size_t bytes);
} dwell_host_services;

typedef enum dwell_plugin_kind {
    DWELL_PLUGIN_BACKEND = 1,
    DWELL_PLUGIN_MODEL = 2,
    DWELL_PLUGIN_KIND_MIN_ENUM_ = -0x7fffffff - 1, /* 32 bits; any int32 loads safely */
    DWELL_PLUGIN_KIND_MAX_ENUM_ = 0x7fffffff
} dwell_plugin_kind;

struct dwell_backend_plugin;
struct dwell_model_plugin;

typedef struct dwell_plugin_info {
    uint32_t struct_size;
    uint32_t abi_major; /* the ABI the plugin was built against */
    uint32_t abi_minor;
    const char* name;    /* short identifier, e.g. "cpu", "llama" */
    const char* version; /* the plugin's own version, e.g. "0.1.0" */
    const char* description;
    dwell_plugin_kind kind;
    const struct dwell_backend_plugin* backend; /* when kind == BACKEND */
    const struct dwell_model_plugin* model;     /* when kind == MODEL */
    const char* error;                          /* why the query failed, when it did */
} dwell_plugin_info;

/* Copies a plugin's complete description into the host's struct, writing no
 * more than the host declared in dst->struct_size (an older host has a
 * smaller struct). dst->struct_size keeps the host's value. */
static inline void dwell_plugin_info_copy(dwell_plugin_info* dst, const dwell_plugin_info* src) {
    uint32_t n = dst->struct_size < sizeof(*src) ? dst->struct_size : (uint32_t)sizeof(*src);
    uint32_t keep = dst->struct_size;
    if (n > sizeof(uint32_t))
        memcpy((char*)dst + sizeof(uint32_t), (const char*)src + sizeof(uint32_t),
               n - sizeof(uint32_t));
    dst->struct_size = keep;
}

typedef dwell_status (*dwell_plugin_query_fn)(const dwell_host_services* host,
                                              dwell_plugin_info* info);

#ifdef __cplusplus
}
#endif
#endif /* DWELL_PLUGIN_H */
