#include "dwell/tools/synthetic_spm_vocab.hpp"

#include <cstdio>
#include <set>

#include "dwell/core/text/bpe_byte_map.hpp"
#include "dwell/tools/gguf_writer.hpp"
#include "dwell/tools/synthetic_bpe_vocab.hpp"

namespace dwell {
namespace {

constexpr int32_t kNormal = 1;
constexpr int32_t kUnknown = 2;
constexpr int32_t kControl = 3;
constexpr int32_t kUserDefined = 4;
constexpr int32_t kByte = 6;

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581

struct Fixed {
    const char* text;
    int32_t type;
};
constexpr Fixed kFixed[] = {
    {"<pad>", kControl},
    {"<eos>", kControl},
    {"<bos>", kControl},
    {"<unk>", kUnknown},
    {"<start_of_turn>", kControl},
    {"<end_of_turn>", kControl},
    {"<start_of_image>", kControl},
    {"<end_of_image>", kControl},
    {"<table>", kUserDefined},
    {"</table>", kUserDefined},
    {"<br>", kUserDefined},
    {"\t\t", kUserDefined},
};

std::string with_space_symbol(std::string_view bytes) {
    std::string out;
    for (char c : bytes) {
        if (c == ' ') {
            out.append(kSpaceSymbol);
        } else {
            out.push_back(c);
        }
    }
    return out;
}

// Well-formed UTF-8 (Unicode table 3-7), ending with a whole character.
bool is_whole_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<uint8_t>(s[i]);
        const size_t n = b < 0x80                 ? 1
                         : b >= 0xC2 && b <= 0xDF ? 2
                         : b >= 0xE0 && b <= 0xEF ? 3
                         : b >= 0xF0 && b <= 0xF4 ? 4
                                                  : 0;
        if (n == 0 || s.size() - i < n) return false;
        for (size_t k = 1; k < n; ++k) {
            const auto c = static_cast<uint8_t>(s[i + k]);
            const uint8_t lo = k == 1 && b == 0xE0 ? 0xA0 : k == 1 && b == 0xF0 ? 0x90 : 0x80;
            const uint8_t hi = k == 1 && b == 0xED ? 0x9F : k == 1 && b == 0xF4 ? 0x8F : 0xBF;
            if (c < lo || c > hi) return false;
        }
        i += n;
    }
    return true;
}

}  // namespace

SpmVocab make_synthetic_spm_vocab(int64_t n_bpe, uint64_t seed) {
    SpmVocab v;
    std::set<std::string> seen;
    auto add = [&](std::string text, float score, int32_t type) {
        if (!seen.insert(text).second) return;
        v.tokens.push_back(std::move(text));
        v.scores.push_back(score);
        v.types.push_back(type);
    };
    for (const Fixed& f : kFixed) add(f.text, 0.0f, f.type);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        add(name, 0.0f, kByte);
    }
    // The BPE vocabulary lists its tokens in the order training made them;
    // sentencepiece scores earlier merges higher.
    const BpeVocab bpe = make_synthetic_bpe_vocab(n_bpe, seed);
    add(std::string(kSpaceSymbol), 0.0f, kNormal);
    float score = -1.0f;
    for (size_t i = 0; i < bpe.tokens.size(); ++i) {
        if (bpe.types[i] != kNormal) continue;
        const auto bytes = bpe::alphabet_to_bytes(bpe.tokens[i]);
        // Only whole characters: half of one is no SPM piece. Control
        // bytes are left to byte fallback.
        if (!bytes || bytes->empty() || !is_whole_utf8(*bytes)) continue;
        if (bytes->size() == 1 && static_cast<uint8_t>((*bytes)[0]) < 0x20) continue;
        add(with_space_symbol(*bytes), score, kNormal);
        score -= 1.0f;
    }
    return v;
}

void write_spm_vocab(GgufWriter& w, const SpmVocab& v) {
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", v.tokens);
    w.add_float32_array("tokenizer.ggml.scores", v.scores);
    w.add_int32_array("tokenizer.ggml.token_type", v.types);
    w.add_uint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
    w.add_uint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
    w.add_uint32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
    w.add_uint32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
    w.add_bool("tokenizer.ggml.add_bos_token", v.add_bos);
    w.add_bool("tokenizer.ggml.add_eos_token", false);
    w.add_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
}

}  // namespace dwell
