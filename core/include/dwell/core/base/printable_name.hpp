// Names read from a model file, a device tree, the environment or a file
// name may hold anything; error messages and reports must stay one readable
// line that cannot move the cursor or forge a log line. printable_name()
// escapes control bytes, backslashes and quotes as \xNN and cuts long names
// with "..."; printable_text() escapes control bytes alone, for whole
// messages whose quotes are their own.
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

inline std::string printable_text(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += ch;
        }
    }
    return out;
}

}  // namespace dwell
