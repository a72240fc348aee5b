// What libdwell exports. The library is built with hidden visibility
// (core/CMakeLists.txt): only the classes and functions that hosts use (the
// CLI, the server, the C API, dwell-conformance, hosts/tools, the benches)
// carry DWELL_CORE_API, so everything else stays inside the library and may
// change without a host noticing. The tests of internals link the same
// objects as a static archive (dwell_core_static) instead.
//
// A class marked as a whole exports its vtable and typeinfo too: exceptions
// (dwell::Error) and interfaces (ModelSource) must be one type on both sides.
#pragma once

//
// DWELL_CORE_LOCAL keeps a nested type of an exported class (a pimpl's Impl)
// inside: nested types take the visibility of the class around them.
#if defined(__GNUC__) || defined(__clang__)
#define DWELL_CORE_API __attribute__((visibility("default")))
#define DWELL_CORE_LOCAL __attribute__((visibility("hidden")))
#else
#define DWELL_CORE_API
#define DWELL_CORE_LOCAL
#endif
