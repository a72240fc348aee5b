/* dwell SDK — status codes returned by every call that crosses the plugin ABI.
 *
 * Thread-safety: the constants and dwell_status_name() are immutable.
 * Ownership: dwell_status_name() returns a static string. */
#ifndef DWELL_STATUS_H
#define DWELL_STATUS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t dwell_status;

enum {
    DWELL_OK = 0,
    DWELL_ERR_INVALID_ARGUMENT = 1, /* a caller passed something malformed */
    DWELL_ERR_UNSUPPORTED = 2,      /* op, dtype or feature not implemented here */
    DWELL_ERR_UNAVAILABLE = 3,      /* hardware or vendor library absent */
    DWELL_ERR_ABI_MISMATCH = 4,     /* major ABI versions differ */
    DWELL_ERR_OUT_OF_MEMORY = 5,    /* allocation failed or budget exceeded */
    DWELL_ERR_IO = 6,               /* file or device I/O failed */
    DWELL_ERR_CORRUPT = 7,          /* input data failed validation */
    DWELL_ERR_CANCELLED = 8,
    DWELL_ERR_TIMEOUT = 9,
    DWELL_ERR_INTERNAL = 10
};

static inline const char* dwell_status_name(dwell_status s) {
    switch (s) {
        case DWELL_OK:
            return "ok";
        case DWELL_ERR_INVALID_ARGUMENT:
            return "invalid argument";
        case DWELL_ERR_UNSUPPORTED:
            return "unsupported";
        case DWELL_ERR_UNAVAILABLE:
            return "unavailable";
        case DWELL_ERR_ABI_MISMATCH:
            return "ABI mismatch";
        case DWELL_ERR_OUT_OF_MEMORY:
            return "out of memory";
        case DWELL_ERR_IO:
            return "I/O error";
        case DWELL_ERR_CORRUPT:
            return "corrupt data";
        case DWELL_ERR_CANCELLED:
            return "cancelled";
        case DWELL_ERR_TIMEOUT:
            return "timeout";
        default:
            return "internal error";
    }
}

#ifdef __cplusplus
}
#endif
#endif /* DWELL_STATUS_H */
