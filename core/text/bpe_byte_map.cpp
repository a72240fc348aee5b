#include "dwell/core/text/bpe_byte_map.hpp"

#include <array>

namespace dwell::bpe {
namespace {

bool stands_for_itself(uint32_t byte) {
    return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
           (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
    std::array<uint32_t, 256> code_point{};
    // Indexed by code point; the alphabet ends below U+0100 + 68.
    std::array<int16_t, 0x100 + 68> byte{};

    Alphabet() {
        byte.fill(-1);
        uint32_t next = 0x100;
        for (uint32_t b = 0; b < 256; ++b) {
            code_point[b] = stands_for_itself(b) ? b : next++;
            byte[code_point[b]] = static_cast<int16_t>(b);
        }
    }
};

const Alphabet& alphabet() {
    static const Alphabet table;
    return table;
}

// Decodes one well-formed UTF-8 character at the start of `s` (non-empty);
// 0 in *len when there is none.
uint32_t decode_utf8(std::string_view s, size_t* len) {
    const auto b0 = static_cast<uint8_t>(s[0]);
    *len = 0;
    if (b0 < 0x80) {
        *len = 1;
        return b0;
    }
    size_t need = 0;
    uint32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
        cp = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        cp = b0 & 0x0Fu;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        cp = b0 & 0x07u;
    } else {
        return 0;
    }
    if (s.size() < need) return 0;
    for (size_t i = 1; i < need; ++i) {
        const auto b = static_cast<uint8_t>(s[i]);
        if ((b & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3Fu);
    }
    const uint32_t min = need == 2 ? 0x80 : need == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    *len = need;
    return cp;
}

}  // namespace

uint32_t byte_code_point(uint8_t byte) {
    return alphabet().code_point[byte];
}

std::optional<uint8_t> code_point_byte(uint32_t code_point) {
    const Alphabet& a = alphabet();
    if (code_point >= a.byte.size() || a.byte[code_point] < 0) return std::nullopt;
    return static_cast<uint8_t>(a.byte[code_point]);
}

void append_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string bytes_to_alphabet(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) append_utf8(byte_code_point(static_cast<uint8_t>(c)), out);
    return out;
}

std::optional<std::string> alphabet_to_bytes(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    while (!text.empty()) {
        size_t len = 0;
        const uint32_t cp = decode_utf8(text, &len);
        if (len == 0) return std::nullopt;
        const auto b = code_point_byte(cp);
        if (!b) return std::nullopt;
        out.push_back(static_cast<char>(*b));
        text.remove_prefix(len);
    }
    return out;
}

}  // namespace dwell::bpe
