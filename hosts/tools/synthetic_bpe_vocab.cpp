#include "dwell/tools/synthetic_bpe_vocab.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "dwell/core/base/error.hpp"
#include "dwell/core/text/bpe_byte_map.hpp"
#include "dwell/core/text/bpe_pre_tokenizer.hpp"
#include "dwell/tools/gguf_writer.hpp"
#include "dwell/tools/synthetic_bpe_corpus.hpp"

namespace dwell {
namespace {

constexpr int32_t kNormal = 1;
constexpr int32_t kControl = 3;
constexpr int32_t kUserDefined = 4;
constexpr int32_t kUnused = 5;

struct Special {
    const char* text;
    int32_t type;
};
constexpr Special kSpecials[] = {
    {"<|endoftext|>", kControl},   {"<|im_start|>", kControl},     {"<|im_end|>", kControl},
    {"<tool_call>", kUserDefined}, {"</tool_call>", kUserDefined},
};
constexpr int64_t kSpecialCount = std::size(kSpecials);

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Greedy BPE over weighted words, merging until `target` distinct tokens.
class Trainer {
public:
    explicit Trainer(const std::map<std::string, int64_t>& word_counts) {
        // The 256 byte tokens in the order of their alphabet code points
        // (printable bytes first), as byte-level vocabularies have them.
        std::vector<int> order(256);
        for (int b = 0; b < 256; ++b) order[static_cast<size_t>(b)] = b;
        std::sort(order.begin(), order.end(), [](int x, int y) {
            return bpe::byte_code_point(static_cast<uint8_t>(x)) <
                   bpe::byte_code_point(static_cast<uint8_t>(y));
        });
        std::array<int32_t, 256> byte_id{};
        for (int b : order) {
            byte_id[static_cast<size_t>(b)] = add_token(std::string(1, static_cast<char>(b)));
        }
        for (const auto& [word, count] : word_counts) {
            std::vector<int32_t> symbols;
            for (char c : word) symbols.push_back(byte_id[static_cast<uint8_t>(c)]);
            words_.push_back(std::move(symbols));
            counts_.push_back(count);
            count_pairs(words_.size() - 1, +1);
        }
    }

    // Returns false when no pair is left to merge.
    bool merge_once() {
        uint64_t best = 0;
        int64_t best_count = 0;
        for (const auto& [key, count] : pair_counts_) {
            if (count > best_count || (count == best_count && count > 0 && key < best)) {
                best = key;
                best_count = count;
            }
        }
        if (best_count <= 0) return false;
        const auto a = static_cast<int32_t>(best >> 32);
        const auto b = static_cast<int32_t>(best & 0xFFFFFFFFu);
        const std::string joined = bytes_[static_cast<size_t>(a)] + bytes_[static_cast<size_t>(b)];
        const auto found = ids_.find(joined);
        const int32_t merged = found != ids_.end() ? found->second : add_token(joined);
        if (merged_pairs_.insert(best).second) {
            merges_.push_back(bpe::bytes_to_alphabet(bytes_[static_cast<size_t>(a)]) + " " +
                              bpe::bytes_to_alphabet(bytes_[static_cast<size_t>(b)]));
        }
        std::vector<size_t> affected = std::move(where_[best]);
        where_.erase(best);
        std::sort(affected.begin(), affected.end());
        affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
        for (size_t w : affected) {
            std::vector<int32_t>& s = words_[w];
            count_pairs(w, -1);
            std::vector<int32_t> out;
            out.reserve(s.size());
            for (size_t i = 0; i < s.size(); ++i) {
                if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
                    out.push_back(merged);
                    ++i;
                } else {
                    out.push_back(s[i]);
                }
            }
            s = std::move(out);
            count_pairs(w, +1);
        }
        return true;
    }

    size_t n_tokens() const { return bytes_.size(); }
    const std::vector<std::string>& token_bytes() const { return bytes_; }
    const std::vector<std::string>& merges() const { return merges_; }

private:
    int32_t add_token(const std::string& bytes) {
        const auto id = static_cast<int32_t>(bytes_.size());
        bytes_.push_back(bytes);
        ids_.emplace(bytes, id);
        return id;
    }

