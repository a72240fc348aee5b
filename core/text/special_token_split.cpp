#include "dwell/core/text/special_token_split.hpp"

#include <algorithm>

namespace dwell {

void sort_special_tokens(std::vector<SpecialToken>& specials) {
    std::sort(specials.begin(), specials.end(), [](const SpecialToken& a, const SpecialToken& b) {
        return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.id < b.id;
    });
}

std::vector<TextPiece> split_at_special_tokens(std::string_view text,
                                               std::span<const SpecialToken> specials) {
    std::vector<TextPiece> pieces;
    if (text.empty()) return pieces;
    pieces.push_back(TextPiece{text, -1});
    for (const SpecialToken& special : specials) {
        if (special.text.empty()) continue;
        std::vector<TextPiece> next;
        next.reserve(pieces.size());
        for (const TextPiece& piece : pieces) {
            if (piece.id >= 0) {
                next.push_back(piece);
                continue;
            }
            std::string_view rest = piece.text;
            for (size_t hit = rest.find(special.text); hit != std::string_view::npos;
                 hit = rest.find(special.text)) {
                if (hit > 0) next.push_back(TextPiece{rest.substr(0, hit), -1});
                next.push_back(TextPiece{rest.substr(hit, special.text.size()), special.id});
                rest.remove_prefix(hit + special.text.size());
            }
            if (!rest.empty()) next.push_back(TextPiece{rest, -1});
        }
        pieces = std::move(next);
    }
    return pieces;
}

}  // namespace dwell
