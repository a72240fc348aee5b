// The core's old include path, kept so that code written against it builds;
// the functions live in the public header (the CLI uses them too).
#pragma once

#include "dwell/core/printable_name.hpp"
