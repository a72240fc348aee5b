// The texts of tests/data/bpe/texts.txt and the reference ids beside them,
// shared by the tests that compare dwell's tokenizers with llama-tokenize's
// ids on the same vocabulary files (tests/data/bpe/README.md).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "test_paths.hpp"

namespace dwell::reference_texts {

inline std::filesystem::path data_dir() {
    return std::filesystem::path(DWELL_TEST_SOURCE_DIR) / "tests" / "data" / "bpe";
}

// texts.txt escapes: \\ \n \r \t \xHH.
inline std::string unescape(const std::string& line) {
    std::string out;
    for (size_t i = 0; i < line.size(); ++i) {
        if (line[i] != '\\' || i + 1 >= line.size()) {
            out.push_back(line[i]);
            continue;
        }
        const char c = line[++i];
        if (c == 'n') {
            out.push_back('\n');
        } else if (c == 'r') {
            out.push_back('\r');
        } else if (c == 't') {
            out.push_back('\t');
        } else if (c == 'x' && i + 2 < line.size()) {
            out.push_back(static_cast<char>(std::stoi(line.substr(i + 1, 2), nullptr, 16)));
            i += 2;
        } else {
            out.push_back(c);
        }
    }
    return out;
}

inline std::vector<std::string> read_lines(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << "cannot open " << path;
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

inline const std::vector<std::string>& texts() {
    static const std::vector<std::string> all = [] {
        std::vector<std::string> out;
        for (const std::string& line : read_lines(data_dir() / "texts.txt")) {
            out.push_back(unescape(line));
        }
        return out;
    }();
    return all;
}

// Well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).
inline bool is_valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<uint8_t>(s[i]);
        const size_t n = b < 0x80                 ? 1
                         : b >= 0xC2 && b <= 0xDF ? 2
                         : b >= 0xE0 && b <= 0xEF ? 3
                         : b >= 0xF0 && b <= 0xF4 ? 4
                                                  : 0;
        if (n == 0 || i + n > s.size()) return false;
        uint32_t cp = n == 2 ? b & 0x1Fu : n == 3 ? b & 0x0Fu : b & 0x07u;
        for (size_t k = 1; k < n; ++k) {
            const auto c = static_cast<uint8_t>(s[i + k]);
            if ((c & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (c & 0x3Fu);
        }
        if (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
        if (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return false;
        i += n;
    }
    return true;
}

inline std::vector<int32_t> parse_ids(const std::string& s) {
    std::istringstream in(s);
    std::vector<int32_t> ids;
    for (int32_t id; in >> id;) ids.push_back(id);
    return ids;
}

// One reference line, "<vocab> <special|plain> <line of texts.txt>: <ids>".
struct ReferenceLine {
    std::string vocab;
    bool special = false;
    size_t index = 0;
    std::vector<int32_t> ids;
};

// The reference lines of `vocab`, checked for form.
inline std::vector<ReferenceLine> reference_lines(std::string_view vocab) {
    std::vector<ReferenceLine> out;
    for (const std::string& line : read_lines(data_dir() / "reference_ids.txt")) {
        if (line.empty() || line[0] == '#' || line.find(':') == std::string::npos) continue;
        std::istringstream head(line.substr(0, line.find(':')));
        ReferenceLine r;
        std::string mode;
        head >> r.vocab >> mode >> r.index;
        if (r.vocab != vocab) continue;
        EXPECT_TRUE(mode == "special" || mode == "plain") << line;
        EXPECT_LT(r.index, texts().size()) << line;
        if (r.index >= texts().size()) continue;
        r.special = mode == "special";
        r.ids = parse_ids(line.substr(line.find(':') + 1));
        out.push_back(std::move(r));
    }
    return out;
}

// FNV-1a 64 over a sequence of strings, each closed by a byte no UTF-8
// text holds: the fingerprint of a synthetic vocabulary.
class Fnv1a64 {
public:
    void mix(std::string_view s) {
        for (char c : s) byte(static_cast<uint8_t>(c));
        byte(0xFF);
    }
    uint64_t value() const { return h_; }

private:
    void byte(uint8_t b) {
        h_ ^= b;
        h_ *= 0x100000001B3ull;
    }
    uint64_t h_ = 0xCBF29CE484222325ull;
};

}  // namespace dwell::reference_texts
