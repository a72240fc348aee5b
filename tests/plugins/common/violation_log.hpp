// The contract record of the vendor-library test doubles (hexagon_double,
// apu_double, nnrt_double): each broken rule as a line, and the text a
// test reads back through the double's fake_*_violations(out, cap) or
// another text query.
//
// Thread-safety: none of its own; a double uses it under its state mutex.
// Ownership: copy_text writes into the caller's buffer and keeps nothing.
#pragma once

#include <cstring>
#include <string>

namespace fake_vendor {

// The violations seen so far, one line each.
struct ViolationLog {
    std::string lines;

    void add(const std::string& what) { lines += what + "\n"; }
    void clear() { lines.clear(); }
};

// `text` into out[0..cap) (cut short and NUL-terminated; nothing when out is
// null or cap is not positive); returns text's full length, as the C query
// functions do.
inline int copy_text(const std::string& text, char* out, int cap) {
    if (out != nullptr && cap > 0) {
        std::strncpy(out, text.c_str(), static_cast<size_t>(cap) - 1);
        out[cap - 1] = 0;
    }
    return static_cast<int>(text.size());
}

}  // namespace fake_vendor