    void count_pairs(size_t w, int sign) {
        const std::vector<int32_t>& s = words_[w];
        for (size_t i = 0; i + 1 < s.size(); ++i) {
            const uint64_t key = pair_key(s[i], s[i + 1]);
            const int64_t c = (pair_counts_[key] += sign * counts_[w]);
            if (sign > 0) where_[key].push_back(w);
            if (c == 0) pair_counts_.erase(key);
        }
    }

    std::vector<std::string> bytes_;  // raw bytes of every token
    std::unordered_map<std::string, int32_t> ids_;
    std::vector<std::string> merges_;
    std::unordered_set<uint64_t> merged_pairs_;
    std::vector<std::vector<int32_t>> words_;
    std::vector<int64_t> counts_;
    std::unordered_map<uint64_t, int64_t> pair_counts_;
    // Words that held each pair at some point (a superset of those that do).
    std::unordered_map<uint64_t, std::vector<size_t>> where_;
};

}  // namespace

BpeVocab make_synthetic_bpe_vocab(int64_t n_vocab, uint64_t seed) {
    constexpr int64_t kMin = 256 + kSpecialCount;
    if (n_vocab < kMin) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "synthetic BPE vocabulary: n_vocab " + std::to_string(n_vocab) +
                        " is too small (at least " + std::to_string(kMin) +
                        ": 256 byte tokens and " + std::to_string(kSpecialCount) +
                        " special ones)");
    }
    // Real vocabularies stay below 300k; a million bounds the reserved
    // tokens a mistyped size would write.
    constexpr int64_t kMax = 1'000'000;
    if (n_vocab > kMax) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "synthetic BPE vocabulary: n_vocab " + std::to_string(n_vocab) +
                        " is too large (at most " + std::to_string(kMax) + ")");
    }
    const bpe::PreTokenizer pre(bpe::PreTokenizerKind::qwen2);
    std::map<std::string, int64_t> word_counts;
    const auto corpus = synthetic_bpe_corpus();
    for (size_t p = 0; p < corpus.size(); ++p) {
        const int64_t weight =
            1 + static_cast<int64_t>(splitmix64(seed ^ (p * 0x100000001B3ull)) % 3);
        pre.split(corpus[p],
                  [&](std::string_view word) { word_counts[std::string(word)] += weight; });
    }

    Trainer trainer(word_counts);
    auto target = static_cast<size_t>(n_vocab - kSpecialCount);
    while (trainer.n_tokens() < target && trainer.merge_once()) {
    }
    // A vocabulary of a real model's size (151,936 for Qwen3) needs more
    // tokens than the training text yields: the rest are reserved tokens
    // after the special ones, as real vocabularies hold, which text never
    // encodes to but the output layer still scores (what a speed
    // measurement of that shape needs).
    const size_t n_reserved = target - trainer.n_tokens();
    target = trainer.n_tokens();

    BpeVocab v;
    for (const std::string& bytes : trainer.token_bytes()) {
        v.tokens.push_back(bpe::bytes_to_alphabet(bytes));
        v.types.push_back(kNormal);
    }
    v.merges = trainer.merges();
    for (const Special& s : kSpecials) {
        v.tokens.emplace_back(s.text);
        v.types.push_back(s.type);
    }
    for (size_t i = 0; i < n_reserved; ++i) {
        v.tokens.push_back("<|reserved_" + std::to_string(i) + "|>");
        v.types.push_back(kUnused);
    }
    const auto eos = static_cast<int32_t>(target);  // "<|endoftext|>"
    v.bos = eos;
    v.eos = eos;
    v.pad = eos;
    v.add_bos = false;
    return v;
}

void write_bpe_vocab(GgufWriter& w, const BpeVocab& v, const std::string& pre) {
    if (!bpe::pre_tokenizer_kind(pre)) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "BPE vocabulary: tokenizer.ggml.pre '" + pre +
                        "' is not supported (supported: " + bpe::supported_pre_tokenizers() + ")");
    }
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", pre);
    w.add_string_array("tokenizer.ggml.tokens", v.tokens);
    w.add_int32_array("tokenizer.ggml.token_type", v.types);
    w.add_string_array("tokenizer.ggml.merges", v.merges);
    if (v.bos >= 0) w.add_uint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
    if (v.eos >= 0) w.add_uint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
    if (v.pad >= 0) w.add_uint32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
    w.add_bool("tokenizer.ggml.add_bos_token", v.add_bos);
}

}  // namespace dwell
