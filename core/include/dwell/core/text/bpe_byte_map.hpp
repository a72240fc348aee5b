// The byte-level BPE alphabet: each of the 256 byte values is written as one
// printable code point, so that a vocabulary can hold arbitrary bytes (a
// space, a newline, half of a UTF-8 character) as ordinary text. The
// printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand
// for themselves; the other 68 bytes take U+0100 onwards in byte order, so a
// space is written "Ġ" (U+0120) and a newline "Ċ" (U+010A).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dwell/core/base/export.hpp"

namespace dwell::bpe {

DWELL_CORE_API uint32_t byte_code_point(uint8_t byte);
// The byte a code point of the alphabet stands for; nullopt for any other.
std::optional<uint8_t> code_point_byte(uint32_t code_point);

// Appends `code_point` (at most U+10FFFF) as UTF-8.
void append_utf8(uint32_t code_point, std::string& out);

// Raw bytes -> alphabet text ("a b" -> "aĠb").
DWELL_CORE_API std::string bytes_to_alphabet(std::string_view bytes);
// Alphabet text -> raw bytes; nullopt when `text` is not well-formed UTF-8
// or holds a character outside the alphabet.
std::optional<std::string> alphabet_to_bytes(std::string_view text);

}  // namespace dwell::bpe
