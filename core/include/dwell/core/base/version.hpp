// libdwell's version string, for `dwell --version` and plugin diagnostics.
#pragma once

#include "dwell/core/base/export.hpp"

namespace dwell {

DWELL_CORE_API const char* version();

}  // namespace dwell
