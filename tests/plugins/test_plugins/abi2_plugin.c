/* A plugin built for a future major ABI version (2.0): the host must refuse
 * it with a message naming both versions. Plain C on purpose. */
#include <stddef.h>

#include "dwell/plugin.h"

DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                    dwell_plugin_info* info) {
    (void)host;
    dwell_plugin_info mine;
    memset(&mine, 0, sizeof mine);
    mine.struct_size = sizeof mine;
    mine.abi_major = 2;
    mine.abi_minor = 0;
    mine.name = "abi2";
    mine.version = "9.9.9";
    mine.kind = DWELL_PLUGIN_BACKEND;
    mine.error = "built for dwell ABI 2.0";
    dwell_plugin_info_copy(info, &mine);
    return DWELL_ERR_ABI_MISMATCH;
}
