/* dwell.h must compile as C (C11, -Wall -Wextra -Werror-level clean): this
 * translation unit is C, and the C++ test calls the function below. */
#include "dwell.h"

int dwell_capi_header_is_c(void) {
    dwell_error e = {DWELL_OK, {0}};
    dwell_generate_options g;
    dwell_generate_options_init(&g);
    (void)e;
    return g.max_tokens == 128 ? DWELL_CAPI_VERSION_MAJOR : -1;
}
