#include "dwell/core/text/bpe_pre_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <utility>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/text/bpe_byte_map.hpp"

namespace dwell::bpe {
namespace {

struct PreName {
    std::string_view name;
    PreTokenizerKind kind;
};

// tokenizer.ggml.pre values of GGUF files whose pre-tokenizer is one of our
// patterns and whose encoding needs nothing else.
constexpr std::array<PreName, 16> kPreNames = {{
    {"gpt-2", PreTokenizerKind::gpt2},
    {"phi-2", PreTokenizerKind::gpt2},
    {"roberta-bpe", PreTokenizerKind::gpt2},
    {"mpt", PreTokenizerKind::gpt2},
    {"olmo", PreTokenizerKind::gpt2},
    {"jais", PreTokenizerKind::gpt2},
    {"qwen2", PreTokenizerKind::qwen2},
    {"deepseek-r1-qwen", PreTokenizerKind::qwen2},
    {"stablelm2", PreTokenizerKind::qwen2},
    {"megrez", PreTokenizerKind::qwen2},
    {"llama-bpe", PreTokenizerKind::llama3},
    {"llama3", PreTokenizerKind::llama3},
    {"llama-v3", PreTokenizerKind::llama3},
    {"lfm2", PreTokenizerKind::llama3},  // LFM2's vocabulary: Llama 3's pattern, BOS added
    {"smollm", PreTokenizerKind::smollm},
    {"gpt-4o", PreTokenizerKind::gpt4o},
}};

// Unicode's White_Space property, as a class body: what \s means above.
#define DWELL_BPE_SPACE                                                                         \
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}" \
    "\\x{205F}\\x{3000}"

constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" DWELL_BPE_SPACE
    "\\p{L}\\p{N}]+|[" DWELL_BPE_SPACE "]+(?![^" DWELL_BPE_SPACE "])|[" DWELL_BPE_SPACE "]+";

constexpr const char* kQwen2Pattern =
    "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^" DWELL_BPE_SPACE "\\p{L}\\p{N}]+[\\r\\n]*|[" DWELL_BPE_SPACE
    "]*[\\r\\n]+|[" DWELL_BPE_SPACE "]+(?![^" DWELL_BPE_SPACE "])|[" DWELL_BPE_SPACE "]+";

// Qwen2's pattern with digits in runs of up to three (Llama 3).
constexpr const char* kLlama3Pattern =
    "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}{1,3}| ?[^" DWELL_BPE_SPACE "\\p{L}\\p{N}]+[\\r\\n]*|[" DWELL_BPE_SPACE
    "]*[\\r\\n]+|[" DWELL_BPE_SPACE "]+(?![^" DWELL_BPE_SPACE "])|[" DWELL_BPE_SPACE "]+";

// Letters in runs of "upper" then "lower" ones, each with an optional
// contraction, digits in runs of up to three, and '/' kept with the newlines
// after punctuation (GPT-4o's o200k split, as Phi-4-mini uses it). Only
// ASCII letters have a case here: llama.cpp matches this pattern on text
// where every other letter reads as one category (its "collapsed" text), so
// its (?=\p{L})[^a-z] and (?=\p{L})[^A-Z] both take any non-ASCII letter,
// and "ПриветМир" stays one word. [^\P{L}a-z] is that first class as one
// character class, which PCRE2's JIT repeats without a stack frame per
// letter (the lookahead form runs out of JIT stack on long words).
#define DWELL_BPE_CONTRACTION "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
constexpr const char* kGpt4oPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}a-z]*[^\\P{L}A-Z]+" DWELL_BPE_CONTRACTION
    "|[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}a-z]+[^\\P{L}A-Z]*" DWELL_BPE_CONTRACTION
    "|\\p{N}{1,3}| ?[^" DWELL_BPE_SPACE "\\p{L}\\p{N}]+[\\r\\n/]*|[" DWELL_BPE_SPACE
    "]*[\\r\\n]+|[" DWELL_BPE_SPACE "]+(?![^" DWELL_BPE_SPACE "])|[" DWELL_BPE_SPACE "]+";
