// dwell's perplexity on stories260K against llama-perplexity's figures, which
// ../shared/reference/stories260K.md records (read from it, not copied here);
// KL divergence of the model against itself; `dwell perplexity` end to end.
#include "dwell/tools/perplexity.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

struct PplReference {
    int32_t n_ctx = 0;
    int32_t chunks = 0;
    double ppl = 0;
    double error = 0;
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The rows "| n_ctx | chunks | PPL ± error |" of the perplexity section.
std::vector<PplReference> load_ppl_reference(const fs::path& md) {
    const std::string text = slurp(md);
    const size_t from = text.find("## Perplexity on tinystory-eval.txt");
    if (from == std::string::npos) return {};
    const size_t to = text.find("\n## ", from + 1);
    const std::string section = text.substr(from, to == std::string::npos ? to : to - from);
    std::vector<PplReference> rows;
    const std::regex row(R"(\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([0-9.]+)\s*±\s*([0-9.]+)\s*\|)");
    for (auto it = std::sregex_iterator(section.begin(), section.end(), row);
         it != std::sregex_iterator(); ++it) {
        rows.push_back(
            {std::stoi((*it)[1]), std::stoi((*it)[2]), std::stod((*it)[3]), std::stod((*it)[4])});
    }
    return rows;
}

class Stories260KPerplexity : public ::testing::Test {
protected:
    void SetUp() override {
        model_path_ = model_path("stories260K.gguf");
        if (model_path_.empty()) GTEST_SKIP() << "stories260K.gguf not found in " << models_dir();
        const fs::path md = reference_dir() / "stories260K.md";
        text_path_ = reference_dir() / "tinystory-eval.txt";
        if (!fs::exists(md) || !fs::exists(text_path_)) {
            GTEST_SKIP() << "reference " << md << " or " << text_path_ << " not found";
        }
        reference_ = load_ppl_reference(md);
        ASSERT_GE(reference_.size(), 2u) << "could not parse the perplexity table of " << md;
    }

    // The reference was made with an F32 KV cache; ask for it whatever
    // manifest this machine picks.
    static SessionOptions f32_kv() {
        SessionOptions so;
        so.kv_dtype = DWELL_F32;
        return so;
    }

