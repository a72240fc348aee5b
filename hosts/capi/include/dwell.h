/* dwell — the C API for applications that embed the runtime.
 *
 * Open a runtime (with a device manifest, or let dwell detect the device
 * and choose one), load a model, create sessions, and generate text with a
 * callback per token. Every call returns a dwell_status (DWELL_OK or an
 * error code from dwell/status.h) and, when the caller passes a
 * dwell_error, fills it with the code and one line saying what failed.
 *
 * Versioning: DWELL_CAPI_VERSION_MAJOR changes when a call or struct
 * changes incompatibly; MINOR when calls are added. Structs passed in begin
 * with struct_size so that later minor versions can add fields at the end:
 * initialise them with the *_init() calls below.
 *
 * Ownership: every object made by *_open / *_load / *_create is the
 * caller's and is released by the matching *_close / *_free. A model keeps
 * its runtime alive and a session its model, so they may be released in
 * any order. Strings handed to callbacks are valid during the call only.
 *
 * Thread-safety: a runtime and a model may be used from several threads at
 * once. A session is used by one thread at a time, except
 * dwell_session_cancel(), which any thread may call at any time while the
 * session exists and no dwell_session_reset / _load runs on it (it stops
 * that session's running or next generation with DWELL_ERR_CANCELLED).
 *
 * Options: every *_options pointer may be NULL, which means what the
 * matching *_init() call sets. A numeric field out of its documented range
 * is refused with DWELL_ERR_INVALID_ARGUMENT and a message naming it.
 *
 * Logging: the library never writes to stdout. Its log lines (and those
 * plugins send through the host) go to stderr as "dwell: LEVEL: text", or
 * to the callback set with dwell_set_log_callback(). */
#ifndef DWELL_H
#define DWELL_H

#include <stddef.h>
#include <stdint.h>

#include "dwell/status.h" /* dwell_status, DWELL_OK, DWELL_ERR_* */
#include "dwell/tensor.h" /* the DWELL_* dtypes of dwell_session_options.kv_type */