#undef DWELL_BPE_CONTRACTION

// SmolLM's first stage: every digit a word of its own (the text between
// digits goes on to the GPT-2 pattern).
constexpr const char* kDigitPattern = "\\p{N}";

#undef DWELL_BPE_SPACE

// The patterns of a kind, applied in turn: each splits the words the one
// before it made, seeing only the word it splits.
std::vector<const char*> kind_patterns(PreTokenizerKind kind) {
    switch (kind) {
        case PreTokenizerKind::gpt2:
            return {kGpt2Pattern};
        case PreTokenizerKind::qwen2:
            return {kQwen2Pattern};
        case PreTokenizerKind::llama3:
            return {kLlama3Pattern};
        case PreTokenizerKind::smollm:
            return {kDigitPattern, kGpt2Pattern};
        case PreTokenizerKind::gpt4o:
            return {kGpt4oPattern};
    }
    throw Error(DWELL_ERR_INTERNAL, "BPE pre-tokenizer: unknown kind");
}

constexpr uint32_t kReplacement = 0xFFFD;

// `text` as the code points a lenient reader takes from it, re-encoded:
// lead bytes are trusted for the length, continuation bytes only checked
// for their top bits. Surrogates stay as they were read (three bytes each)
// but PCRE2 refuses them, so `match` holds U+FFFD in their place, which has
// the same length and the same standing in the patterns (neither letter,
// digit nor space). `match` is empty when it would equal `text`.
void read_leniently(std::string_view in, std::string& text, std::string& match) {
    text.clear();
    match.clear();
    text.reserve(in.size());
    bool has_surrogate = false;
    size_t pos = 0;
    while (pos < in.size()) {
        const auto b0 = static_cast<uint8_t>(in[pos]);
        size_t need = 0;
        uint32_t cp = 0;
        if (b0 < 0x80) {
            need = 1;
            cp = b0;
        } else if (b0 >= 0xC0 && b0 < 0xE0) {
            need = 2;
            cp = b0 & 0x1Fu;
        } else if (b0 >= 0xE0 && b0 < 0xF0) {
            need = 3;
            cp = b0 & 0x0Fu;
        } else if (b0 >= 0xF0 && b0 < 0xF8) {
            need = 4;
            cp = b0 & 0x07u;
        }
        bool ok = need > 0 && in.size() - pos >= need;
        for (size_t i = 1; ok && i < need; ++i) {
            const auto b = static_cast<uint8_t>(in[pos + i]);
            ok = (b & 0xC0) == 0x80;
            cp = (cp << 6) | (b & 0x3Fu);
        }
        if (!ok) {
            cp = kReplacement;
            need = 1;
        }
        // Past U+10FFFF there is no character to write (llama.cpp fails on
        // such input); it reads as U+FFFD here.
        if (cp > 0x10FFFF) cp = kReplacement;
        has_surrogate = has_surrogate || (cp >= 0xD800 && cp <= 0xDFFF);
        append_utf8(cp, text);
        pos += need;
    }
    if (!has_surrogate) return;
    match = text;
    for (size_t i = 0; i + 2 < match.size(); ++i) {
        if (static_cast<uint8_t>(match[i]) == 0xED && static_cast<uint8_t>(match[i + 1]) >= 0xA0) {
            match.replace(i, 3, "\xEF\xBF\xBD");
            i += 2;
        }
    }
}

}  // namespace

std::optional<PreTokenizerKind> pre_tokenizer_kind(std::string_view pre) {
    for (const PreName& p : kPreNames) {
        if (p.name == pre) return p.kind;
    }
    return std::nullopt;
}

std::string supported_pre_tokenizers() {
    std::string out;
    for (const PreName& p : kPreNames) {
        if (!out.empty()) out += ", ";
        out += '\'';
        out += p.name;
        out += '\'';
    }
    return out;
}

