// Giving back the resident pages of a read-only file mapping whose bytes a
// backend has copied (e.g. weights repacked for its kernels), so a model's
// weights are not held in memory twice. The bytes stay readable: the kernel
// reads them back from the file if anything touches them again.
//
// Thread-safety: safe from any thread. Ownership: nothing is owned; the
// caller guarantees the range stays mapped for the call.
#pragma once

#include <cstddef>

namespace dwell {

// Drops the whole pages inside [data, data + bytes) if the range lies in one
// private, read-only, file-backed mapping of this process (per
// /proc/self/maps); returns the bytes dropped, 0 if the range is anything
// else (anonymous or writable memory would lose its contents).
size_t drop_file_backed_pages(const void* data, size_t bytes);

}  // namespace dwell