#ifdef __cplusplus
extern "C" {
#endif

#define DWELL_CAPI_VERSION_MAJOR 1
/* 1.1: the thermal fields of dwell_runtime_stats;
 * 1.2: dwell_backend_stats_get;
 * 1.3: DWELL_ERR_CONTEXT_FULL and dwell_capi_status_name, the log callback
 *      and level (dwell_set_log_callback, dwell_set_log_level,
 *      DWELL_CAPI_LOG_*), range checks on every numeric option */
#define DWELL_CAPI_VERSION_MINOR 3

#if defined(_WIN32)
#define DWELL_CAPI __declspec(dllexport)
#else
#define DWELL_CAPI __attribute__((visibility("default")))
#endif

/* (major << 16) | minor of the library actually loaded: compare with the
 * header's DWELL_CAPI_VERSION_MAJOR before anything else. */
DWELL_CAPI uint32_t dwell_capi_version(void);

typedef struct dwell_error {
    dwell_status code;
    char message[512]; /* one line, NUL-terminated; "" on success */
} dwell_error;

/* 1.3: statuses of the C API beyond those of dwell/status.h (which stay
 * below 256). */
enum {
    /* The session's context has no room for the text: create the session
     * with a larger n_ctx or with shift_context, or dwell_session_reset. */
    DWELL_ERR_CONTEXT_FULL = 256
};

/* 1.3: a static string naming any status, those above included. */
DWELL_CAPI const char* dwell_capi_status_name(dwell_status status);

/* ---- logging (1.3) ---------------------------------------------------- */

/* Levels, most severe first; a level passes the lines at it and above. */
#define DWELL_CAPI_LOG_OFF (-2)
#define DWELL_CAPI_LOG_ERROR (-1)
#define DWELL_CAPI_LOG_WARNING 0 /* the default */
#define DWELL_CAPI_LOG_INFO 1
#define DWELL_CAPI_LOG_DEBUG 2
/* Only in dwell_runtime_options.log_level: keep the level as it is. */
#define DWELL_CAPI_LOG_UNCHANGED (-100)

/* One log line: its level (DWELL_CAPI_LOG_ERROR .. _DEBUG) and its text
 * (UTF-8, NUL-terminated, no newline), valid during the call only. */
typedef void (*dwell_log_callback)(void* user, int32_t level, const char* message,
                                   size_t message_len);

/* Process-wide: sends every later log line of the library, its plugins
 * included, to `callback` instead of stderr; NULL goes back to stderr.
 * The library calls it from any of its threads, one call at a time. Once
 * this returns, the previous callback is not running and is not called
 * again, so its `user` may be freed. The callback must return normally
 * (an exception thrown from C++ is caught and the line dropped) and must
 * not call into dwell. dwell logs through spdlog: an application that uses
 * spdlog's default logger itself gets dwell's in its place. */
DWELL_CAPI void dwell_set_log_callback(dwell_log_callback callback, void* user);

/* Process-wide, any thread, any time: the least severe level logged
 * (DWELL_CAPI_LOG_OFF .. DWELL_CAPI_LOG_DEBUG). */
DWELL_CAPI dwell_status dwell_set_log_level(int32_t level, dwell_error* error);

typedef struct dwell_runtime dwell_runtime;
typedef struct dwell_llm dwell_llm;
typedef struct dwell_session dwell_session;

/* ---- runtime ---------------------------------------------------------- */

typedef struct dwell_runtime_options {
    size_t struct_size;
    const char* manifest_path; /* NULL or "": detect the device and choose a manifest */
    int32_t threads;           /* 1 .. 1024 overrides the manifest's [cpu] threads; 0: its */
    /* 0 .. 2^30 overrides [memory] budget_mb (0: no budget); -1: the manifest's */
    int64_t memory_budget_mb;
    /* dwell_set_log_level() as the runtime opens (a DWELL_CAPI_LOG_* level),
     * or DWELL_CAPI_LOG_UNCHANGED. */
    int32_t log_level;
} dwell_runtime_options;

/* No manifest (detect), the manifest's threads and budget, the log level
 * unchanged (1.3; before: DWELL_CAPI_LOG_WARNING, which is also the level
 * the library starts with). */
DWELL_CAPI void dwell_runtime_options_init(dwell_runtime_options* options);

/* options may be NULL (what dwell_runtime_options_init sets). */
DWELL_CAPI dwell_status dwell_runtime_open(const dwell_runtime_options* options,
                                           dwell_runtime** out, dwell_error* error);
DWELL_CAPI void dwell_runtime_close(dwell_runtime* runtime);

typedef struct dwell_runtime_stats {
    size_t struct_size;
    uint32_t n_backends;          /* backends selected from the manifest */
    uint64_t memory_used_bytes;   /* charged to the one memory budget */
    uint64_t memory_budget_bytes; /* 0: no budget */
    uint64_t kv_pages_in_use;
    uint64_t kv_page_bytes;
    char manifest[256]; /* the manifest file in use */
    char device[256];   /* the detected device, or "" when manifest_path was given */
    /* 1.1: the thermal governor (left as is when struct_size ends before
     * them; all zero when the governor is off). */
    int thermal_active;
    int temperature_valid; /* 0: no usable sensor reading (fallback throttle) */
    double temperature_c;  /* the hottest zone the manifest names */
    double throttle;       /* 0: no lever, 1: every lever */
    double duty;           /* share of time spent generating (pacing) */
    double thread_share;   /* share of the CPU threads in use */
    int frequency_capped;
    int accelerators_paused;
} dwell_runtime_stats;

DWELL_CAPI dwell_status dwell_runtime_stats_get(const dwell_runtime* runtime,
                                                dwell_runtime_stats* stats, dwell_error* error);

/* 1.2: how backend `index` (0 .. n_backends - 1, the manifest's order) has
 * fared. A backend whose step failed has the step rerun on the next one;
 * after 3 error statuses in a row, or one step past its deadline or one
 * wrong-size result, it is unhealthy and gets no more work. */
typedef struct dwell_backend_stats {
    size_t struct_size;
    char label[128]; /* "plugin/device", as in the placement log */
    int healthy;
    uint64_t steps_run;         /* steps without a fault */
    uint64_t failed_steps;      /* the three below together */
    uint64_t error_statuses;    /* the backend returned an error */
    uint64_t timeouts;          /* past [[backend]] step_timeout_ms */
    uint64_t wrong_sizes;       /* a result of another shape or size */
    char unhealthy_reason[256]; /* "" while healthy */
    char last_failure[512];     /* one line, "" if none */
} dwell_backend_stats;

DWELL_CAPI dwell_status dwell_backend_stats_get(const dwell_runtime* runtime, uint32_t index,
                                                dwell_backend_stats* stats, dwell_error* error);

/* ---- model (a loaded language model: dwell_llm) ---------------------- */

DWELL_CAPI dwell_status dwell_llm_load(dwell_runtime* runtime, const char* path, dwell_llm** out,
                                       dwell_error* error);
DWELL_CAPI void dwell_llm_free(dwell_llm* model);

typedef struct dwell_llm_info {
    size_t struct_size;
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_layer;
    int64_t kv_width; /* elements of one cached K (or V) row per layer */
    uint64_t weight_bytes;
    char architecture[64];
} dwell_llm_info;

DWELL_CAPI dwell_status dwell_llm_info_get(const dwell_llm* model, dwell_llm_info* info,
                                           dwell_error* error);

/* Text -> token ids. Writes at most `capacity` ids to `tokens` and the
 * number the text needs to *n_tokens (call with capacity 0 to ask). */
DWELL_CAPI dwell_status dwell_tokenize(const dwell_llm* model, const char* text, int add_bos,
                                       int32_t* tokens, size_t capacity, size_t* n_tokens,
                                       dwell_error* error);

/* ---- session ---------------------------------------------------------- */

typedef struct dwell_session_options {
    size_t struct_size;
    /* 1 .. 2^24 tokens; 0: the model's training context (at most 4096) */
    int32_t n_ctx;
    /* DWELL_F16, DWELL_Q8_0, DWELL_FP8_E4M3 or DWELL_F32; -1: the manifest's
     * [kv] dtype */
    int32_t kv_type;
    int shift_context; /* nonzero: a full context drops old tokens instead of stopping */
} dwell_session_options;

/* The model's context, the manifest's KV type, no shift. */
DWELL_CAPI void dwell_session_options_init(dwell_session_options* options);

/* options may be NULL (what dwell_session_options_init sets). */
DWELL_CAPI dwell_status dwell_session_create(dwell_llm* model, const dwell_session_options* options,
                                             dwell_session** out, dwell_error* error);
DWELL_CAPI void dwell_session_free(dwell_session* session);

/* Forgets the conversation (the KV pages go back to the runtime). */
DWELL_CAPI dwell_status dwell_session_reset(dwell_session* session, dwell_error* error);

typedef struct dwell_generate_options {
    size_t struct_size;
    int32_t max_tokens;   /* tokens to generate at most; <= 0: until end of text or context */
    float temperature;    /* <= 0: greedy */
    int32_t top_k;        /* <= 0: off */
    float top_p;          /* > 0; >= 1: off */
    float min_p;          /* < 1; <= 0: off */
    float repeat_penalty; /* > 0; 1: off */
    uint64_t seed;
    int add_bos; /* nonzero: a BOS token before the text (the first turn) */
} dwell_generate_options;
/* The float fields must be finite numbers (no NaN or infinity). */

/* Greedy, 128 tokens, BOS added (top_k 40, top_p 0.95, min_p 0.05 for a
 * temperature set later). */
DWELL_CAPI void dwell_generate_options_init(dwell_generate_options* options);

/* Called with each generated token and its text (UTF-8, possibly empty
 * while a multi-byte character is incomplete). Return nonzero to stop. */
typedef int (*dwell_token_callback)(void* user, int32_t token, const char* text, size_t text_len);

typedef struct dwell_generation_stats {
    size_t struct_size;
    int32_t n_prompt;
    int32_t n_generated;
    double prompt_tokens_per_second;
    double generation_tokens_per_second;
    int stopped_at_eos;
    int stopped_at_context;
} dwell_generation_stats;

/* Continues the session's conversation with `text` and generates. The
 * session keeps everything, so the next call continues after the reply.
 * options (the defaults above), callback and stats may be NULL. Returns
 * DWELL_ERR_CANCELLED after dwell_session_cancel(); the session then stays
 * usable. A reply stops when the context fills (stats.stopped_at_context);
 * text that does not fit returns DWELL_ERR_CONTEXT_FULL (1.3; before:
 * DWELL_ERR_OUT_OF_MEMORY) and leaves the session as it was. */
DWELL_CAPI dwell_status dwell_session_generate(dwell_session* session, const char* text,
                                               const dwell_generate_options* options,
                                               dwell_token_callback callback, void* user,
                                               dwell_generation_stats* stats, dwell_error* error);

/* Any thread, any time: stops the running generation of this session, or
 * its next one if none runs. */
DWELL_CAPI void dwell_session_cancel(dwell_session* session);

typedef struct dwell_session_stats {
    size_t struct_size;
    int32_t n_past; /* tokens in the context */
    int32_t n_ctx;
    int64_t n_shifted; /* tokens dropped by context shifts */
    uint64_t kv_bytes; /* bytes of this session's KV pages */
} dwell_session_stats;

DWELL_CAPI dwell_status dwell_session_stats_get(const dwell_session* session,
                                                dwell_session_stats* stats, dwell_error* error);

/* The conversation to a file and back (same model, same weights and KV
 * type). The reply's last token, not yet fed, is saved with it and fed
 * first by the next generate after a load, so nothing is lost and a session
 * whose context is full can be saved too. */
DWELL_CAPI dwell_status dwell_session_save(dwell_session* session, const char* path,
                                           dwell_error* error);
DWELL_CAPI dwell_status dwell_session_load(dwell_session* session, const char* path,
                                           dwell_error* error);

#ifdef __cplusplus
}
#endif
#endif /* DWELL_H */
