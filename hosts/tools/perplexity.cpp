#include "dwell/tools/perplexity.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/text/tokenizer.hpp"

namespace dwell {

namespace {

constexpr std::array<char, 8> kBaseMagic = {'D', 'W', 'L', 'K', 'L', 'B', '0', '1'};
constexpr int64_t kBaseHeaderBytes = 32;

struct BaseHeader {
    int32_t n_vocab = 0;
    int32_t n_ctx = 0;
    int32_t n_chunks = 0;
    int32_t n_scored = 0;
    uint64_t tokens_hash = 0;
};

// Identifies the evaluated text, so a base from other text is refused
// instead of giving a meaningless KL divergence.
uint64_t fnv1a(std::span<const int32_t> tokens) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int32_t t : tokens) {
        auto u = static_cast<uint32_t>(t);
        for (int i = 0; i < 4; ++i) {
            h ^= (u >> (8 * i)) & 0xffu;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

// The format is little-endian; so are all hosts dwell targets, and the
// fields are written in memory order.
static_assert(std::endian::native == std::endian::little, "the base file format is little-endian");

template <typename T>
void put(OutputFile& out, T value) {
    out.write(&value, sizeof(value));
}

template <typename T>
T get(std::istream& in) {
    T value{};
    in.read(reinterpret_cast<char*>(&value), sizeof(value));
    return value;
}

int64_t base_payload_floats(const BaseHeader& h) {
    return static_cast<int64_t>(h.n_chunks) * h.n_scored * h.n_vocab;
}

// Writes the base chunk by chunk into a temporary (output_file.hpp): a run
// that does not finish leaves no file that a later run would half-trust.
class BaseWriter {
public:
    BaseWriter(const std::filesystem::path& path, const BaseHeader& h) : out_(path) {
        out_.write(kBaseMagic.data(), kBaseMagic.size());
        put(out_, h.n_vocab);
        put(out_, h.n_ctx);
        put(out_, h.n_chunks);
        put(out_, h.n_scored);
        put(out_, h.tokens_hash);
    }

    void write(std::span<const float> log_probs) {
        out_.write(log_probs.data(), log_probs.size_bytes());
    }
    void finish() { out_.commit(); }

private:
    OutputFile out_;
};

class BaseReader {
public:
    // Checks the whole header against what this run will evaluate before any
    // work is done, so a mismatch costs nothing.
    BaseReader(std::filesystem::path path, const BaseHeader& expected)
        : path_(std::move(path)), in_(path_, std::ios::binary) {
        const std::string name = path_.string();
        if (!in_) throw Error(DWELL_ERR_IO, name + ": cannot open the KL base file");
        std::array<char, 8> magic{};
        in_.read(magic.data(), magic.size());
        BaseHeader h;
        h.n_vocab = get<int32_t>(in_);
        h.n_ctx = get<int32_t>(in_);
        h.n_chunks = get<int32_t>(in_);
        h.n_scored = get<int32_t>(in_);
        h.tokens_hash = get<uint64_t>(in_);
        if (!in_ || magic != kBaseMagic) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        name + ": not a dwell KL base file (write one with --kl-base-save)");
        }
        auto mismatch = [&](const char* what, int64_t file, int64_t run) {
            return Error(DWELL_ERR_INVALID_ARGUMENT, name + ": the base was made with " + what +
                                                         " " + std::to_string(file) +
                                                         ", this run has " + std::to_string(run));
        };
        if (h.n_vocab != expected.n_vocab) throw mismatch("n_vocab", h.n_vocab, expected.n_vocab);
        if (h.n_ctx != expected.n_ctx) throw mismatch("n_ctx", h.n_ctx, expected.n_ctx);
        if (h.n_chunks != expected.n_chunks)
            throw mismatch("chunks", h.n_chunks, expected.n_chunks);
        if (h.n_scored != expected.n_scored) {
            throw mismatch("scored positions per chunk", h.n_scored, expected.n_scored);
        }
        if (h.tokens_hash != expected.tokens_hash) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        name + ": the base was made on other text (its token hash differs)");
        }
        std::error_code ec;
        const auto size = std::filesystem::file_size(path_, ec);
        const int64_t want = kBaseHeaderBytes + base_payload_floats(h) * 4;
        if (ec || static_cast<int64_t>(size) != want) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT, name + ": has " + std::to_string(size) +
                                                        " bytes, its header says " +
                                                        std::to_string(want) + " (truncated?)");
        }
    }

    void read(std::span<float> log_probs) {
        in_.read(reinterpret_cast<char*>(log_probs.data()),
                 static_cast<std::streamsize>(log_probs.size_bytes()));
        if (!in_) throw Error(DWELL_ERR_IO, path_.string() + ": cannot read the KL base file");
    }

private:
    std::filesystem::path path_;
    std::ifstream in_;
};

