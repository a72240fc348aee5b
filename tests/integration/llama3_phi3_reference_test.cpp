// Llama 3 (RoPE frequency factors, tied output) and Phi-3 (fused QKV and
// gate/up, partial rotary, LongRoPE with an attention factor) against
// llama.cpp on the same synthetic files: dwell's logits at every one of 48
// positions must have cosine >= 0.99999 with llama.cpp's, and 32 tokens
// decoded greedily one per step must be llama.cpp's (the `greedy` line of
// tests/data/families/<family>.logits; README.md there says how it was
// made). The file's sha256 is recorded with the logits, so a generator
// change is reported as such rather than as a plugin bug.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "family_reference.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

// The files whose logits llama.cpp computed (a change here changes their
// sha256). F32 weights, two layers, GQA 4/2.
SyntheticModelSpec llama3_phi3_spec(SyntheticFamily family) {
    SyntheticModelSpec s;
    s.family = family;
    s.n_embd = 128;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 256;
    s.n_vocab = 1024;
    s.dtype = DWELL_F32;
    s.weight_std = 0.05f;
    s.norm_jitter = 0.2f;
    s.rms_eps = 1e-6f;
    if (family == SyntheticFamily::llama3) {
        // Llama 3.2 1B's layout: base 500000, factors, output tied.
        s.n_ctx = 256;
        s.rope_freq_base = 500000.0f;
        s.tied_output = true;
        s.seed = 21;
    } else {
        // Phi-4-mini's: 3/4 of each head rotated. The original context (128)
        // is below both runtimes' context (256 for llama.cpp, the training
        // 1024 for dwell), so the long factors are in play.
        s.n_ctx = 1024;
        s.n_rot = 24;
        s.n_ctx_orig = 128;
        s.seed = 22;
    }
    return s;
}

class Llama3Phi3Reference : public ::testing::TestWithParam<SyntheticFamily> {};

TEST_P(Llama3Phi3Reference, LogitsAndGreedyTokensMatchLlamaCpp) {
    const SyntheticFamily family = GetParam();
    const std::string name = synthetic_family_name(family);
    TempDir tmp;
    // Kept when asked, to recompute the reference (tests/data/families/README.md).
    const char* keep = std::getenv("DWELL_FAMILY_GGUF_DIR");
    const fs::path gguf = (keep && *keep ? fs::path(keep) : tmp.path()) / (name + ".gguf");
    write_synthetic_model(llama3_phi3_spec(family), gguf);

    const FamilyReference ref = read_family_reference(family_reference_path(name));
    ASSERT_EQ(sha256_of(gguf), ref.sha256)
        << "generator changed: recompute tests/data/families/" << name
        << ".logits with llama.cpp as tests/data/families/README.md says";
    ASSERT_GE(ref.n_pos, 48);
    ASSERT_EQ(ref.greedy.size(), 32u);

    Runtime runtime;
    auto model = Model::load(runtime, gguf);
    ASSERT_EQ(model->plugin().name(), family == SyntheticFamily::llama3 ? "llama" : "phi3");
    ASSERT_EQ(model->info().n_vocab, ref.n_vocab);
    SessionOptions so;
    so.kv_dtype = DWELL_F32;
    Session session(runtime, model, so);
    const auto all = session.decode(ref.tokens, /*all_logits=*/true);
    ASSERT_EQ(static_cast<int64_t>(all.size()), ref.n_pos * ref.n_vocab);
    const std::vector<float> got(all.begin(), all.end());

    double min_cos = 1.0;
    for (int64_t p = 0; p < ref.n_pos; ++p) {
        const double c = logits_cosine(got.data() + p * ref.n_vocab,
                                       ref.logits.data() + p * ref.n_vocab, ref.n_vocab);
        EXPECT_GE(c, 0.99999) << name << ": position " << p << " (token " << ref.tokens[p] << ")";
        min_cos = std::min(min_cos, c);
    }

    // Greedy, one token per step, from the batch's last logits.
    std::vector<int32_t> greedy;
    int32_t next = greedy_argmax(
        {got.data() + (ref.n_pos - 1) * ref.n_vocab, static_cast<size_t>(ref.n_vocab)});
    for (size_t k = 0; k < ref.greedy.size(); ++k) {
        greedy.push_back(next);
        if (k + 1 == ref.greedy.size()) break;
        const int32_t one[1] = {next};
        next = greedy_argmax(session.decode(one));
    }
    EXPECT_EQ(greedy, ref.greedy) << name;
    std::printf("%s: minimum cosine over %lld positions %.8f, greedy %zu tokens %s\n", name.c_str(),
                static_cast<long long>(ref.n_pos), min_cos, greedy.size(),
                greedy == ref.greedy ? "identical" : "differ");
}

