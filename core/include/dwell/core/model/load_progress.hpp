// How the core reports the progress of a long load step without drawing
// anything: a callback the host passes in (the dwell CLI draws a terminal
// progress bar, dwell/tools/progress_bar.hpp; an app may update its UI).
//
// Thread-safety: called on the thread that loads, never concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace dwell {

// `what` ("loading weights"), `done` of `total` units (MiB); `done == total`
// ends the step. May be empty (no reporting).
using LoadProgress = std::function<void(std::string_view what, int64_t done, int64_t total)>;

}  // namespace dwell
