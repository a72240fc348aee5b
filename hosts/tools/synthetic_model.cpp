#include "dwell/tools/synthetic_model.hpp"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/platform/text_file.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/quant.h"
#include "dwell/tools/gguf_writer.hpp"
#include "dwell/tools/synthetic_bpe_vocab.hpp"

namespace dwell {

namespace {

// GGUF / sentencepiece token types.
enum : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUnused = 5, kByte = 6 };

struct Vocab {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    void add(std::string piece, float score, int32_t type) {
        tokens.push_back(std::move(piece));
        scores.push_back(score);
        types.push_back(type);
    }
};

// splitmix64: a tiny, well-distributed generator whose output is the same
// on every platform, so a seed always gives the same model.
class Rng {
public:
    explicit Rng(uint64_t seed) : s_(seed) {}
    uint64_t next() {
        uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() {
        return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    }
    float normal() {  // Box-Muller
        const double u1 = uniform(), u2 = uniform();
        return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                  std::cos(6.283185307179586 * u2));
    }

private:
    uint64_t s_;
};

Vocab generated_vocab(int64_t n_vocab) {
    static const char* const kWords[] = {
        "the",   "and",    "was",  "she",   "he",    "they",   "to",   "a",    "of",   "in",
        "it",    "is",     "that", "with",  "for",   "on",     "her",  "his",  "said", "day",
        "one",   "time",   "upon", "once",  "there", "little", "big",  "girl", "boy",  "play",
        "happy", "friend", "dog",  "cat",   "ball",  "park",   "mom",  "dad",  "saw",  "went",
        "very",  "wanted", "had",  "you",   "not",   "what",   "all",  "were", "we",   "when",
        "your",  "can",    "out",  "up",    "do",    "about",  "into", "them", "like", "so",
        "some",  "would",  "make", "see",   "him",   "two",    "more", "go",   "no",   "way",
        "could", "my",     "than", "first", "been",  "who",    "its",  "now",  "find", "long",
        "down",  "come",   "made", "may",   "part",  "run",    "tree", "sun",  "home", "good",
        "new",   "sky",    "blue", "red"};
    Vocab v;
    v.add("<unk>", 0.0f, kUnknown);
    v.add("<s>", 0.0f, kControl);
    v.add("</s>", 0.0f, kControl);
    char buf[8];
    for (int b = 0; b < 256; ++b) {
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        v.add(buf, 0.0f, kByte);
    }
    std::set<std::string> seen;
    float score = -1.0f;
    auto add_piece = [&](const std::string& p) {
        if (static_cast<int64_t>(v.tokens.size()) >= n_vocab || !seen.insert(p).second) return;
        v.add(p, score, kNormal);
        score -= 1.0f;
    };
    const std::string space = "\xe2\x96\x81";  // U+2581, sentencepiece's space
    add_piece(space);
    for (char c = 33; c < 127; ++c) add_piece(std::string(1, c));
    for (const char* w : kWords) {
        const std::string word = space + w;
        // Every prefix, so pairwise merges can build the whole word.
        for (size_t len = space.size() + 1; len <= word.size(); ++len)
            add_piece(word.substr(0, len));
    }
    // Then letter pieces of growing length ("▁b", "ba", "▁ba", "bal", ...):
    // random weights sample every id, and these print as text, not as
    // placeholders. Each piece's prefix is already in, so merges reach it.
    const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
    std::vector<std::string> level = {""};
    while (static_cast<int64_t>(v.tokens.size()) < n_vocab && level.front().size() < 4) {
        std::vector<std::string> next;
        for (const auto& stem : level) {
            for (char c : letters) {
                next.push_back(stem + c);
                add_piece(space + stem + c);
                add_piece(stem + c);
            }
        }
        level = std::move(next);
    }
    for (int64_t i = 0; static_cast<int64_t>(v.tokens.size()) < n_vocab; ++i) {
        v.add("<unused" + std::to_string(i) + ">", 0.0f, kUnused);
    }
    return v;
}

Vocab vocab_from_model(const std::filesystem::path& path) {
    // Read bounded, as every file read whole; then parsed from memory.
    const std::string serialized =
        read_text_file(path, "sentencepiece model (--vocab)", kMaxTokenizerModelBytes);
    sentencepiece::SentencePieceProcessor sp;
    std::string problem;
    try {
        const auto status = sp.LoadFromSerializedProto(serialized);
        if (!status.ok()) problem = sentencepiece_error_text(status.message());
    } catch (const std::exception& e) {  // some malformed pieces escape as exceptions
        problem = sentencepiece_error_text(e.what());
    }
    if (!problem.empty()) {
        throw Error(DWELL_ERR_CORRUPT,
                    path.string() + ": not a usable sentencepiece model (" + problem + ")");
    }
    Vocab v;
    for (int i = 0; i < sp.GetPieceSize(); ++i) {
        int32_t type = kNormal;
        if (sp.IsUnknown(i))
            type = kUnknown;
        else if (sp.IsControl(i))
            type = kControl;
        else if (sp.IsByte(i))
            type = kByte;
        else if (sp.IsUnused(i))
            type = kUnused;
        v.add(sp.IdToPiece(i), sp.GetScore(i), type);
    }
    return v;
}

bool has_experts(SyntheticFamily f) {
    return f == SyntheticFamily::mixtral || f == SyntheticFamily::qwen3moe;
}

// The Gemma families: their output is always the tied embeddings.
bool is_gemma(SyntheticFamily f) {
    return f == SyntheticFamily::gemma || f == SyntheticFamily::gemma2 ||
           f == SyntheticFamily::gemma3;
}

void check(bool ok, const std::string& what) {
    if (!ok) throw Error(DWELL_ERR_INVALID_ARGUMENT, "synth: " + what);
}

// Synthetic models are for tests, demos and benchmarks: 64 GiB is past any
// model a phone runs.
constexpr int kMaxSyntheticGiB = 64;
// Past this, tensor data goes to a temporary file instead of memory.
constexpr double kSpillBytes = double(uint64_t{1} << 30);

// The tensor bytes a spec gives (the vocabulary and header aside), before
// any of its numbers are known to fit together.
double synthetic_model_bytes(const SyntheticModelSpec& s, int64_t n_vocab) {
    const int64_t block = std::max<int64_t>(dwell_dtype_block_elems(s.dtype), 1);
    const double per_weight = static_cast<double>(dwell_row_bytes(s.dtype, block)) / block;
    const double head_dim = s.head_dim > 0 ? double(s.head_dim) : double(s.n_embd) / s.n_head;
    const double embd = double(s.n_embd);
    const double vocab = double(n_vocab);
    const double experts = std::max<int64_t>(s.n_expert, 1);  // n_ff is per expert
    const double layer =
        embd * head_dim * (2.0 * s.n_head + 2.0 * s.n_head_kv) + 3.0 * embd * s.n_ff * experts;
    const bool tied = s.tied_output || is_gemma(s.family);
    return per_weight * (layer * s.n_layer + embd * vocab * (tied ? 1 : 2));
}

void check_size(const SyntheticModelSpec& s, int64_t n_vocab);

void check_spec(const SyntheticModelSpec& s) {
    check(s.n_embd > 0 && s.n_layer > 0 && s.n_head > 0 && s.n_head_kv > 0 && s.n_ff > 0 &&
              s.n_ctx > 0 && s.head_dim >= 0,
          "every dimension must be positive");
    check(s.head_dim > 0 || s.n_embd % s.n_head == 0, "--n-embd (" + std::to_string(s.n_embd) +
                                                          ") must be a multiple of --n-head (" +
                                                          std::to_string(s.n_head) + ")");
    // The limits the model plugins read a file with
    // (sdk/kit/model/transformer_hparams.cpp), so synth never writes
    // what run refuses, and every value fits the uint32 keys it is written as.
    const auto at_most = [](const char* flag, int64_t v, int64_t hi) {
        check(v <= hi, std::string(flag) + " " + std::to_string(v) + " is outside 1.." +
                           std::to_string(hi) + " (the most a model plugin reads)");
    };
    at_most("--n-embd", s.n_embd, int64_t{1} << 20);
    at_most("--n-layer", s.n_layer, 4096);
    at_most("--n-ff", s.n_ff, int64_t{1} << 22);
    at_most("--n-head", s.n_head, int64_t{1} << 14);
    at_most("--n-head-kv", s.n_head_kv, s.n_head);
    at_most("--ctx", s.n_ctx, int64_t{1} << 24);
    at_most("--head-dim", s.head_dim, 4096);
    if (!s.vocab_model) at_most("--n-vocab", s.n_vocab, int64_t{1} << 24);
    check(s.n_head % s.n_head_kv == 0, "--n-head must be a multiple of --n-head-kv");
    const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
    at_most("--head-dim (n-embd / n-head)", head_dim, 4096);
    check(head_dim % 2 == 0, "the head dimension must be even");
    check(s.family != SyntheticFamily::qwen2 || head_dim * s.n_head == s.n_embd,
          "qwen2's heads must split n_embd exactly (head_dim * n_head == n_embd)");
    check(s.family != SyntheticFamily::phi3 || head_dim * s.n_head == s.n_embd,
          "phi3's heads must split n_embd exactly (head_dim * n_head == n_embd)");
    check(s.n_rot == 0 || s.family == SyntheticFamily::phi3,
          std::string("--n-rot is for phi3, not ") + synthetic_family_name(s.family));
    check(s.n_rot >= 0 && s.n_rot <= head_dim && s.n_rot % 2 == 0,
          "--n-rot must be even and at most the head dimension");
    check(s.n_ctx_orig >= 0 && s.n_ctx_orig <= s.n_ctx, "--ctx-orig must be at most --ctx");
    check(s.yarn_factor == 0.0f || (s.yarn_factor >= 1.0f && s.yarn_factor <= 1e6f),
          "--rope-scaling-factor must be in 1..1e6");
    check(s.yarn_factor == 0.0f || s.family != SyntheticFamily::phi3,
          "phi3's RoPE scaling is LongRoPE, not YaRN");
    if (has_experts(s.family)) {
        const std::string name = synthetic_family_name(s.family);
        check(s.n_expert >= 2 && s.n_expert <= 256, name + " needs 2..256 experts");
        check(s.n_expert_used >= 1 && s.n_expert_used <= s.n_expert,
              name + " needs 1..n_expert experts used per token");
    } else {
        check(s.n_expert == 0 && s.n_expert_used == 0,
              std::string("experts are for mixtral and qwen3moe, not ") +
                  synthetic_family_name(s.family));
    }
    if (s.family == SyntheticFamily::qwen3moe)
        at_most("--n-ff times --n-expert-used (qwen3moe's feed_forward_length)",
                s.n_ff * s.n_expert_used, int64_t{1} << 22);
    const bool gemma23 = s.family == SyntheticFamily::gemma2 || s.family == SyntheticFamily::gemma3;
    check(gemma23 || (s.sliding_window == 0 && s.swa_pattern == 0 && s.rope_freq_base_swa == 0 &&
                      s.attn_softcap == 0 && s.final_softcap == 0),
          std::string("sliding windows and soft-caps are for gemma2 and gemma3, not ") +
              synthetic_family_name(s.family));
    check(s.sliding_window >= 0 && s.sliding_window <= (int64_t{1} << 24),
          "--sliding-window must be in 0..16777216");
    check(s.swa_pattern >= 0 && s.swa_pattern <= 4096, "--swa-pattern must be in 0..4096");
    check(s.rope_freq_base_swa >= 0 && std::isfinite(s.rope_freq_base_swa),
          "--rope-base-swa must be a finite number >= 0");
    check(s.attn_softcap >= 0 && std::isfinite(s.attn_softcap) && s.final_softcap >= 0 &&
              std::isfinite(s.final_softcap),
          "--attn-softcap and --final-softcap must be finite numbers >= 0");
    check(s.family != SyntheticFamily::gemma3 || s.attn_softcap == 0,
          "gemma3 has no attention soft-cap (--attn-softcap)");
    check(s.family != SyntheticFamily::lfm2 || head_dim * s.n_head == s.n_embd,
          "lfm2's heads must split n_embd exactly (head_dim * n_head == n_embd)");
    check(s.conv_l_cache >= 2 && s.conv_l_cache <= 16, "--l-cache must be in 2..16");
    check(s.family != SyntheticFamily::qwen35 || (s.n_rot == 0 && head_dim % 4 == 0),
          "qwen35 rotates half of each head: leave --n-rot unset and make the head size a "
          "multiple of 4");
    check(s.conv_std >= 0 && std::isfinite(s.conv_std), "--conv-std must be a finite number >= 0");
    const int64_t block = dwell_dtype_block_elems(s.dtype);
    check(s.dtype == DWELL_F32 || s.dtype == DWELL_F16 || s.dtype == DWELL_Q8_0 ||
              s.dtype == DWELL_Q4_0,
          std::string("--type ") + dwell_dtype_name(s.dtype) +
              " is not one synth writes (f32, f16, q8_0, q4_0)");
    check(s.n_embd % block == 0 && s.n_ff % block == 0 && (head_dim * s.n_head) % block == 0,
          std::string("--n-embd, --n-ff and the attention width must be multiples of ") +
              std::to_string(block) + " for " + dwell_dtype_name(s.dtype));
    // A vocabulary file's size is checked again once it is read.
    check_size(s, s.vocab_model ? 0 : std::max<int64_t>(s.n_vocab, 512));
}

// Its size is bounded before anything is allocated (in double: the products
// of the bounds fit one closely enough); a file over kSpillBytes keeps its
// tensors in a temporary beside the output, not in memory, while it is
// written (write_model).
void check_size(const SyntheticModelSpec& s, int64_t n_vocab) {
    const double gib = synthetic_model_bytes(s, n_vocab) / double(uint64_t{1} << 30);
    if (gib > kMaxSyntheticGiB) {
        char text[160];
        std::snprintf(text, sizeof text,
                      "the model would be %.1f GiB, over synth's limit of %d GiB", gib,
                      kMaxSyntheticGiB);
        check(false, std::string(text) +
                         " (lower --n-vocab, --n-embd, --n-ff, --n-layer or --n-expert, or use "
                         "--type q4_0)");
    }
}

}  // namespace