// Sums over scored predictions; the statistics follow llama-perplexity.
struct Sums {
    double nll = 0, nll2 = 0;
    double base_nll = 0, base_nll2 = 0, nll_base_nll = 0;
    double kld = 0, kld2 = 0;
    int64_t same_top = 0;
    int64_t count = 0;
};

size_t argmax(std::span<const float> v) {
    return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

double token_nll(std::span<const float> logits, int32_t target) {
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    double sum_exp = 0;
    for (float l : logits) sum_exp += std::exp(static_cast<double>(l - max_logit));
    return static_cast<double>(max_logit) + std::log(sum_exp) -
           static_cast<double>(logits[static_cast<size_t>(target)]);
}

void log_softmax(std::span<const float> logits, std::span<float> out) {
    const float max_logit = *std::max_element(logits.begin(), logits.end());
    double sum_exp = 0;
    for (float l : logits) sum_exp += std::exp(static_cast<double>(l - max_logit));
    const double shift = static_cast<double>(max_logit) + std::log(sum_exp);
    for (size_t i = 0; i < logits.size(); ++i) {
        out[i] = static_cast<float>(static_cast<double>(logits[i]) - shift);
    }
}

MeanAndError mean_and_error(double sum, double sum2, int64_t count) {
    if (count < 1) return {};
    const double n = static_cast<double>(count);
    const double mean = sum / n;
    const double var = sum2 / n - mean * mean;
    return {mean, count > 1 && var > 0 ? std::sqrt(var / (n - 1)) : 0.0};
}

ChunkLayout chunk_layout(int64_t n_tokens, int32_t n_ctx) {
    if (n_ctx < 8 || n_ctx % 2 != 0) {
        throw Error(
            DWELL_ERR_INVALID_ARGUMENT,
            "the perplexity context must be even and at least 8, not " + std::to_string(n_ctx));
    }
    if (n_tokens < n_ctx) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "the text has " + std::to_string(n_tokens) + " tokens; a context of " +
                        std::to_string(n_ctx) + " needs at least " + std::to_string(n_ctx) +
                        " (use a longer text or a smaller --ctx)");
    }
    ChunkLayout l;
    l.n_ctx = n_ctx;
    const int64_t chunks = n_tokens / n_ctx;
    l.n_chunks =
        static_cast<int32_t>(std::min<int64_t>(chunks, std::numeric_limits<int32_t>::max()));
    l.first = n_ctx / 2;
    l.n_scored = n_ctx - 1 - l.first;
    return l;
}

ChunkLogits session_chunk_logits(Runtime& runtime, std::shared_ptr<const Model> model,
                                 SessionOptions options) {
    // The session lives between calls because the returned span points into it.
    auto current = std::make_shared<std::unique_ptr<Session>>();
    return [&runtime, model = std::move(model), options, current](
               std::span<const int32_t> chunk, int32_t first) -> std::span<const float> {
        current->reset();  // free the previous KV cache before the next is made
        SessionOptions so = options;
        so.n_ctx = static_cast<int32_t>(chunk.size());
        *current = std::make_unique<Session>(runtime, model, so);
        // The unscored first half needs no logits: asking only for its last
        // row skips the output projection of every other one.
        if (first > 0) (*current)->decode(chunk.first(static_cast<size_t>(first)), false);
        return (*current)->decode(chunk.subspan(static_cast<size_t>(first)), true);
    };
}

