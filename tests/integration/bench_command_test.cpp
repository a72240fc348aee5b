// `dwell bench` as a script meets it: one JSON object on stdout with every
// figure present and positive, and one-line errors for bad options.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dwell/tools/synthetic_model.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

bool one_line(const std::string& s) {
    std::string t = s;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return !t.empty() && t.find('\n') == std::string::npos;
}

TEST(BenchCommand, JsonHasEveryFigure) {
    TempDir dir;
    const fs::path model = write_small_model(dir);
    const auto r = run_dwell({"bench", "-m", model.string(), "-p", "8", "-n", "4", "-r", "2",
                              "--threads", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(one_line(r.out)) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    for (const char* key : {"prefill_tokens_per_second", "decode_tokens_per_second", "ttft_ms"}) {
        ASSERT_TRUE(j.contains(key)) << key;
        for (const char* stat : {"median", "min", "max"}) {
            EXPECT_GT(j[key][stat].get<double>(), 0) << key << "." << stat;
        }
        EXPECT_LE(j[key]["min"].get<double>(), j[key]["median"].get<double>()) << key;
        EXPECT_LE(j[key]["median"].get<double>(), j[key]["max"].get<double>()) << key;
    }
    for (const char* key :
         {"peak_rss_bytes", "model_bytes", "weight_bytes", "weight_bytes_per_token", "n_ctx"}) {
        EXPECT_GT(j.at(key).get<uint64_t>(), 0u) << key;
    }
    EXPECT_EQ(j.at("threads").get<int>(), 1);
    EXPECT_EQ(j.at("n_prompt").get<int>(), 8);
    EXPECT_EQ(j.at("n_gen").get<int>(), 4);
    EXPECT_EQ(j.at("repetitions").get<int>(), 2);
    EXPECT_EQ(j.at("model").get<std::string>(), model.string());
    EXPECT_FALSE(j.at("backends").empty());
    EXPECT_EQ(j.at("model_bytes").get<uint64_t>(), fs::file_size(model));
}

TEST(BenchCommand, TableByDefault) {
    TempDir dir;
    const fs::path model = write_small_model(dir);
    const auto r = run_dwell({"bench", "-m", model.string(), "-p", "4", "-n", "2", "-r", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("pp4 tok/s"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("tg2 tok/s"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("TTFT ms"), std::string::npos) << r.out;
}

// Activation sparsity on a Q4_0 model (the cpu backend's column layout):
// the JSON says how much of the projections' inputs was zero and what the
// kernels read per decoded token, which falls with sparsity; off, nothing
// is zeroed and the bytes are the dense ones.
TEST(BenchCommand, ReportsSparsityAndTheWeightBytesRead) {
    TempDir dir;
    SyntheticModelSpec spec;
    spec.n_embd = 128;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 256;
    spec.n_vocab = 256;
    spec.n_ctx = 128;
    spec.dtype = DWELL_Q4_0;
    const fs::path model = dir.path() / "q4_0.gguf";
    write_synthetic_model(spec, model);
    auto bench = [&](const char* sparsity) {
        const auto r = run_dwell({"bench", "-m", model.string(), "-p", "4", "-n", "4", "-r", "1",
                                  "--threads", "2", "--json", "--sparsity", sparsity});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return nlohmann::json::parse(r.out).at("sparsity");
    };
    const nlohmann::json off = bench("0"), half = bench("0.5");
    ASSERT_TRUE(off.at("measured").get<bool>()) << off.dump();
    ASSERT_TRUE(half.at("measured").get<bool>()) << half.dump();
    EXPECT_EQ(off.at("achieved").get<double>(), 0.0);
    EXPECT_EQ(off.at("weight_bytes_per_token").get<uint64_t>(),
              off.at("dense_weight_bytes_per_token").get<uint64_t>());
    EXPECT_NEAR(half.at("fraction").get<double>(), 0.5, 1e-6);
    EXPECT_GE(half.at("achieved").get<double>(), 0.5);
    EXPECT_LT(half.at("achieved").get<double>(), 0.55);
    EXPECT_EQ(half.at("dense_weight_bytes_per_token").get<uint64_t>(),
              off.at("dense_weight_bytes_per_token").get<uint64_t>());
    // The output head stays dense; the projections' code bytes halve.
    EXPECT_LT(half.at("weight_bytes_per_token").get<uint64_t>(),
              off.at("weight_bytes_per_token").get<uint64_t>() * 85 / 100);
}

// --decode-tokens random feeds a fixed-seed stream of ids: a synthetic MoE
// streamed through an expert cache smaller than its experts misses far
// more than with greedy decoding, whose text settles into a few tokens
// (the reason for the option: with greedy text the cache holds the whole
// working set and storage drops out of the figures); and the same command
// gives the same hit counts again (the stream does not depend on the run,
// the cache's policy not on read timing).
TEST(BenchCommand, RandomDecodeTokensVaryAMoesRouting) {
    TempDir dir;
    SyntheticModelSpec spec;
    spec.family = SyntheticFamily::qwen3moe;
    spec.n_embd = 256;
    spec.n_layer = 4;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 512;
    spec.n_vocab = 512;
    spec.n_ctx = 128;
    spec.n_expert = 16;
    spec.n_expert_used = 4;
    spec.dtype = DWELL_Q4_0;
    const fs::path model = dir.path() / "moe.gguf";
    write_synthetic_model(spec, model);
    auto experts = [&](const char* decode) {
        // 6 MiB: the shared weights (808 KiB) and about 23 of the 64 experts
        // (228 KiB each).
        const auto r = run_dwell({"bench", "-m", model.string(), "-p", "4", "-n", "16", "-r", "1",
                                  "--threads", "1", "--json", "--weights", "stream",
                                  "--weight-budget", "6", "--decode-tokens", decode});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        const nlohmann::json j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j.at("decode_tokens").get<std::string>(), decode);
        return j.at("weights").at("experts");
    };
    const nlohmann::json a = experts("random"), b = experts("random"), g = experts("greedy");
    ASSERT_LT(a.at("cache_slots").get<int>(), 64) << a.dump();
    EXPECT_GT(a.at("misses_per_token").get<double>(), 1.5 * g.at("misses_per_token").get<double>())
        << a.dump() << "\n"
        << g.dump();
    EXPECT_GT(a.at("bytes_read_per_token").get<uint64_t>(),
              g.at("bytes_read_per_token").get<uint64_t>());
    // Counts, not bytes: whether a dropped prefetch had started its read
    // (and so read its bytes) does depend on timing.
    for (const char* key : {"needed", "hits", "prefetch_hits", "misses", "prefetches"})
        EXPECT_EQ(a.at("cumulative").at(key), b.at("cumulative").at(key)) << key;
}

TEST(BenchCommand, BadOptionsGiveOneLineErrors) {
    TempDir dir;
    const fs::path model = write_small_model(dir);
    const std::vector<std::vector<std::string>> cases = {
        {"-p", "0"},
        {"-n", "0"},
        {"-r", "0"},
        {"-p", "100", "-n", "40"},  // 141 > the model's context of 128
        {"-p", "8", "--ctx", "8"},
        {"--kv-type", "q4"},
        {"--decode-tokens", "sampled"},
    };
    for (const auto& extra : cases) {
        std::vector<std::string> args = {"bench", "-m", model.string()};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = run_dwell(args);
        EXPECT_NE(r.exit_code, 0) << extra[0] << " " << extra[1];
        EXPECT_TRUE(one_line(r.err)) << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
    }
}

}  // namespace
}  // namespace dwell::test