    fs::path model_path_;
    fs::path text_path_;
    std::vector<PplReference> reference_;
};

TEST_F(Stories260KPerplexity, MatchesLlamaPerplexity) {
    Runtime runtime;
    auto model = Model::load(runtime, model_path_);
    const auto tokens = model->tokenizer().encode(slurp(text_path_), true);
    for (const PplReference& ref : reference_) {
        PerplexityOptions o;
        o.n_ctx = ref.n_ctx;
        const PerplexityResult r = perplexity(runtime, model, tokens, o, f32_kv());
        EXPECT_EQ(r.n_chunks, ref.chunks) << "n_ctx " << ref.n_ctx;
        EXPECT_EQ(r.n_scored, static_cast<int64_t>(ref.chunks) * (ref.n_ctx / 2 - 1));
        EXPECT_NEAR(r.ppl.mean, ref.ppl, ref.ppl * 1e-3) << "n_ctx " << ref.n_ctx;
        EXPECT_NEAR(r.ppl.error, ref.error, ref.error * 1e-2) << "n_ctx " << ref.n_ctx;
        EXPECT_EQ(r.chunk_nll.size(), static_cast<size_t>(ref.chunks));
    }
}

TEST_F(Stories260KPerplexity, KlAgainstItsOwnBaseIsZero) {
    TempDir tmp;
    const fs::path base = tmp.path() / "base.kl";
    Runtime runtime;
    auto model = Model::load(runtime, model_path_);
    const auto tokens = model->tokenizer().encode(slurp(text_path_), true);
    PerplexityOptions o;
    o.n_ctx = reference_.front().n_ctx;
    o.kl_base_save = base;
    const PerplexityResult saved = perplexity(runtime, model, tokens, o, f32_kv());
    ASSERT_TRUE(fs::exists(base));

    o.kl_base_save.clear();
    o.kl_base = base;
    const PerplexityResult r = perplexity(runtime, model, tokens, o, f32_kv());
    ASSERT_TRUE(r.kl.has_value());
    EXPECT_NEAR(r.kl->kld.mean, 0.0, 1e-6);
    EXPECT_DOUBLE_EQ(r.kl->same_top.mean, 1.0);
    EXPECT_NEAR(r.kl->base_ppl.mean, saved.ppl.mean, saved.ppl.mean * 1e-6);
    EXPECT_NEAR(r.ppl.mean, saved.ppl.mean, saved.ppl.mean * 1e-6);
}

TEST_F(Stories260KPerplexity, CliPrintsTheFinalEstimate) {
    const PplReference& ref = reference_.front();
    const auto r = run_dwell({"perplexity", "-m", model_path_.string(), "-f", text_path_.string(),
                              "--ctx", std::to_string(ref.n_ctx), "--kv-type", "f32"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    const std::regex final_line(R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))");
    ASSERT_TRUE(std::regex_search(r.out, m, final_line)) << r.out;
    EXPECT_NEAR(std::stod(m[1]), ref.ppl, ref.ppl * 1e-3) << r.out;
    EXPECT_NE(r.out.find(std::to_string(ref.chunks) + " chunks of " + std::to_string(ref.n_ctx)),
              std::string::npos)
        << r.out;
    // Not a terminal: no progress bar.
    EXPECT_EQ(r.err.find("perplexity ["), std::string::npos) << r.err;
}

TEST_F(Stories260KPerplexity, CliComparesWithASavedBase) {
    TempDir tmp;
    const std::string base = (tmp.path() / "base.kl").string();
    const std::vector<std::string> common = {
        "perplexity", "-m",  model_path_.string(), "-f", text_path_.string(),
        "--ctx",      "128", "--kv-type",          "f32"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = common;
        args.insert(args.end(), extra.begin(), extra.end());
        return run_dwell(args);
    };
    const auto saved = with({"--kl-base-save", base});
    ASSERT_EQ(saved.exit_code, 0) << saved.err;
    const auto compared = with({"--kl-base", base});
    ASSERT_EQ(compared.exit_code, 0) << compared.err;
    EXPECT_NE(compared.out.find("KL divergence (base || model) = 0.000000"), std::string::npos)
        << compared.out;
    EXPECT_NE(compared.out.find("same top token = 100.000"), std::string::npos) << compared.out;
    EXPECT_NE(compared.out.find("base PPL = "), std::string::npos) << compared.out;

    // A base made with another context is refused in one line naming it.
    const auto other_ctx = run_dwell({"perplexity", "-m", model_path_.string(), "-f",
                                      text_path_.string(), "--ctx", "256", "--kl-base", base});
    EXPECT_EQ(other_ctx.exit_code, 1);
    EXPECT_NE(other_ctx.err.find(base), std::string::npos) << other_ctx.err;
    EXPECT_NE(other_ctx.err.find("n_ctx 128, this run has 256"), std::string::npos)
        << other_ctx.err;
}

TEST_F(Stories260KPerplexity, CliErrorsAreOneLine) {
    TempDir tmp;
    const fs::path short_text = tmp.write("short.txt", "Once upon a time, there was a cat.");
    auto one_line = [](const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; };
    const auto too_short = run_dwell(
        {"perplexity", "-m", model_path_.string(), "-f", short_text.string(), "--ctx", "64"});
    EXPECT_EQ(too_short.exit_code, 1);
    EXPECT_TRUE(one_line(too_short.err)) << too_short.err;
    EXPECT_NE(too_short.err.find(short_text.string()), std::string::npos) << too_short.err;
    EXPECT_NE(too_short.err.find("needs at least 64"), std::string::npos) << too_short.err;

    const fs::path absent = tmp.path() / "absent.txt";
    const auto missing =
        run_dwell({"perplexity", "-m", model_path_.string(), "-f", absent.string()});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_TRUE(one_line(missing.err)) << missing.err;
    EXPECT_NE(missing.err.find(absent.string()), std::string::npos) << missing.err;

    const auto odd = run_dwell(
        {"perplexity", "-m", model_path_.string(), "-f", text_path_.string(), "--ctx", "63"});
    EXPECT_EQ(odd.exit_code, 2);
    EXPECT_TRUE(one_line(odd.err)) << odd.err;
}

}  // namespace
}  // namespace dwell::test
