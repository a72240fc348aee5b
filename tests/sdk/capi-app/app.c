/* An application on the installed C API: prints the prompt and its greedy
 * continuation on stdout, as `dwell run` does, and writes the library's log
 * lines, which reach it through its callback, to stderr as "log LEVEL:
 * text". Its text, then, is all that may appear on stdout.
 *   capi-app MANIFEST MODEL PROMPT N_TOKENS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwell.h"

typedef struct {
    unsigned lines;
    unsigned plugin_lines; /* lines a plugin sent through the host */
} log_count;

static void on_log(void* user, int32_t level, const char* message, size_t message_len) {
    log_count* n = (log_count*)user;
    ++n->lines;
    if (strncmp(message, "[cpu]", 5) == 0) ++n->plugin_lines;
    fprintf(stderr, "log %d: %.*s\n", (int)level, (int)message_len, message);
}

static int on_token(void* user, int32_t token, const char* text, size_t text_len) {
    (void)user;
    (void)token;
    fwrite(text, 1, text_len, stdout);
    return 0;
}

static int failed(const char* what, const dwell_error* e) {
    fprintf(stderr, "capi-app: %s: %s (%s)\n", what, e->message, dwell_capi_status_name(e->code));
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: capi-app MANIFEST MODEL PROMPT N_TOKENS\n");
        return 2;
    }
    if (dwell_capi_version() >> 16 != DWELL_CAPI_VERSION_MAJOR ||
        (dwell_capi_version() & 0xffff) < DWELL_CAPI_VERSION_MINOR) {
        fprintf(stderr, "capi-app: libdwell_capi is %u.%u, built for %d.%d\n",
                (unsigned)(dwell_capi_version() >> 16), (unsigned)(dwell_capi_version() & 0xffff),
                DWELL_CAPI_VERSION_MAJOR, DWELL_CAPI_VERSION_MINOR);
        return 1;
    }
    log_count count = {0, 0};
    dwell_set_log_callback(on_log, &count);

    dwell_error e;
    dwell_runtime_options ro;
    dwell_runtime_options_init(&ro);
    ro.manifest_path = argv[1];
    ro.log_level = DWELL_CAPI_LOG_DEBUG;
    dwell_runtime* rt = NULL;
    if (dwell_runtime_open(&ro, &rt, &e) != DWELL_OK) return failed("runtime", &e);
    dwell_llm* model = NULL;
    if (dwell_llm_load(rt, argv[2], &model, &e) != DWELL_OK) return failed("model", &e);
    dwell_session* session = NULL;
    if (dwell_session_create(model, NULL, &session, &e) != DWELL_OK) return failed("session", &e);

    dwell_generate_options g;
    dwell_generate_options_init(&g);
    g.max_tokens = atoi(argv[4]);
    fputs(argv[3], stdout);
    if (dwell_session_generate(session, argv[3], &g, on_token, NULL, NULL, &e) != DWELL_OK)
        return failed("generate", &e);
    fputc('\n', stdout);

    dwell_session_free(session);
    dwell_llm_free(model);
    dwell_runtime_close(rt);
    dwell_set_log_callback(NULL, NULL);
    fprintf(stderr, "log lines: %u, from the cpu plugin: %u\n", count.lines, count.plugin_lines);
    return count.lines > 0 && count.plugin_lines > 0 ? 0 : 3;
}