INSTANTIATE_TEST_SUITE_P(Families, Llama3Phi3Reference,
                         ::testing::Values(SyntheticFamily::llama3, SyntheticFamily::phi3),
                         [](const auto& info) { return synthetic_family_name(info.param); });

// LongRoPE picks its factors by the session's context: up to the original
// context the short ones, beyond it the long ones (as llama.cpp does). Both
// sessions agree at position 0 (nothing rotates there, and attention over one
// key is that key's value) and differ later.
TEST(Phi3LongRope, TheSessionContextChoosesShortOrLongFactors) {
    TempDir tmp;
    const fs::path gguf = tmp.path() / "phi3.gguf";
    write_synthetic_model(llama3_phi3_spec(SyntheticFamily::phi3), gguf);
    Runtime runtime;
    auto model = Model::load(runtime, gguf);
    const std::vector<int32_t> ids = {1, 404, 805, 185, 586, 987, 367, 768};
    const auto logits = [&](int32_t n_ctx) {
        SessionOptions so;
        so.kv_dtype = DWELL_F32;
        so.n_ctx = n_ctx;
        Session s(runtime, model, so);
        const auto l = s.decode(ids, true);
        return std::vector<float>(l.begin(), l.end());
    };
    const auto short_ctx = logits(128), long_ctx = logits(512), long_too = logits(1024);
    const size_t v = static_cast<size_t>(model->info().n_vocab);
    EXPECT_EQ(std::vector<float>(short_ctx.begin(), short_ctx.begin() + v),
              std::vector<float>(long_ctx.begin(), long_ctx.begin() + v));
    EXPECT_NE(short_ctx, long_ctx);
    EXPECT_EQ(long_ctx, long_too);
}

// The fused weights' row views follow a streamed weight to wherever the
// streamer put it this pass: streamed logits equal mapped ones.
TEST(Phi3Plugin, StreamedFusedWeightsGiveTheMappedLogits) {
    TempDir tmp;
    const fs::path gguf = tmp.path() / "phi3.gguf";
    write_synthetic_model(llama3_phi3_spec(SyntheticFamily::phi3), gguf);
    const std::vector<int32_t> ids = {1, 404, 805, 185, 586, 987, 367, 768};
    const auto logits = [&](const std::string& weights, int budget_kib) {
        RuntimeOptions o;
        o.manifest = tmp.write("m-" + weights + ".toml",
                               "[[backend]]\nplugin = \"cpu\"\n[memory]\nweights = \"" + weights +
                                   "\"\npin_auto = false\nprefetch_layers = 1\n");
        if (budget_kib > 0) o.weight_budget_bytes = static_cast<uint64_t>(budget_kib) << 10;
        Runtime rt(o);
        auto model = Model::load(rt, gguf);
        EXPECT_EQ(model->streamer() != nullptr, weights == "stream");
        SessionOptions so;
        so.kv_dtype = DWELL_F32;
        Session s(rt, model, so);
        const auto l = s.decode(ids, true);
        return std::vector<float>(l.begin(), l.end());
    };
    // 1.5 MiB of the 2.2 MiB file: layers take turns.
    EXPECT_EQ(logits("stream", 1536), logits("mmap", 0));
}

// Hostile or incomplete phi3 files are refused in one line naming what is
// wrong: a missing RMSNorm epsilon, a fused weight of the wrong shape.
TEST(Phi3Plugin, RefusesAFileMissingItsEpsilonOrWithAWrongFusedWeight) {
    TempDir tmp;
    const fs::path good = tmp.path() / "phi3.gguf";
    SyntheticModelSpec spec = llama3_phi3_spec(SyntheticFamily::phi3);
    write_synthetic_model(spec, good);
    ASSERT_EQ(model_load_error(good), "");

    const auto no_eps = edited_gguf_copy(good, {.key = "phi3.attention.layer_norm_rms_epsilon"},
                                         tmp.path() / "no_eps.gguf");
    const std::string e1 = model_load_error(no_eps);
    EXPECT_NE(e1.find("phi3.attention.layer_norm_rms_epsilon"), std::string::npos) << e1;
    EXPECT_EQ(e1.find('\n'), std::string::npos) << e1;

    // More KV heads in the metadata than the fused weight holds rows for.
    const auto wide = edited_gguf_copy(good, {.key = "phi3.attention.head_count_kv", .value = 4},
                                       tmp.path() / "wide.gguf");
    const std::string e2 = model_load_error(wide);
    EXPECT_NE(e2.find("blk.0.attn_qkv.weight"), std::string::npos) << e2;
    EXPECT_EQ(e2.find('\n'), std::string::npos) << e2;
}

}  // namespace
}  // namespace dwell::test
