#include "dwell/core/text/spm_encoder.hpp"

#include <algorithm>
#include <cstdio>
#include <queue>
#include <utility>

namespace dwell {
namespace {

// The length a UTF-8 lead byte announces, from its top four bits; a
// continuation byte counts as one (llama.cpp reads it so).
size_t utf8_length(char lead) {
    static constexpr size_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLengths[static_cast<uint8_t>(lead) >> 4];
}

struct Symbol {
    size_t begin = 0;
    size_t size = 0;  // 0 once merged into the symbol on its left
    int prev = -1;
    int next = -1;
};

struct Candidate {
    float score = 0.0f;
    int left = 0;
    int right = 0;
    size_t size = 0;  // of the merged text, to tell a stale candidate
};

// The queue's top: the highest score, then the leftmost.
struct Lower {
    bool operator()(const Candidate& a, const Candidate& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

}  // namespace

SpmEncoder::SpmEncoder(std::vector<std::string> pieces, std::vector<float> scores, int32_t unk)
    : pieces_(std::move(pieces)), scores_(std::move(scores)) {
    ids_.reserve(pieces_.size());
    for (size_t i = 0; i < pieces_.size(); ++i) {
        ids_.insert_or_assign(std::string_view(pieces_[i]), static_cast<int32_t>(i));
    }
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        int32_t id = find(name);
        if (id < 0) id = find(std::string(1, static_cast<char>(b)));
        byte_ids_[b] = id >= 0 ? id : unk;
    }
}

int32_t SpmEncoder::find(std::string_view text) const {
    const auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
}

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
    std::vector<Symbol> symbols;
    for (size_t pos = 0; pos < text.size();) {
        const size_t n = std::min(utf8_length(text[pos]), text.size() - pos);
        const int index = static_cast<int>(symbols.size());
        symbols.push_back(Symbol{pos, n, index - 1, pos + n < text.size() ? index + 1 : -1});
        pos += n;
    }
    std::priority_queue<Candidate, std::vector<Candidate>, Lower> queue;
    auto consider = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[static_cast<size_t>(left)];
        const Symbol& r = symbols[static_cast<size_t>(right)];
        const int32_t id = find(text.substr(l.begin, l.size + r.size));
        if (id < 0) return;
        queue.push(Candidate{scores_[static_cast<size_t>(id)], left, right, l.size + r.size});
    };
    for (size_t i = 1; i < symbols.size(); ++i) {
        consider(static_cast<int>(i) - 1, static_cast<int>(i));
    }
    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& l = symbols[static_cast<size_t>(c.left)];
        Symbol& r = symbols[static_cast<size_t>(c.right)];
        // Either side merged since: this candidate is gone.
        if (l.size == 0 || r.size == 0 || l.size + r.size != c.size) continue;
        l.size += r.size;
        r.size = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = c.left;
        consider(l.prev, c.left);
        consider(c.left, l.next);
    }
    for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
        const Symbol& s = symbols[static_cast<size_t>(i)];
        const std::string_view piece = text.substr(s.begin, s.size);
        // A merged symbol is always a token; one character may be none.
        if (const int32_t id = find(piece); id >= 0) {
            out.push_back(id);
            continue;
        }
        for (char b : piece) out.push_back(byte_ids_[static_cast<uint8_t>(b)]);
    }
}

}  // namespace dwell