struct PreTokenizer::Pattern {
    struct CodeDeleter {
        void operator()(pcre2_code* c) const { pcre2_code_free(c); }
    };
    std::vector<std::unique_ptr<pcre2_code, CodeDeleter>> stages;
};

PreTokenizer::PreTokenizer(PreTokenizerKind kind) : pattern_(std::make_unique<Pattern>()) {
    for (const char* source : kind_patterns(kind)) {
        int error = 0;
        PCRE2_SIZE offset = 0;
        std::unique_ptr<pcre2_code, Pattern::CodeDeleter> code(
            pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source), PCRE2_ZERO_TERMINATED, PCRE2_UTF,
                          &error, &offset, nullptr));
        if (!code) {
            std::array<PCRE2_UCHAR, 256> message{};
            pcre2_get_error_message(error, message.data(), message.size());
            throw Error(DWELL_ERR_INTERNAL,
                        "the BPE pre-tokenizer pattern does not compile at offset " +
                            std::to_string(offset) + ": " +
                            reinterpret_cast<const char*>(message.data()));
        }
        // Without a JIT (an unsupported CPU, or a build without it) the
        // interpreter gives the same matches, only slower.
        pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE);
        pattern_->stages.push_back(std::move(code));
    }
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

namespace {

// Appends to `out` the words one stage makes of subject[begin, end): its
// matches and the text between them. The stage sees only that range, so a
// lookahead stops at the end of the word being split.
void split_range(const pcre2_code* code, pcre2_match_data* data, std::string_view subject,
                 size_t begin, size_t end, std::vector<std::pair<size_t, size_t>>& out) {
    const auto* base = reinterpret_cast<PCRE2_SPTR>(subject.data() + begin);
    const size_t size = end - begin;
    size_t pos = 0;
    while (pos < size) {
        const int rc = pcre2_match(code, base, size, pos, PCRE2_NO_UTF_CHECK, data, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            std::array<PCRE2_UCHAR, 256> message{};
            pcre2_get_error_message(rc, message.data(), message.size());
            throw Error(DWELL_ERR_INTERNAL, std::string("BPE pre-tokenizer: matching failed: ") +
                                                reinterpret_cast<const char*>(message.data()));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
        const size_t start = ovector[0];
        size_t stop = ovector[1];
        // Text a pattern skips over is a word of its own.
        if (start > pos) out.emplace_back(begin + pos, begin + start);
        if (stop == start) {
            // No pattern here matches empty text; should one, step over a
            // character so the loop ends.
            stop = start + 1;
            while (stop < size && (static_cast<uint8_t>(base[stop]) & 0xC0) == 0x80) ++stop;
        }
        out.emplace_back(begin + start, begin + stop);
        pos = stop;
    }
    if (pos < size) out.emplace_back(begin + pos, end);
}

}  // namespace

void PreTokenizer::split(std::string_view in,
                         const std::function<void(std::string_view)>& on_word) const {
    std::string text;
    std::string match;
    read_leniently(in, text, match);
    const std::string_view subject = match.empty() ? text : match;
    const std::string_view words = text;

    std::vector<std::pair<size_t, size_t>> ranges;
    if (!subject.empty()) ranges.emplace_back(0, subject.size());
    std::vector<std::pair<size_t, size_t>> next;
    for (const auto& code : pattern_->stages) {
        std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
            pcre2_match_data_create_from_pattern(code.get(), nullptr), &pcre2_match_data_free);
        if (!data) throw Error(DWELL_ERR_OUT_OF_MEMORY, "BPE pre-tokenizer: out of memory");
        next.clear();
        for (const auto& [begin, end] : ranges) {
            split_range(code.get(), data.get(), subject, begin, end, next);
        }
        ranges.swap(next);
    }
    for (const auto& [begin, end] : ranges) on_word(words.substr(begin, end - begin));
}

}  // namespace dwell::bpe