PerplexityResult perplexity(const ChunkLogits& eval, std::span<const int32_t> tokens,
                            int32_t n_vocab, const PerplexityOptions& options) {
    if (n_vocab < 1)
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "perplexity: n_vocab must be positive");
    const ChunkLayout layout = chunk_layout(static_cast<int64_t>(tokens.size()), options.n_ctx);
    const auto used = tokens.first(static_cast<size_t>(layout.n_chunks) * layout.n_ctx);
    for (int32_t t : used) {
        if (t < 0 || t >= n_vocab) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT, "token id " + std::to_string(t) +
                                                        " is outside the vocabulary (0.." +
                                                        std::to_string(n_vocab - 1) + ")");
        }
    }
    if (options.bos >= n_vocab) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "BOS id " + std::to_string(options.bos) + " is outside the vocabulary");
    }

    const BaseHeader header{n_vocab, layout.n_ctx, layout.n_chunks, layout.n_scored, fnv1a(used)};
    if (!options.kl_base.empty() && !options.kl_base_save.empty()) {
        if (same_file(options.kl_base, options.kl_base_save)) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        options.kl_base.string() +
                            ": cannot read the KL base from the file this run writes");
        }
    }
    std::optional<BaseReader> reader;
    if (!options.kl_base.empty()) reader.emplace(options.kl_base, header);
    std::optional<BaseWriter> writer;
    if (!options.kl_base_save.empty()) writer.emplace(options.kl_base_save, header);

    const size_t vocab = static_cast<size_t>(n_vocab);
    const size_t scored_floats = static_cast<size_t>(layout.n_scored) * vocab;
    std::vector<float> model_lp(writer ? scored_floats : 0);
    std::vector<float> base_lp(reader ? scored_floats : 0);
    std::vector<int32_t> chunk(static_cast<size_t>(layout.n_ctx));

    PerplexityResult r;
    r.n_ctx = layout.n_ctx;
    r.n_vocab = n_vocab;
    r.n_chunks = layout.n_chunks;
    r.chunk_nll.reserve(static_cast<size_t>(layout.n_chunks));
    Sums s;
    if (options.progress) options.progress(0, layout.n_chunks);
    const auto t0 = std::chrono::steady_clock::now();

    for (int32_t c = 0; c < layout.n_chunks; ++c) {
        const auto src = used.subspan(static_cast<size_t>(c) * layout.n_ctx, chunk.size());
        std::copy(src.begin(), src.end(), chunk.begin());
        if (options.bos >= 0) chunk[0] = options.bos;

        const std::span<const float> logits = eval(chunk, layout.first);
        if (logits.size() < scored_floats) {
            throw Error(DWELL_ERR_INTERNAL, "perplexity: the evaluator returned " +
                                                std::to_string(logits.size()) + " logits, need " +
                                                std::to_string(scored_floats));
        }
        if (reader) reader->read(base_lp);

        double chunk_sum = 0;
        for (int32_t i = 0; i < layout.n_scored; ++i) {
            const auto row = logits.subspan(static_cast<size_t>(i) * vocab, vocab);
            // Position first+i predicts the chunk's next token.
            const int32_t target =
                chunk[static_cast<size_t>(layout.first) + static_cast<size_t>(i) + 1];
            const double nll = token_nll(row, target);
            chunk_sum += nll;
            s.nll += nll;
            s.nll2 += nll * nll;
            if (writer) {
                log_softmax(
                    row, std::span<float>(model_lp).subspan(static_cast<size_t>(i) * vocab, vocab));
            }
            if (reader) {
                const auto base =
                    std::span<const float>(base_lp).subspan(static_cast<size_t>(i) * vocab, vocab);
                const double base_nll = -static_cast<double>(base[static_cast<size_t>(target)]);
                s.base_nll += base_nll;
                s.base_nll2 += base_nll * base_nll;
                s.nll_base_nll += nll * base_nll;
                // KL(base || model) = sum p_base (ln p_base - ln p_model), with
                // ln p_model = logit - logsumexp = logit - (logit[target] + nll).
                const double lse = static_cast<double>(row[static_cast<size_t>(target)]) + nll;
                double kld = 0;
                for (size_t v = 0; v < vocab; ++v) {
                    const double lb = base[v];
                    kld += std::exp(lb) * (lb - (static_cast<double>(row[v]) - lse));
                }
                s.kld += kld;
                s.kld2 += kld * kld;
                if (argmax(row) == argmax(base)) ++s.same_top;
            }
            ++s.count;
        }
        r.chunk_nll.push_back(chunk_sum / layout.n_scored);
        if (writer) writer->write(model_lp);
        if (options.progress) options.progress(c + 1, layout.n_chunks);
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (writer) writer->finish();

    r.n_scored = s.count;
    const MeanAndError log_ppl = mean_and_error(s.nll, s.nll2, s.count);
    r.nll = log_ppl.mean;
    r.ppl = {std::exp(log_ppl.mean), std::exp(log_ppl.mean) * log_ppl.error};
    if (reader) {
        KlDivergence kl;
        kl.kld = mean_and_error(s.kld, s.kld2, s.count);
        const double n = static_cast<double>(s.count);
        const double p = static_cast<double>(s.same_top) / n;
        kl.same_top = {p, s.count > 1 ? std::sqrt(p * (1 - p) / (n - 1)) : 0.0};
        const MeanAndError log_base = mean_and_error(s.base_nll, s.base_nll2, s.count);
        kl.base_ppl = {std::exp(log_base.mean), std::exp(log_base.mean) * log_base.error};
        const double cov =
            s.count > 1 ? (s.nll_base_nll / n - (s.nll / n) * (s.base_nll / n)) / (n - 1) : 0.0;
        const double var_ratio =
            log_ppl.error * log_ppl.error + log_base.error * log_base.error - 2 * cov;
        kl.log_ratio = {log_ppl.mean - log_base.mean, var_ratio > 0 ? std::sqrt(var_ratio) : 0.0};
        r.kl = kl;
    }
    return r;
}

PerplexityResult perplexity(Runtime& runtime, std::shared_ptr<const Model> model,
                            std::span<const int32_t> tokens, PerplexityOptions options,
                            SessionOptions session) {
    refuse_output_over_input(options.kl_base_save, model->path(), "the model file");
    if (options.bos < 0) options.bos = model->tokenizer().bos();
    const auto n_vocab = static_cast<int32_t>(model->info().n_vocab);
    return perplexity(session_chunk_logits(runtime, std::move(model), session), tokens, n_vocab,
                      options);
}

}  // namespace dwell
