// The table of host services every plugin receives (sdk/include/dwell/plugin.h):
// logging into dwell's log, page allocation charged to the memory pool, and
// the notice that a backend copied weights (so their file pages may go).
//
// Thread-safety: the callbacks may be called from any thread (the pool is
// thread-safe). Ownership: the table points at `pool`, which must outlive
// every plugin context that holds the table.
#pragma once

#include "dwell/core/memory/memory_pool.hpp"
#include "dwell/plugin.h"

namespace dwell {

dwell_host_services host_services_for(MemoryPool& pool);

}  // namespace dwell
