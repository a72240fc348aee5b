/* dwell SDK — the backend (device) plugin interface.
 *
 * Objects: plugin -> devices -> execution contexts.
 *  - Probing (device_count, device_info) is cheap and never initialises
 *    hardware; it may say a device is unavailable and why.
 *  - context_create initialises a device for use; the host calls it only for
 *    devices the manifest selects.
 *  - supports_op is asked per node; the host's scheduler places each node on
 *    the first selected backend (manifest order) that accepts it.
 *  - graph_compute runs a list of nodes of a graph, in the order given.
 *
 * Errors: calls return a dwell_status; the message of the last failure is
 * read with last_error (per plugin) or context_last_error (per context).
 *
 * Thread-safety: probe calls may be called from any thread (a plugin keeps
 * its plugin-wide last_error per thread). supports_op, graph_compute and
 * context_last_error on one context are called by one thread at a time (the
 * host serialises them); different contexts may run concurrently.
 * Ownership: the host destroys every context it created before unloading the
 * plugin. Strings returned by info calls belong to the plugin and stay valid
 * until unload; last_error strings until the next call on that object. */
#ifndef DWELL_BACKEND_H
#define DWELL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "dwell/graph.h"
#include "dwell/plugin.h"
#include "dwell/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dwell_device_kind {
    DWELL_DEVICE_CPU = 1,
    DWELL_DEVICE_GPU = 2,
    DWELL_DEVICE_NPU = 3,
    DWELL_DEVICE_DSP = 4
} dwell_device_kind;

typedef enum dwell_buffer_kind {
    DWELL_BUFFER_HOST = 1,   /* plain host memory: the backend reads `data` */
    DWELL_BUFFER_DEVICE = 2, /* device memory, copied in and out */
    DWELL_BUFFER_DMABUF = 3  /* importable file-descriptor memory */
} dwell_buffer_kind;

typedef struct dwell_device_info {
    uint32_t struct_size;
    const char* name;        /* e.g. "cpu0" */
    const char* description; /* human-readable, e.g. the CPU model */
    dwell_device_kind kind;
    /* Identity of the physical hardware, so two plugins that expose one chip
     * are counted once, e.g. "cpu:x86_64:GenuineIntel:85". */
    const char* hardware_id;
    uint64_t memory_total; /* bytes, 0 if unknown */
    uint64_t memory_free;
    dwell_buffer_kind buffer_kind;  /* the memory the device computes on */
    int32_t available;              /* 0 when the device cannot be used ... */
    const char* unavailable_reason; /* ... and why */
} dwell_device_info;

typedef struct dwell_option {
    const char* key;
    const char* value;
} dwell_option;

typedef struct dwell_backend_context dwell_backend_context; /* opaque, plugin-owned */

/* Time a backend spent on one op kind (ABI 1.2, see op_times). */
typedef struct dwell_op_time {
    dwell_op op;
    uint32_t reserved;
    uint64_t count; /* kernels or nodes run */
    double seconds; /* device time */
} dwell_op_time;

/* Weight bytes a backend's matmul kernels read (ABI 1.9, see weight_reads). */
typedef struct dwell_weight_reads {
    uint32_t struct_size;
    uint32_t reserved;
    uint64_t bytes_read;  /* weight bytes the kernels actually read */
    uint64_t bytes_dense; /* what they would have read with no input zeroed */
    uint64_t inputs;      /* projection input values seen (after SPARSIFY) */
    uint64_t inputs_zero; /* of which zero */
    uint64_t matmuls;     /* matmul nodes counted */
} dwell_weight_reads;

typedef struct dwell_backend_plugin {
    uint32_t struct_size;
    void* self; /* plugin-wide state, passed back to the probe calls */

    dwell_status (*device_count)(void* self, uint32_t* count);
    dwell_status (*device_info)(void* self, uint32_t index, dwell_device_info* info);
    const char* (*last_error)(void* self);

    /* Options come from the manifest's [[backend]] entry (e.g. "threads"). */
    dwell_status (*context_create)(void* self, uint32_t device, const dwell_option* options,
                                   size_t n_options, const dwell_host_services* host,
                                   dwell_backend_context** out);
    void (*context_destroy)(dwell_backend_context* ctx);
    const char* (*context_last_error)(dwell_backend_context* ctx);

    /* 1 if the context can run node `node` as given, 0 otherwise; on 0 the
     * context's last error says why (the host logs it with the placement).
     * Tensor data may not be allocated yet when the host asks. */
    int32_t (*supports_op)(dwell_backend_context* ctx, const dwell_graph* graph, int32_t node);

    /* Runs the nodes node_ids[0..n_ids) in order. Host-memory backends read
     * and write tensor->data directly. */
    dwell_status (*graph_compute)(dwell_backend_context* ctx, const dwell_graph* graph,
                                  const int32_t* node_ids, size_t n_ids);

    /* ABI 1.1, optional (NULL or absent per struct_size: nothing to do). The
     * host no longer uses the weights whose data lie in [data, data + bytes)
     * (a model was unloaded): the context drops any copy it made of them,
     * e.g. weights repacked for its kernels. Called under the same
     * one-thread-per-context rule as graph_compute. */
    void (*release_weights)(dwell_backend_context* ctx, const void* data, size_t bytes);

    /* ABI 1.2, optional (NULL or absent: the backend keeps no times). Device
     * time per op kind since the context was created or last reset (e.g.
     * from OpenCL profiling events): writes up to *n entries to `out`, sets
     * *n to the number of op kinds it has, and with `reset` starts over.
     * Same one-thread-per-context rule as graph_compute. */
    dwell_status (*op_times)(dwell_backend_context* ctx, struct dwell_op_time* out, size_t* n,
                             int32_t reset);

    /* ABI 1.3, optional (NULL or absent: the context cannot change). Changes
     * settings of a live context between graph computes, for the thermal
     * governor. Keys a backend does not know are refused with
     * DWELL_ERR_UNSUPPORTED (the host then stops asking). Known keys:
     *   "thread_share" = "0.5": run on that share of the threads the
     *   context was created with (at least one), "1": all of them again.
     * Same one-thread-per-context rule as graph_compute. */
    dwell_status (*reconfigure)(dwell_backend_context* ctx, const dwell_option* options,
                                size_t n_options);

    /* ABI 1.9, optional (NULL or absent: the backend counts nothing). The
     * weight bytes its matmuls read since the context was created or last
     * reset, and how many of their inputs were zero: a kernel that skips
     * the columns of zeroed inputs (after SPARSIFY) reads fewer bytes than
     * bytes_dense. Fills the fields out->struct_size holds; with `reset`
     * starts over. Same one-thread-per-context rule as graph_compute. */
    dwell_status (*weight_reads)(dwell_backend_context* ctx, dwell_weight_reads* out,
                                 int32_t reset);
} dwell_backend_plugin;

#ifdef __cplusplus
}
#endif
#endif /* DWELL_BACKEND_H */
