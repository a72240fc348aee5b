// Names read from a model file may hold anything; error messages must stay
// one readable line. This escapes control bytes, backslashes and quotes as
// \xNN and cuts long names with "...".
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

namespace dwell {

inline std::string printable_name(std::string_view s, size_t max_chars = 80) {
    std::string out;
    const size_t n = std::min(s.size(), max_chars);
    out.reserve(n + 8);
    for (size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    if (s.size() > n) out += "...";
    return out;
}

}  // namespace dwell
