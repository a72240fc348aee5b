// SPM encoding as llama.cpp does it: the text (spaces already written as
// U+2581) starts as one symbol per UTF-8 character; the adjacent pair whose
// concatenation is a token of the highest score merges first (ties: the
// leftmost), over and over; a symbol left that is no token becomes its
// bytes' <0xNN> tokens (or the one-byte token, or unknown).
//
// It differs from sentencepiece's own encoder where llama.cpp does: every
// token may be merged into (control and unused ones too), and a byte that
// starts no UTF-8 character is a symbol of its own, written as its byte
// token rather than read as U+FFFD.
//
// Thread-safety: encode() is const and safe from many threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dwell {

class SpmEncoder {
public:
    // pieces[i] and scores[i] are token i's text and score; `unk` is the
    // token for a byte that has no token of its own.
    SpmEncoder(std::vector<std::string> pieces, std::vector<float> scores, int32_t unk);
    // ids_ views pieces_: a copy would view the original's.
    SpmEncoder(const SpmEncoder&) = delete;
    SpmEncoder& operator=(const SpmEncoder&) = delete;

    // Appends the ids of `text` to `out`.
    void encode(std::string_view text, std::vector<int32_t>& out) const;

private:
    int32_t find(std::string_view text) const;

    std::vector<std::string> pieces_;
    std::vector<float> scores_;
    std::unordered_map<std::string_view, int32_t> ids_;  // views into pieces_
    std::array<int32_t, 256> byte_ids_{};                // the token of each byte
};

}  // namespace dwell