const char* synthetic_family_name(SyntheticFamily f) {
    switch (f) {
        case SyntheticFamily::llama:
            return "llama";
        case SyntheticFamily::qwen2:
            return "qwen2";
        case SyntheticFamily::gemma:
            return "gemma";
        case SyntheticFamily::mixtral:
            return "mixtral";
        case SyntheticFamily::qwen3:
            return "qwen3";
        case SyntheticFamily::qwen3moe:
            return "qwen3moe";
        case SyntheticFamily::smollm3:
            return "smollm3";
        case SyntheticFamily::gemma2:
            return "gemma2";
        case SyntheticFamily::gemma3:
            return "gemma3";
        case SyntheticFamily::llama3:
            return "llama3";
        case SyntheticFamily::phi3:
            return "phi3";
        case SyntheticFamily::lfm2:
            return "lfm2";
        case SyntheticFamily::qwen35:
            return "qwen35";
    }
    return "?";
}

SyntheticFamily parse_synthetic_family(std::string_view name) {
    for (auto f : {SyntheticFamily::llama, SyntheticFamily::qwen2, SyntheticFamily::gemma,
                   SyntheticFamily::mixtral, SyntheticFamily::qwen3, SyntheticFamily::qwen3moe,
                   SyntheticFamily::smollm3, SyntheticFamily::gemma2, SyntheticFamily::gemma3,
                   SyntheticFamily::llama3, SyntheticFamily::phi3, SyntheticFamily::lfm2,
                   SyntheticFamily::qwen35}) {
        if (name == synthetic_family_name(f)) return f;
    }
    throw Error(DWELL_ERR_INVALID_ARGUMENT,
                "synth: unknown model family '" + std::string(name) +
                    "' (known: llama, qwen2, gemma, mixtral, qwen3, "
                    "qwen3moe, smollm3, gemma2, gemma3, llama3, phi3, lfm2, qwen35)");
}

