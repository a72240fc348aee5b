#include "dwell/core/base/version.hpp"

namespace dwell {
const char* version() {
    return DWELL_VERSION;
}
}  // namespace dwell
