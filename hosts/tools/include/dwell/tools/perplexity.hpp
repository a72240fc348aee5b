// Perplexity of a model on a text, measured the way llama.cpp's
// llama-perplexity does so that the figures compare one to one:
//
//  - the text is tokenized once, with BOS first;
//  - the tokens are cut into non-overlapping chunks of n_ctx (the remainder
//    is dropped); each chunk is evaluated from an empty KV cache with its
//    first token replaced by BOS;
//  - only the second half of each chunk is scored: the logits at positions
//    n_ctx/2 .. n_ctx-2 predict the token that follows, so every scored
//    prediction has at least n_ctx/2 tokens of context;
//  - PPL = exp(mean NLL), and its uncertainty is PPL times the standard error
//    of the mean NLL (sample variance over count - 1).
//
// With a base (the log-probabilities of a reference run, saved earlier) it
// also gives the KL divergence KL(base || model) per scored position, its
// mean and standard error, and how often both agree on the most likely token,
// as llama-perplexity --kl-divergence does.
//
// Base file format (little-endian; written by one run, read by another):
//
//   offset  size  field
//        0     8  magic "DWLKLB01"
//        8     4  i32 n_vocab
//       12     4  i32 n_ctx
//       16     4  i32 n_chunks
//       20     4  i32 n_scored per chunk (= n_ctx - 1 - n_ctx/2)
//       24     8  u64 FNV-1a hash of the n_chunks * n_ctx evaluated token ids
//       32     .  f32 log-probabilities [n_chunks][n_scored][n_vocab]
//
// Only the scored positions are stored, as normalised log-probabilities so
// the reader needs no softmax; the file size must match the header exactly.
// A base made with another vocabulary, context size, chunk count or text is
// refused with one line naming the file.
//
// Thread-safety: perplexity() is reentrant; the progress callback is called
// on the calling thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "dwell/core/session/session.hpp"

namespace dwell {

class Runtime;
class Model;

// -ln p(target) under softmax(logits), computed as llama.cpp does (max
// subtracted, the exponentials summed in double).
double token_nll(std::span<const float> logits, int32_t target);
// Normalised log-probabilities of `logits` into `out` (same size).
void log_softmax(std::span<const float> logits, std::span<float> out);

// The mean of `count` samples from their sum and sum of squares, and the
// standard error of that mean (0 when it cannot be estimated).
struct MeanAndError {
    double mean = 0;
    double error = 0;
};
MeanAndError mean_and_error(double sum, double sum2, int64_t count);

// Chunk geometry shared by the computation, its callers and the base file.
struct ChunkLayout {
    int32_t n_ctx = 0;
    int32_t n_chunks = 0;
    int32_t first = 0;     // first scored position in a chunk: n_ctx / 2
    int32_t n_scored = 0;  // scored positions per chunk: n_ctx - 1 - first
};
// Throws dwell::Error when n_ctx is odd or < 8, or when `n_tokens` is less
// than one chunk (the message says how many tokens are needed).
ChunkLayout chunk_layout(int64_t n_tokens, int32_t n_ctx);

// Returns the logits of positions `first` .. end of `chunk`, evaluated from
// an empty context, as [chunk.size() - first][n_vocab] floats. The span must
// stay valid until the next call.
using ChunkLogits =
    std::function<std::span<const float>(std::span<const int32_t> chunk, int32_t first)>;

// A ChunkLogits that evaluates each chunk in a fresh Session on `model`
// (options.n_ctx is set to the chunk length).
ChunkLogits session_chunk_logits(Runtime& runtime, std::shared_ptr<const Model> model,
                                 SessionOptions options);

struct PerplexityOptions {
    int32_t n_ctx = 512;
    int32_t bos = -1;  // replaces each chunk's first token; -1: leave the tokens as they are
    std::function<void(int32_t done_chunks, int32_t total_chunks)> progress;
    std::filesystem::path kl_base_save;  // non-empty: write this run's log-probabilities here
    std::filesystem::path kl_base;       // non-empty: compare against these saved log-probabilities
};

struct KlDivergence {
    MeanAndError kld;        // KL(base || model) per scored position, in nats
    MeanAndError same_top;   // fraction of positions where both argmax agree
    MeanAndError base_ppl;   // the base run's PPL on the same tokens
    MeanAndError log_ratio;  // ln(PPL / base PPL), error accounting for correlation
};

struct PerplexityResult {
    int32_t n_ctx = 0;
    int32_t n_vocab = 0;
    int32_t n_chunks = 0;
    int64_t n_scored = 0;           // predictions scored over all chunks
    std::vector<double> chunk_nll;  // mean NLL of each chunk's scored predictions
    double nll = 0;                 // mean NLL over all scored predictions
    MeanAndError ppl;               // PPL and its uncertainty
    std::optional<KlDivergence> kl;
    double seconds = 0;  // wall time spent evaluating
};

// Runs the measurement on logits from `eval`. Throws dwell::Error on bad
// geometry, a token outside 0..n_vocab-1, or an unusable base file.
PerplexityResult perplexity(const ChunkLogits& eval, std::span<const int32_t> tokens,
                            int32_t n_vocab, const PerplexityOptions& options);

// The same on a model: fresh sessions with `session` (its n_ctx is set from
// options.n_ctx), BOS from the model's tokenizer unless options.bos is set.
PerplexityResult perplexity(Runtime& runtime, std::shared_ptr<const Model> model,
                            std::span<const int32_t> tokens, PerplexityOptions options,
                            SessionOptions session = {});

}  // namespace dwell
