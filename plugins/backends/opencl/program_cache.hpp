// The opencl program: the portable kernel set, with the Adreno set appended
// when the context asks for it, built once per device and driver and cached
// on disk; and the [[backend]] options that choose the set and the cache.
//
// Thread-safety: build_program uses the context it is given (one caller at
// a time); a cache file is written under a temporary name and renamed.
#pragma once

#include <dwell/backend.h>

#include <cstddef>
#include <filesystem>
#include <string>

#include "opencl_context.hpp"

namespace dwell::opencl {

// The [[backend]] options this plugin takes.
struct Options {
    std::filesystem::path cache_dir;  // empty: the default below
    std::string kernels = "auto";     // auto | portable | adreno
};

// Throws std::invalid_argument naming an unknown key or a bad value.
Options parse_options(const dwell_option* options, size_t n);

// The program for c.adreno's kernel set on device d: the cached binary for
// this device, driver and source when there is one, else built from source
// (and cached). Throws std::runtime_error saying what failed, with the build
// log when the build did.
cl_program build_program(dwell_backend_context& c, const Device& d, const Options& options);

}  // namespace dwell::opencl
