// The perplexity and KL arithmetic on hand-computed cases, driven through
// perplexity() with a fake logits provider, the base-file checks, and the
// progress bar's rendering.
#include "dwell/tools/perplexity.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "dwell/core/base/error.hpp"
#include "dwell/tools/progress_bar.hpp"
#include "test_dirs.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

const double kLn2 = std::log(2.0);

// Per scored row, the logits `favoured` for the token that really follows
// and 0 for the rest: with 4 tokens, ln 3 gives it p = 1/2, 0 gives 1/4.
struct FakeModel {
    int32_t n_vocab = 4;
    std::vector<double> favoured_by_chunk;
    std::vector<std::vector<int32_t>> seen;
    std::vector<float> logits;

    ChunkLogits evaluator() {
        return [this](std::span<const int32_t> chunk, int32_t first) -> std::span<const float> {
            const double f = favoured_by_chunk[seen.size() % favoured_by_chunk.size()];
            seen.emplace_back(chunk.begin(), chunk.end());
            const size_t rows = chunk.size() - static_cast<size_t>(first);
            logits.assign(rows * static_cast<size_t>(n_vocab), 0.0f);
            for (size_t i = 0; i + 1 < rows; ++i) {
                const auto next = static_cast<size_t>(chunk[static_cast<size_t>(first) + i + 1]);
                logits[i * static_cast<size_t>(n_vocab) + next] = static_cast<float>(f);
            }
            return logits;
        };
    }
};

std::vector<int32_t> cyclic_tokens(int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = i % 4;
    return t;
}

TEST(PerplexityMath, TokenNllIsMinusLogSoftmax) {
    // softmax(0, ln 2, ln 3) = (1/6, 2/6, 3/6)
    const std::vector<float> logits = {0.0f, static_cast<float>(kLn2),
                                       static_cast<float>(std::log(3.0))};
    EXPECT_NEAR(token_nll(logits, 2), kLn2, 1e-7);
    EXPECT_NEAR(token_nll(logits, 0), std::log(6.0), 1e-7);
    std::vector<float> lp(3);
    log_softmax(logits, lp);
    EXPECT_NEAR(lp[1], std::log(2.0 / 6), 1e-6);
    // Large logits must not overflow.
    const std::vector<float> big = {1000.0f, 1000.0f};
    EXPECT_NEAR(token_nll(big, 1), kLn2, 1e-7);
}

TEST(PerplexityMath, MeanAndStandardError) {
    // 1, 2, 3, 4: mean 2.5, population variance 1.25, error sqrt(1.25 / 3).
    const MeanAndError m = mean_and_error(10, 30, 4);
    EXPECT_DOUBLE_EQ(m.mean, 2.5);
    EXPECT_NEAR(m.error, std::sqrt(1.25 / 3), 1e-12);
    EXPECT_EQ(mean_and_error(3, 9, 1).error, 0.0);
    EXPECT_EQ(mean_and_error(0, 0, 0).mean, 0.0);
}

TEST(PerplexityMath, ChunkLayoutDropsTheRemainderAndScoresTheSecondHalf) {
    const ChunkLayout l = chunk_layout(100, 16);
    EXPECT_EQ(l.n_chunks, 6);
    EXPECT_EQ(l.first, 8);
    EXPECT_EQ(l.n_scored, 7);
    EXPECT_THROW(chunk_layout(100, 7), Error);
    EXPECT_THROW(chunk_layout(100, 6), Error);
    try {
        chunk_layout(100, 128);
        FAIL() << "a text shorter than one chunk was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("needs at least 128"), std::string::npos) << e.what();
    }
}

