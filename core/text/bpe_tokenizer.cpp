#include "dwell/core/text/bpe_tokenizer.hpp"

#include <algorithm>
#include <queue>

#include "dwell/core/text/bpe_byte_map.hpp"

namespace dwell::bpe {
namespace {

// One key for an ordered pair of byte strings: the left length, then both.
std::string pair_key(std::string_view left, std::string_view right) {
    std::string key;
    key.reserve(sizeof(uint32_t) + left.size() + right.size());
    const auto n = static_cast<uint32_t>(left.size());
    key.append(reinterpret_cast<const char*>(&n), sizeof n);
    key.append(left);
    key.append(right);
    return key;
}

// A symbol of a word being merged: bytes [start, start + len), linked to its
// neighbours; len 0 once merged into its left neighbour.
struct Symbol {
    size_t start;
    size_t len;
    int prev;
    int next;
};

// A pair of adjacent symbols that a merge joins, as it was when queued.
struct Candidate {
    int32_t rank;
    int left;
    int right;
    size_t left_len;
    size_t right_len;
};

struct LaterCandidate {
    bool operator()(const Candidate& a, const Candidate& b) const {
        return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
    }
};

}  // namespace

BpeTokenizer::BpeTokenizer(std::span<const std::string_view> tokens,
                           std::span<const std::string_view> merges, PreTokenizerKind pre)
    : pre_(pre), ignore_merges_(pre == PreTokenizerKind::llama3) {
    single_byte_ids_.fill(-1);
    ids_.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
        const auto id = static_cast<int32_t>(i);
        if (tokens[i].size() == 1) single_byte_ids_[static_cast<uint8_t>(tokens[i][0])] = id;
        // A token whose text is not alphabet text is never a symbol's text.
        if (auto bytes = alphabet_to_bytes(tokens[i])) ids_.insert_or_assign(std::move(*bytes), id);
    }
    ranks_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string_view m = merges[i];
        // Split at the first space after the first character, as GGUF
        // writers join the two sides.
        const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
        if (space == std::string_view::npos) continue;
        const auto left = alphabet_to_bytes(m.substr(0, space));
        const auto right = alphabet_to_bytes(m.substr(space + 1));
        if (!left || !right || left->empty() || right->empty()) continue;  // never applies
        ranks_.emplace(pair_key(*left, *right), static_cast<int32_t>(i));
    }
}

int32_t BpeTokenizer::merge_rank(std::string_view left, std::string_view right) const {
    const auto it = ranks_.find(pair_key(left, right));
    return it == ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
    pre_.split(text, [&](std::string_view word) { encode_word(word, out); });
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (ignore_merges_) {
        if (const auto it = ids_.find(std::string(word)); it != ids_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    std::vector<Symbol> symbols(word.size());
    for (size_t i = 0; i < word.size(); ++i) {
        symbols[i] = Symbol{i, 1, static_cast<int>(i) - 1,
                            i + 1 < word.size() ? static_cast<int>(i) + 1 : -1};
    }
    std::priority_queue<Candidate, std::vector<Candidate>, LaterCandidate> queue;
    auto consider = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[static_cast<size_t>(left)];
        const Symbol& r = symbols[static_cast<size_t>(right)];
        const int32_t rank = merge_rank(word.substr(l.start, l.len), word.substr(r.start, r.len));
        if (rank >= 0) queue.push(Candidate{rank, left, right, l.len, r.len});
    };
    for (size_t i = 1; i < symbols.size(); ++i) {
        consider(static_cast<int>(i) - 1, static_cast<int>(i));
    }
    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& l = symbols[static_cast<size_t>(c.left)];
        Symbol& r = symbols[static_cast<size_t>(c.right)];
        // Symbols only grow, and start where they started: unchanged lengths
        // and adjacency mean the pair is still the one that was queued.
        if (l.len != c.left_len || r.len != c.right_len || l.next != c.right) continue;
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = c.left;
        consider(l.prev, c.left);
        consider(c.left, l.next);
    }
    for (int i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        const std::string_view bytes = word.substr(s.start, s.len);
        if (const auto it = ids_.find(std::string(bytes)); it != ids_.end()) {
            out.push_back(it->second);
            continue;
        }
        // Not a token (a vocabulary whose merges make texts it lacks): the
        // single-character tokens among the symbol's alphabet text.
        for (char c : bytes_to_alphabet(bytes)) {
            if (const int32_t id = single_byte_ids_[static_cast<uint8_t>(c)]; id >= 0) {
                out.push_back(id);
            }
        }
    }
}

std::string token_bytes(std::string_view text, int32_t type) {
    constexpr int32_t kNormal = 1;
    constexpr int32_t kUserDefined = 4;
    if (type == kUserDefined) return std::string(text);
    if (type != kNormal) return {};
    if (auto bytes = alphabet_to_bytes(text)) return std::move(*bytes);
    // Some character is outside the alphabet: keep those as they are.
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t len = 1;
        const auto b0 = static_cast<uint8_t>(text[pos]);
        if (b0 >= 0xF0) {
            len = 4;
        } else if (b0 >= 0xE0) {
            len = 3;
        } else if (b0 >= 0xC0) {
            len = 2;
        }
        len = std::min(len, text.size() - pos);
        const std::string_view ch = text.substr(pos, len);
        if (auto b = alphabet_to_bytes(ch)) {
            out += *b;
        } else {
            out += ch;
        }
        pos += len;
    }
    return out;
}

}  // namespace dwell::bpe
