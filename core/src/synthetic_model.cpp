#include "dwell/core/synthetic_model.hpp"

#include <sentencepiece_processor.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "dwell/core/error.hpp"
#include "dwell/core/gguf_writer.hpp"
#include "dwell/quant.h"

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
    sentencepiece::SentencePieceProcessor sp;
    const auto status = sp.Load(path.string());
    if (!status.ok()) {
        throw Error(DWELL_ERR_IO,
                    path.string() + ": cannot load the sentencepiece model: " + status.ToString());
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

void check(bool ok, const std::string& what) {
    if (!ok) throw Error(DWELL_ERR_INVALID_ARGUMENT, "synth: " + what);
}

}  // namespace

void write_synthetic_llama(const SyntheticLlamaSpec& s, const std::filesystem::path& out) {
    check(s.n_embd > 0 && s.n_layer > 0 && s.n_head > 0 && s.n_head_kv > 0 && s.n_ff > 0 &&
              s.n_ctx > 0,
          "every dimension must be positive");
    check(s.n_embd % s.n_head == 0, "--n-embd (" + std::to_string(s.n_embd) +
                                        ") must be a multiple of --n-head (" +
                                        std::to_string(s.n_head) + ")");
    check(s.n_head % s.n_head_kv == 0, "--n-head must be a multiple of --n-head-kv");
    check((s.n_embd / s.n_head) % 2 == 0, "the head dimension n_embd / n_head must be even");
    const int64_t block = dwell_dtype_block_elems(s.dtype);
    check(s.dtype == DWELL_F32 || s.dtype == DWELL_F16 || s.dtype == DWELL_Q8_0 ||
              s.dtype == DWELL_Q4_0,
          std::string("--type ") + dwell_dtype_name(s.dtype) +
              " is not one synth writes (f32, f16, q8_0, q4_0)");
    check(s.n_embd % block == 0 && s.n_ff % block == 0,
          std::string("--n-embd and --n-ff must be multiples of ") + std::to_string(block) +
              " for " + dwell_dtype_name(s.dtype));

    const Vocab vocab = s.vocab_model ? vocab_from_model(*s.vocab_model)
                                      : generated_vocab(std::max<int64_t>(s.n_vocab, 512));
    const int64_t n_vocab = static_cast<int64_t>(vocab.tokens.size());
    const int64_t head_dim = s.n_embd / s.n_head;
    const int64_t kv_width = head_dim * s.n_head_kv;

    GgufWriter w;
    w.add_string("general.architecture", "llama");
    w.add_string("general.name", "dwell synthetic llama");
    w.add_uint32("llama.context_length", static_cast<uint32_t>(s.n_ctx));
    w.add_uint32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
    w.add_uint32("llama.block_count", static_cast<uint32_t>(s.n_layer));
    w.add_uint32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
    w.add_uint32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
    w.add_uint32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
    w.add_uint32("llama.rope.dimension_count", static_cast<uint32_t>(head_dim));
    w.add_float32("llama.rope.freq_base", s.rope_freq_base);
    w.add_float32("llama.attention.layer_norm_rms_epsilon", s.rms_eps);
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
    w.add_float32_array("tokenizer.ggml.scores", vocab.scores);
    w.add_int32_array("tokenizer.ggml.token_type", vocab.types);
    w.add_uint32("tokenizer.ggml.bos_token_id", 1);
    w.add_uint32("tokenizer.ggml.eos_token_id", 2);
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0);

    Rng rng(s.seed);
    std::vector<float> values;
    std::vector<uint8_t> bytes;
    auto matrix = [&](const std::string& name, int64_t cols, int64_t rows, dwell_dtype dt) {
        values.resize(static_cast<size_t>(cols));
        const size_t row_bytes = dwell_row_bytes(dt, cols);
        bytes.assign(row_bytes * static_cast<size_t>(rows), 0);
        for (int64_t r = 0; r < rows; ++r) {
            for (auto& x : values) x = rng.normal() * s.weight_std;
            dwell_quantize_row(dt, values.data(), bytes.data() + row_bytes * static_cast<size_t>(r),
                               cols);
        }
        const int64_t ne[2] = {cols, rows};
        w.add_tensor(name, dt, ne, bytes);
    };
    auto norm = [&](const std::string& name) {
        values.assign(static_cast<size_t>(s.n_embd), 1.0f);
        const int64_t ne[1] = {s.n_embd};
        w.add_tensor(
            name, DWELL_F32, ne,
            {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)});
    };

    matrix("token_embd.weight", s.n_embd, n_vocab, s.dtype);
    for (int32_t l = 0; l < s.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        norm(p + "attn_norm.weight");
        matrix(p + "attn_q.weight", s.n_embd, s.n_embd, s.dtype);
        matrix(p + "attn_k.weight", s.n_embd, kv_width, s.dtype);
        matrix(p + "attn_v.weight", s.n_embd, kv_width, s.dtype);
        matrix(p + "attn_output.weight", s.n_embd, s.n_embd, s.dtype);
        norm(p + "ffn_norm.weight");
        matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, s.dtype);
        matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, s.dtype);
        matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, s.dtype);
    }
    norm("output_norm.weight");
    if (!s.tied_output) matrix("output.weight", s.n_embd, n_vocab, s.dtype);
    w.write(out);
}

}  // namespace dwell