TEST(Perplexity, HandComputedTwoChunks) {
    // n_ctx 8: positions 4, 5, 6 of each chunk are scored. Chunk 1 gives the
    // true token p = 1/2 (NLL ln 2), chunk 2 p = 1/4 (NLL 2 ln 2); the 17th
    // token is the dropped remainder.
    FakeModel fake;
    fake.favoured_by_chunk = {std::log(3.0), 0.0};
    const auto tokens = cyclic_tokens(17);
    PerplexityOptions o;
    o.n_ctx = 8;
    o.bos = 3;
    std::vector<std::pair<int32_t, int32_t>> progress;
    o.progress = [&](int32_t done, int32_t total) { progress.emplace_back(done, total); };
    const PerplexityResult r = perplexity(fake.evaluator(), tokens, 4, o);

    EXPECT_EQ(r.n_chunks, 2);
    EXPECT_EQ(r.n_scored, 6);
    ASSERT_EQ(r.chunk_nll.size(), 2u);
    EXPECT_NEAR(r.chunk_nll[0], kLn2, 1e-7);
    EXPECT_NEAR(r.chunk_nll[1], 2 * kLn2, 1e-7);
    EXPECT_NEAR(r.nll, 1.5 * kLn2, 1e-7);
    const double ppl = std::pow(2.0, 1.5);
    EXPECT_NEAR(r.ppl.mean, ppl, 1e-6);
    // Six samples, half ln 2 and half 2 ln 2: variance (ln 2 / 2)^2 over n - 1.
    EXPECT_NEAR(r.ppl.error, ppl * 0.5 * kLn2 / std::sqrt(5.0), 1e-6);
    EXPECT_FALSE(r.kl.has_value());

    // Each chunk starts with BOS in place of its first token.
    ASSERT_EQ(fake.seen.size(), 2u);
    EXPECT_EQ(fake.seen[0], (std::vector<int32_t>{3, 1, 2, 3, 0, 1, 2, 3}));
    EXPECT_EQ(fake.seen[1], (std::vector<int32_t>{3, 1, 2, 3, 0, 1, 2, 3}));
    EXPECT_EQ(progress, (std::vector<std::pair<int32_t, int32_t>>{{0, 2}, {1, 2}, {2, 2}}));
}

TEST(Perplexity, RejectsTokensOutsideTheVocabulary) {
    FakeModel fake;
    fake.favoured_by_chunk = {0.0};
    auto tokens = cyclic_tokens(8);
    tokens[5] = 4;
    PerplexityOptions o;
    o.n_ctx = 8;
    EXPECT_THROW(perplexity(fake.evaluator(), tokens, 4, o), Error);
}

TEST(Perplexity, KlAgainstItsOwnBaseIsZero) {
    test::TempDir dir;
    const fs::path base = dir.path() / "base.kl";
    const auto tokens = cyclic_tokens(24);
    FakeModel fake;
    fake.favoured_by_chunk = {std::log(3.0), 0.0, 1.0};
    PerplexityOptions o;
    o.n_ctx = 8;
    o.bos = 3;
    o.kl_base_save = base;
    const PerplexityResult saved = perplexity(fake.evaluator(), tokens, 4, o);
    // Header plus 3 chunks x 3 positions x 4 tokens of f32.
    EXPECT_EQ(fs::file_size(base), 32u + 3 * 3 * 4 * 4);

    o.kl_base_save.clear();
    o.kl_base = base;
    const PerplexityResult r = perplexity(fake.evaluator(), tokens, 4, o);
    ASSERT_TRUE(r.kl.has_value());
    EXPECT_NEAR(r.kl->kld.mean, 0.0, 1e-7);
    EXPECT_DOUBLE_EQ(r.kl->same_top.mean, 1.0);
    EXPECT_NEAR(r.kl->base_ppl.mean, saved.ppl.mean, 1e-6);
    EXPECT_NEAR(r.kl->base_ppl.error, saved.ppl.error, 1e-6);
    EXPECT_NEAR(r.kl->log_ratio.mean, 0.0, 1e-7);
}

TEST(Perplexity, KlOfAnotherModelIsHandComputed) {
    // Base: uniform over 4 tokens. Model: the true next token has p = 1/2,
    // the others 1/6. KL(base || model) = 1/4 (ln(1/2) + 3 ln(3/2)) per
    // position, and the uniform base's top token (id 0, the first maximum)
    // is never the true next token (1, 2 or 3) here.
    test::TempDir dir;
    const fs::path base = dir.path() / "uniform.kl";
    const auto tokens = cyclic_tokens(16);
    PerplexityOptions o;
    o.n_ctx = 8;
    o.bos = 3;
    FakeModel uniform;
    uniform.favoured_by_chunk = {0.0};
    o.kl_base_save = base;
    perplexity(uniform.evaluator(), tokens, 4, o);

    FakeModel sharp;
    sharp.favoured_by_chunk = {std::log(3.0)};
    o.kl_base_save.clear();
    o.kl_base = base;
    const PerplexityResult r = perplexity(sharp.evaluator(), tokens, 4, o);
    ASSERT_TRUE(r.kl.has_value());
    EXPECT_NEAR(r.kl->kld.mean, 0.25 * (std::log(0.5) + 3 * std::log(1.5)), 1e-6);
    EXPECT_NEAR(r.kl->kld.error, 0.0, 1e-6);
    EXPECT_DOUBLE_EQ(r.kl->same_top.mean, 0.0);
    EXPECT_NEAR(r.kl->base_ppl.mean, 4.0, 1e-5);
    EXPECT_NEAR(r.ppl.mean, 2.0, 1e-5);
    EXPECT_NEAR(r.kl->log_ratio.mean, -kLn2, 1e-6);
}