namespace {

// Llama 3's frequency scaling (factor 8, low/high frequency factors 1 and
// 4) as per-pair divisors of the RoPE frequencies, with the original
// context scaled down to a quarter of the file's (Llama 3.1: 8192 of 128K)
// so that most pairs of a small head are scaled and the rest are not.
std::vector<float> llama3_rope_factors(float base, int64_t n_rot, int64_t n_ctx) {
    const double factor = 8, low = 1, high = 4;
    const double old_ctx = static_cast<double>(std::max<int64_t>(16, n_ctx / 4));
    const double pi = 3.14159265358979323846;
    std::vector<float> f(static_cast<size_t>(n_rot / 2));
    for (size_t i = 0; i < f.size(); ++i) {
        const double freq = std::pow(double(base), -2.0 * double(i) / double(n_rot));
        const double wavelen = 2 * pi / freq;
        if (wavelen < old_ctx / high) {
            f[i] = 1.0f;
        } else if (wavelen > old_ctx / low) {
            f[i] = static_cast<float>(factor);
        } else {
            const double smooth = (old_ctx / wavelen - low) / (high - low);
            f[i] = static_cast<float>(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
    return f;
}

void write_model(const SyntheticModelSpec& s, const std::filesystem::path& out) {
    const SyntheticFamily family = s.family;
    // Mixtral and Llama 3 files say "llama": the experts and the RoPE
    // factors are what set them apart.
    const std::string arch = family == SyntheticFamily::mixtral || family == SyntheticFamily::llama3
                                 ? "llama"
                                 : synthetic_family_name(family);
    const bool tied = s.tied_output || is_gemma(family);
    const bool gemma23 = family == SyntheticFamily::gemma2 || family == SyntheticFamily::gemma3;

    // Qwen2 and Qwen3 files carry a byte-level BPE vocabulary; the others
    // (and these given a sentencepiece model) a sentencepiece one.
    const bool qwen3 = family == SyntheticFamily::qwen3 || family == SyntheticFamily::qwen3moe;
    const bool qwen35 = family == SyntheticFamily::qwen35;
    const bool bpe = (family == SyntheticFamily::qwen2 || qwen3 || qwen35) && !s.vocab_model;
    const BpeVocab bpe_vocab = bpe ? make_synthetic_bpe_vocab(s.n_vocab, s.seed) : BpeVocab{};
    const Vocab vocab = bpe             ? Vocab{}
                        : s.vocab_model ? vocab_from_model(*s.vocab_model)
                                        : generated_vocab(std::max<int64_t>(s.n_vocab, 512));
    const int64_t n_vocab =
        static_cast<int64_t>(bpe ? bpe_vocab.tokens.size() : vocab.tokens.size());
    if (s.vocab_model) check_size(s, n_vocab);
    const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
    const int64_t q_width = head_dim * s.n_head;
    const int64_t kv_width = head_dim * s.n_head_kv;

    const bool phi3 = family == SyntheticFamily::phi3;
    const bool lfm2 = family == SyntheticFamily::lfm2;
    // LFM2's layer kinds: attention on every third layer (2, 5, ...), a
    // short convolution on the others.
    const auto conv_layer = [&](int32_t l) { return lfm2 && l % 3 != 2; };
    // Qwen3.5's: full attention at every fourth layer (3, 7, ...), gated
    // delta nets on the others, their key heads n_head_kv and value heads
    // n_head (several value heads per key head), all head_dim wide.
    constexpr int64_t kQwen35Interval = 4;
    const auto delta_layer = [&](int32_t l) { return qwen35 && (l + 1) % kQwen35Interval != 0; };
    const int64_t dn_key = head_dim * s.n_head_kv, dn_value = head_dim * s.n_head;
    const int64_t dn_conv = 2 * dn_key + dn_value;
    GgufWriter w(s.alignment);
    if (synthetic_model_bytes(s, n_vocab) > kSpillBytes) {
        std::filesystem::path folder = out.parent_path();
        if (folder.empty()) folder = ".";
        // The temporary and the file exist together until the copy ends.
        const double need = 2 * synthetic_model_bytes(s, n_vocab) + double(uint64_t{1} << 30);
        std::error_code ec;
        const auto space = std::filesystem::space(folder, ec);
        if (!ec && double(space.available) < need) {
            char text[200];
            std::snprintf(text, sizeof text,
                          "writing this model takes %.1f GiB of free space in %s (twice its size "
                          "while it is written), which has %.1f GiB",
                          need / double(uint64_t{1} << 30), folder.string().c_str(),
                          double(space.available) / double(uint64_t{1} << 30));
            check(false, text);
        }
        w.spill_tensors_to(folder);
    }
    const auto key = [&](const char* suffix) { return arch + "." + suffix; };
    w.add_string("general.architecture", arch);
    // llama.cpp gives special tokens of a model named "phi3" or "phi-3"
    // (and <|endoftext|>, which a generated vocabulary lacks) other
    // attributes: the name spells it apart.
    w.add_string("general.name",
                 phi3 ? std::string("dwell synthetic phi 3")
                      : std::string("dwell synthetic ") + synthetic_family_name(family));
    w.add_uint32(key("context_length"), static_cast<uint32_t>(s.n_ctx));
    w.add_uint32(key("embedding_length"), static_cast<uint32_t>(s.n_embd));
    w.add_uint32(key("block_count"), static_cast<uint32_t>(s.n_layer));
    // Qwen3-MoE files give the experts' width its own key; their
    // feed_forward_length is that times the experts used, as published.
    const int64_t n_ff_key =
        family == SyntheticFamily::qwen3moe ? s.n_ff * s.n_expert_used : s.n_ff;
    w.add_uint32(key("feed_forward_length"), static_cast<uint32_t>(n_ff_key));
    w.add_uint32(key("attention.head_count"), static_cast<uint32_t>(s.n_head));
    if (lfm2) {
        std::vector<int32_t> kv_heads(static_cast<size_t>(s.n_layer));
        for (int32_t l = 0; l < s.n_layer; ++l)
            kv_heads[static_cast<size_t>(l)] =
                conv_layer(l) ? 0 : static_cast<int32_t>(s.n_head_kv);
        w.add_int32_array(key("attention.head_count_kv"), kv_heads);
        w.add_uint32(key("shortconv.l_cache"), static_cast<uint32_t>(s.conv_l_cache));
    } else {
        w.add_uint32(key("attention.head_count_kv"), static_cast<uint32_t>(s.n_head_kv));
    }
    if (qwen35) {
        w.add_uint32(key("ssm.conv_kernel"), static_cast<uint32_t>(s.conv_l_cache));
        w.add_uint32(key("ssm.state_size"), static_cast<uint32_t>(head_dim));
        w.add_uint32(key("ssm.group_count"), static_cast<uint32_t>(s.n_head_kv));
        w.add_uint32(key("ssm.time_step_rank"), static_cast<uint32_t>(s.n_head));
        w.add_uint32(key("ssm.inner_size"), static_cast<uint32_t>(dn_value));
        w.add_uint32(key("full_attention_interval"), static_cast<uint32_t>(kQwen35Interval));
    }
    if (s.head_dim > 0) {
        w.add_uint32(key("attention.key_length"), static_cast<uint32_t>(head_dim));
        w.add_uint32(key("attention.value_length"), static_cast<uint32_t>(head_dim));
    }
    const int64_t n_rot = s.n_rot > 0 ? s.n_rot : qwen35 ? head_dim / 2 : head_dim;
    const int64_t n_ctx_orig = s.n_ctx_orig > 0 ? s.n_ctx_orig : std::max<int64_t>(1, s.n_ctx / 4);
    // LongRoPE's attention factor, as Phi-3's checkpoints derive it.
    const double long_scale = double(s.n_ctx) / double(n_ctx_orig);
    const float attn_factor =
        long_scale > 1.0
            ? static_cast<float>(std::sqrt(1 + std::log(long_scale) / std::log(double(n_ctx_orig))))
            : 1.0f;
    w.add_uint32(key("rope.dimension_count"), static_cast<uint32_t>(n_rot));
    if (qwen35) {
        // The interleaved sections, as the published [11, 11, 10, 0] for 32
        // pairs: each of the three takes every third pair, none is left
        // to the fourth (text positions then rotate as NEOX).
        const int32_t pairs = static_cast<int32_t>(n_rot / 2);
        const std::vector<int32_t> sections{(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0};
        w.add_int32_array(key("rope.dimension_sections"), sections);
    }
    if (phi3) {
        w.add_uint32(key("rope.scaling.original_context_length"),
                     static_cast<uint32_t>(n_ctx_orig));
        w.add_float32(key("rope.scaling.attn_factor"), attn_factor);
    }
    if (s.yarn_factor > 0.0f) {
        w.add_string(key("rope.scaling.type"), "yarn");
        w.add_float32(key("rope.scaling.factor"), s.yarn_factor);
        w.add_uint32(key("rope.scaling.original_context_length"),
                     static_cast<uint32_t>(n_ctx_orig));
    }
    w.add_float32(key("rope.freq_base"), s.rope_freq_base);
    w.add_float32(key("attention.layer_norm_rms_epsilon"), s.rms_eps);
    if (has_experts(family)) {
        w.add_uint32(key("expert_count"), static_cast<uint32_t>(s.n_expert));
        w.add_uint32(key("expert_used_count"), static_cast<uint32_t>(s.n_expert_used));
    }
    if (family == SyntheticFamily::qwen3moe)
        w.add_uint32(key("expert_feed_forward_length"), static_cast<uint32_t>(s.n_ff));
    if (gemma23) {
        if (s.sliding_window > 0)
            w.add_uint32(key("attention.sliding_window"), static_cast<uint32_t>(s.sliding_window));
        if (s.swa_pattern > 0)
            w.add_uint32(key("attention.sliding_window_pattern"),
                         static_cast<uint32_t>(s.swa_pattern));
        if (s.rope_freq_base_swa > 0)
            w.add_float32(key("rope.freq_base_swa"), s.rope_freq_base_swa);
        if (s.attn_softcap > 0) w.add_float32(key("attn_logit_softcapping"), s.attn_softcap);
        if (s.final_softcap > 0) w.add_float32(key("final_logit_softcapping"), s.final_softcap);
    }
    if (bpe) {
        write_bpe_vocab(w, bpe_vocab, "qwen2");
    } else {
        w.add_string("tokenizer.ggml.model", "llama");
        w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
        w.add_float32_array("tokenizer.ggml.scores", vocab.scores);
        w.add_int32_array("tokenizer.ggml.token_type", vocab.types);
        w.add_uint32("tokenizer.ggml.bos_token_id", 1);
        w.add_uint32("tokenizer.ggml.eos_token_id", 2);
        w.add_uint32("tokenizer.ggml.unknown_token_id", 0);
    }

    // Matrices come from one stream in a fixed order (the same for every
    // family, so llama files stay what they always were); norms, biases and
    // routers from a second one, so adding them moves no matrix.
    Rng rng(s.seed);
    Rng extras(s.seed ^ 0x6e6f726d62696173ull);
    std::vector<float> values;
    std::vector<uint8_t> bytes;
    auto matrix = [&](const std::string& name, std::vector<int64_t> ne, dwell_dtype dt, Rng& r,
                      float std_dev) {
        const int64_t cols = ne[0];
        int64_t rows = 1;
        for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
        values.resize(static_cast<size_t>(cols));
        const size_t row_bytes = dwell_row_bytes(dt, cols);
        bytes.assign(row_bytes * static_cast<size_t>(rows), 0);
        for (int64_t row = 0; row < rows; ++row) {
            for (auto& x : values) x = r.normal() * std_dev;
            dwell_quantize_row(dt, values.data(),
                               bytes.data() + row_bytes * static_cast<size_t>(row), cols);
        }
        w.add_tensor(name, dt, ne, bytes);
    };
    auto weight = [&](const std::string& name, std::vector<int64_t> ne) {
        matrix(name, std::move(ne), s.dtype, rng, s.weight_std);
    };
    auto f32_vector = [&](const std::string& name, int64_t n, float mean, float std_dev) {
        values.resize(static_cast<size_t>(n));
        // fma: one rounding on every platform, whether or not the compiler
        // would contract mean + n * std (the files' bytes are test data).
        for (auto& x : values)
            x = std_dev != 0.0f ? std::fma(extras.normal(), std_dev, mean) : mean;
        const int64_t ne[1] = {n};
        w.add_tensor(
            name, DWELL_F32, ne,
            {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)});
    };
    auto norm = [&](const std::string& name) { f32_vector(name, s.n_embd, 1.0f, s.norm_jitter); };
    const float bias_std = s.bias_std != 0.0f ? s.bias_std : s.weight_std;
    const float router_std = s.router_std != 0.0f ? s.router_std : s.weight_std;

    auto f32_values = [&](const std::string& name, const std::vector<float>& v) {
        const int64_t ne[1] = {static_cast<int64_t>(v.size())};
        w.add_tensor(name, DWELL_F32, ne,
                     {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)});
    };

    weight("token_embd.weight", {s.n_embd, n_vocab});
    if (family == SyntheticFamily::llama3)
        f32_values("rope_freqs.weight", llama3_rope_factors(s.rope_freq_base, n_rot, s.n_ctx));
    if (phi3) {
        // Short factors near 1, long ones growing to the context's scale
        // over the low frequencies, as LongRoPE checkpoints have them.
        std::vector<float> short_f(static_cast<size_t>(n_rot / 2)), long_f(short_f.size());
        for (size_t i = 0; i < short_f.size(); ++i) {
            const double t = double(i) / double(std::max<size_t>(1, short_f.size() - 1));
            short_f[i] = static_cast<float>(1.0 + 0.6 * t * t);
            long_f[i] = static_cast<float>(1.0 + (std::max(long_scale, 2.0) * 1.5 - 1.0) * t);
        }
        f32_values("rope_factors_long.weight", long_f);
        f32_values("rope_factors_short.weight", short_f);
    }
    for (int32_t l = 0; l < s.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        norm(p + "attn_norm.weight");
        if (qwen35) {
            norm(p + "post_attention_norm.weight");
            if (delta_layer(l)) {
                weight(p + "attn_qkv.weight", {s.n_embd, dn_conv});
                weight(p + "attn_gate.weight", {s.n_embd, dn_value});
                matrix(p + "ssm_conv1d.weight", {s.conv_l_cache, dn_conv}, DWELL_F32, extras,
                       s.conv_std != 0.0f ? s.conv_std : 0.5f);
                f32_vector(p + "ssm_dt.bias", s.n_head, 0.0f, 0.5f);
                // ssm_a = -exp(A_log): a negative decay rate per value head.
                values.resize(static_cast<size_t>(s.n_head));
                for (auto& x : values) x = -std::exp(0.5f * extras.normal());
                f32_values(p + "ssm_a", std::vector<float>(values));
                weight(p + "ssm_beta.weight", {s.n_embd, s.n_head});
                weight(p + "ssm_alpha.weight", {s.n_embd, s.n_head});
                f32_vector(p + "ssm_norm.weight", head_dim, 1.0f, s.norm_jitter);
                weight(p + "ssm_out.weight", {dn_value, s.n_embd});
            } else {
                weight(p + "attn_q.weight", {s.n_embd, 2 * q_width});  // query, gate per head
                weight(p + "attn_k.weight", {s.n_embd, kv_width});
                weight(p + "attn_v.weight", {s.n_embd, kv_width});
                weight(p + "attn_output.weight", {q_width, s.n_embd});
                f32_vector(p + "attn_q_norm.weight", head_dim, 1.0f, s.norm_jitter);
                f32_vector(p + "attn_k_norm.weight", head_dim, 1.0f, s.norm_jitter);
            }
            weight(p + "ffn_gate.weight", {s.n_embd, s.n_ff});
            weight(p + "ffn_up.weight", {s.n_embd, s.n_ff});
            weight(p + "ffn_down.weight", {s.n_ff, s.n_embd});
            continue;
        }
        if (conv_layer(l)) {
            matrix(p + "shortconv.conv.weight", {s.conv_l_cache, s.n_embd}, DWELL_F32, extras,
                   s.conv_std != 0.0f ? s.conv_std : 0.5f);
            weight(p + "shortconv.in_proj.weight", {s.n_embd, 3 * s.n_embd});
            weight(p + "shortconv.out_proj.weight", {s.n_embd, s.n_embd});
        } else if (phi3) {
            weight(p + "attn_qkv.weight", {s.n_embd, q_width + 2 * kv_width});
        } else {
            weight(p + "attn_q.weight", {s.n_embd, q_width});
            weight(p + "attn_k.weight", {s.n_embd, kv_width});
            weight(p + "attn_v.weight", {s.n_embd, kv_width});
        }
        if (!conv_layer(l)) weight(p + "attn_output.weight", {q_width, s.n_embd});
        if (family == SyntheticFamily::gemma3 || (lfm2 && !conv_layer(l))) {
            f32_vector(p + "attn_q_norm.weight", head_dim, 1.0f, s.norm_jitter);
            f32_vector(p + "attn_k_norm.weight", head_dim, 1.0f, s.norm_jitter);
        }
        if (gemma23) norm(p + "post_attention_norm.weight");
        if (family == SyntheticFamily::qwen2) {
            f32_vector(p + "attn_q.bias", q_width, 0.0f, bias_std);
            f32_vector(p + "attn_k.bias", kv_width, 0.0f, bias_std);
            f32_vector(p + "attn_v.bias", kv_width, 0.0f, bias_std);
        }
        if (qwen3) {
            f32_vector(p + "attn_q_norm.weight", head_dim, 1.0f, s.norm_jitter);
            f32_vector(p + "attn_k_norm.weight", head_dim, 1.0f, s.norm_jitter);
        }
        norm(p + "ffn_norm.weight");
        if (has_experts(family)) {
            matrix(p + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}, DWELL_F32, extras,
                   router_std);
            weight(p + "ffn_gate_exps.weight", {s.n_embd, s.n_ff, s.n_expert});
            weight(p + "ffn_up_exps.weight", {s.n_embd, s.n_ff, s.n_expert});
            weight(p + "ffn_down_exps.weight", {s.n_ff, s.n_embd, s.n_expert});
        } else if (phi3) {
            weight(p + "ffn_up.weight", {s.n_embd, 2 * s.n_ff});  // gate rows, then up rows
            weight(p + "ffn_down.weight", {s.n_ff, s.n_embd});
        } else {
            weight(p + "ffn_gate.weight", {s.n_embd, s.n_ff});
            weight(p + "ffn_up.weight", {s.n_embd, s.n_ff});
            weight(p + "ffn_down.weight", {s.n_ff, s.n_embd});
        }
        if (gemma23) norm(p + "post_ffw_norm.weight");
    }
    // LFM2 files name their final norm token_embd_norm (llama.cpp's name).
    norm(lfm2 ? "token_embd_norm.weight" : "output_norm.weight");
    if (!tied) weight("output.weight", {s.n_embd, n_vocab});
    w.write(out);
}

}  // namespace

void write_synthetic_model(const SyntheticModelSpec& s, const std::filesystem::path& out) {
    check_spec(s);
    try {
        write_model(s, out);
    } catch (const std::bad_alloc&) {
        char text[200];
        std::snprintf(text, sizeof text,
                      "synth: out of memory: the model's %.1f GiB of tensors are held in memory "
                      "while it is written (use smaller sizes or --type q4_0)",
                      synthetic_model_bytes(s, std::max<int64_t>(s.n_vocab, 512)) /
                          double(uint64_t{1} << 30));
        throw Error(DWELL_ERR_OUT_OF_MEMORY, text);
    }
}

}  // namespace dwell