void expect_error_naming(const std::function<void()>& f, const fs::path& file,
                         const std::string& fragment) {
    try {
        f();
        ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
        EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

TEST(Perplexity, MismatchedBaseFilesAreRefusedNamingTheFile) {
    test::TempDir dir;
    const fs::path base = dir.path() / "base.kl";
    FakeModel fake;
    fake.favoured_by_chunk = {1.0};
    PerplexityOptions o;
    o.n_ctx = 8;
    o.kl_base_save = base;
    perplexity(fake.evaluator(), cyclic_tokens(24), 4, o);
    o.kl_base_save.clear();
    o.kl_base = base;

    auto run = [&](std::vector<int32_t> tokens, int32_t n_ctx, int32_t n_vocab) {
        return [&fake, &o, tokens, n_ctx, n_vocab] {
            PerplexityOptions opts = o;
            opts.n_ctx = n_ctx;
            perplexity(fake.evaluator(), tokens, n_vocab, opts);
        };
    };
    expect_error_naming(run(cyclic_tokens(24), 10, 4), base, "n_ctx 8, this run has 10");
    expect_error_naming(run(cyclic_tokens(16), 8, 4), base, "chunks 3, this run has 2");
    expect_error_naming(run(cyclic_tokens(24), 8, 5), base, "n_vocab 4, this run has 5");
    auto other = cyclic_tokens(24);
    other[20] = 1;
    expect_error_naming(run(other, 8, 4), base, "other text");

    const auto size = fs::file_size(base);
    fs::resize_file(base, size - 4);
    expect_error_naming(run(cyclic_tokens(24), 8, 4), base, "truncated");
    std::ofstream(base, std::ios::binary) << "not a base file at all, just some text";
    expect_error_naming(run(cyclic_tokens(24), 8, 4), base, "not a dwell KL base file");
    o.kl_base = dir.path() / "absent.kl";
    expect_error_naming(run(cyclic_tokens(24), 8, 4), o.kl_base, "cannot open");
}

TEST(Perplexity, AFailedRunLeavesNoBaseFile) {
    test::TempDir dir;
    const fs::path base = dir.path() / "base.kl";
    FakeModel fake;
    fake.favoured_by_chunk = {1.0};
    auto inner = fake.evaluator();
    int calls = 0;
    ChunkLogits failing = [&](std::span<const int32_t> chunk, int32_t first) {
        if (++calls == 2) throw Error(DWELL_ERR_INTERNAL, "backend failure");
        return inner(chunk, first);
    };
    PerplexityOptions o;
    o.n_ctx = 8;
    o.kl_base_save = base;
    EXPECT_THROW(perplexity(failing, cyclic_tokens(24), 4, o), Error);
    EXPECT_FALSE(fs::exists(base));
}

TEST(ProgressBar, RendersCountsPercentElapsedAndEta) {
    const std::string line = ProgressBar::render("perplexity", 13, 26, 5.0, 65.0, 100);
    EXPECT_NE(line.find("perplexity ["), std::string::npos) << line;
    EXPECT_NE(line.find("13/26"), std::string::npos) << line;
    EXPECT_NE(line.find(" 50%"), std::string::npos) << line;
    EXPECT_NE(line.find("00:05 elapsed"), std::string::npos) << line;
    EXPECT_NE(line.find("ETA 01:05"), std::string::npos) << line;
    EXPECT_LE(line.size(), 100u);

    const std::string done = ProgressBar::render("convert", 26, 26, 3725.0, -1, 100);
    EXPECT_NE(done.find("100%"), std::string::npos) << done;
    EXPECT_NE(done.find("1:02:05 elapsed"), std::string::npos) << done;
    EXPECT_EQ(done.find("ETA"), std::string::npos) << done;
    EXPECT_LE(ProgressBar::render("a long label", 1, 3, 0, -1, 20).size(), 20u);
}

TEST(ProgressBar, SilentWhenNotATerminal) {
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    {
        ProgressBar bar("test", 10, f);
        EXPECT_FALSE(bar.enabled());
        for (int i = 0; i <= 10; ++i) bar.update(i);
    }
    EXPECT_EQ(std::ftell(f), 0L);
    std::fclose(f);
}

}  // namespace
}  // namespace dwell
