// `dwell calibrate` and --sparsity-thresholds on stories260K: the thresholds
// zero their share of each projection input on the text they were measured
// on (counted directly here, and by bench), a zero threshold changes nothing,
// and bad files or flags are refused in one line.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "dwell/core/base/error.hpp"
#include "dwell/core/config/sparsity_thresholds.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/platform/text_file.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/perplexity.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

bool one_line(const std::string& s) {
    std::string t = s;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return !t.empty() && t.find('\n') == std::string::npos;
}

void write(const fs::path& p, const std::string& text) {
    std::ofstream(p) << text;
}

class Calibrate : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = model_path("stories260K.gguf");
        if (model_.empty()) GTEST_SKIP() << "stories260K.gguf not found in " << models_dir();
        const fs::path eval = reference_dir() / "tinystory-eval.txt";
        if (!fs::exists(eval)) GTEST_SKIP() << eval << " not found";
        text_ = calibration_text(eval);
    }
    // The first ~2000 characters of the eval text (cut at a space): about
    // 450 tokens, 4 chunks of 128. Calibration runs the text nine times
    // (one pass to measure, eight for the table) in every test process, and
    // the whole text took past ctest's 300 s under qemu with the suite
    // running beside it.
    static fs::path calibration_text(const fs::path& eval) {
        static TempDir dir;
        const fs::path out = dir.path() / "calibration.txt";
        if (!fs::exists(out)) {
            const std::string all = read_text_file(eval, "text");
            const size_t cut = all.find(' ', std::min<size_t>(2000, all.size()));
            write(out, all.substr(0, cut));
        }
        return out;
    }
    // Calibrates once per test binary run (a few seconds on stories260K).
    const fs::path& calibrated() {
        static TempDir dir;
        static fs::path file;
        if (file.empty()) {
            const fs::path out = dir.path() / "t40.toml";
            const auto r =
                run_dwell({"calibrate", "-m", model_.string(), "-f", text_.string(), "--sparsity",
                           "0.4", "--ctx", "128", "-o", out.string(), "--threads", "2"});
            EXPECT_EQ(r.exit_code, 0) << r.err;
            calibrate_out_ = r.out;
            file = out;
        }
        return file;
    }
    static inline std::string calibrate_out_;
    fs::path model_, text_;
};

// Every input's threshold leaves 40 % of its dense entries below it on the
// calibration text, counted over the same chunks by an independent pass.
TEST_F(Calibrate, ThresholdsZeroTheirShareOnTheirText) {
    const SparsityThresholds t = read_sparsity_thresholds(calibrated());
    EXPECT_NEAR(t.sparsity, 0.4, 1e-9);
    EXPECT_EQ(t.model, "stories260K");
    Runtime rt;
    auto model = Model::load(rt, model_);
    const auto tokens = model->tokenizer().encode(read_text_file(text_, "text"), true);
    std::map<std::string, std::pair<int64_t, int64_t>> count;  // below, total
    SessionOptions so;
    so.sparsity_recorder = [&](const std::string& key, std::span<const float> v) {
        auto& [below, total] = count[key];
        const float th = t.values.at(key);
        for (float x : v) below += std::fabs(x) < th;
        total += static_cast<int64_t>(v.size());
    };
    PerplexityOptions p;
    p.n_ctx = 128;
    perplexity(rt, model, tokens, p, so);
    ASSERT_EQ(count.size(), t.values.size());
    for (const auto& [key, c] : count) {
        ASSERT_GT(c.second, 0) << key;
        EXPECT_NEAR(static_cast<double>(c.first) / static_cast<double>(c.second), 0.4, 0.01) << key;
    }
    // The table has the asked sparsity in both modes.
    EXPECT_NE(calibrate_out_.find("| 0.40 | calibrated |"), std::string::npos) << calibrate_out_;
    EXPECT_NE(calibrate_out_.find("| 0.40 | per-token |"), std::string::npos) << calibrate_out_;
}

// bench, decoding text of its own, zeroes about the calibrated share.
TEST_F(Calibrate, BenchReportsTheAchievedSparsity) {
    const auto r =
        run_dwell({"bench", "-m", model_.string(), "-p", "8", "-n", "32", "-r", "1", "--threads",
                   "2", "--json", "--sparsity-thresholds", calibrated().string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json sp = nlohmann::json::parse(r.out).at("sparsity");
    EXPECT_EQ(sp.at("thresholds").get<std::string>(), calibrated().string());
    EXPECT_NEAR(sp.at("calibrated_for").get<double>(), 0.4, 1e-9);
    if (!sp.at("measured").get<bool>()) GTEST_SKIP() << "this backend does not count reads";
    EXPECT_NEAR(sp.at("achieved").get<double>(), 0.4, 0.1) << r.out;
}

// Logits of one prompt under `thresholds` (null: dense).
std::vector<float> logits(const fs::path& model_path,
                          std::shared_ptr<const SparsityThresholds> thresholds) {
    Runtime rt;
    auto model = Model::load(rt, model_path);
    SessionOptions so;
    so.sparsity_thresholds = std::move(thresholds);
    Session s(rt, model, so);
    const auto tokens = model->tokenizer().encode("Once upon a time there was a little dog", true);
    const auto out = s.decode(tokens, true);
    return {out.begin(), out.end()};
}

TEST_F(Calibrate, ZeroThresholdsEqualDenseAndLargeOnesDoNot) {
    auto zero = std::make_shared<SparsityThresholds>(read_sparsity_thresholds(calibrated()));
    auto large = std::make_shared<SparsityThresholds>(*zero);
    for (auto& [k, v] : zero->values) v = 0.0f;
    for (auto& [k, v] : large->values) v = 1e3f;  // every entry zeroed
    const auto dense = logits(model_, nullptr);
    const auto z = logits(model_, zero);
    ASSERT_EQ(dense.size(), z.size());
    for (size_t i = 0; i < dense.size(); ++i) ASSERT_EQ(dense[i], z[i]) << i;
    const auto l = logits(model_, large);
    size_t differ = 0;
    for (size_t i = 0; i < dense.size(); ++i) differ += dense[i] != l[i];
    EXPECT_GT(differ, dense.size() / 2);
}

TEST_F(Calibrate, BadFilesAreRefusedInOneLine) {
    const std::string good = read_text_file(calibrated(), "thresholds");
    TempDir dir;
    struct Case {
        std::string name, text, message;
        int exit_code;
    };
    std::string unknown = good;
    unknown += "\"blk.99.attn_q\" = 0.5\n";  // [thresholds] is the last table
    std::string other = good;
    const size_t w = other.find("weights = ");  // a quoted string follows
    ASSERT_NE(w, std::string::npos) << good;
    other.replace(w + 11, 16, "0123456789abcdef");
    std::string negative = good;
    negative += "\"blk.0.extra\" = -1.0\n";
    const std::vector<Case> cases = {
        {"malformed.toml", "model = [\n", "sparsity thresholds", 2},
        {"negative.toml", negative, "must be a finite number >= 0", 2},
        {"unknown.toml", unknown, "'blk.99.attn_q', no projection input of this model", 1},
        {"other.toml", other, "are for other weights", 1},
    };
    for (const Case& c : cases) {
        const fs::path p = dir.path() / c.name;
        write(p, c.text);
        const auto r = run_dwell({"run", "-m", model_.string(), "-p", "Once", "-n", "4",
                                  "--sparsity-thresholds", p.string()});
        EXPECT_EQ(r.exit_code, c.exit_code) << c.name << ": " << r.err;
        EXPECT_TRUE(one_line(r.err)) << c.name << ": " << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.name << ": " << r.err;
        EXPECT_EQ(r.out, "") << c.name;  // refused before generating
    }
}

TEST_F(Calibrate, BadFlagsExit2) {
    const fs::path t = calibrated();
    const std::vector<std::vector<std::string>> bad = {
        {"run", "-m", model_.string(), "-p", "x", "--sparsity", "0.4", "--sparsity-thresholds",
         t.string()},
        {"bench", "-m", model_.string(), "--sparsity-thresholds", "/nonexistent/t.toml"},
        {"calibrate", "-m", model_.string(), "-f", text_.string(), "-o", "/tmp/x.toml"},
        {"calibrate", "-m", model_.string(), "-f", text_.string(), "--sparsity", "1.5", "-o",
         "/tmp/x.toml"},
    };
    for (const auto& args : bad) {
        const auto r = run_dwell(args);
        EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args.back() << ": " << r.err;
        EXPECT_TRUE(one_line(r.err)) << r.err;
    }
}

// The manifest's [sparsity] thresholds, relative to the manifest's folder.
TEST_F(Calibrate, ManifestThresholds) {
    TempDir dir;
    fs::copy_file(calibrated(), dir.path() / "t.toml");
    write(dir.path() / "m.toml",
          "[[backend]]\nplugin = \"cpu\"\n[sparsity]\nthresholds = \"t.toml\"\n");
    const auto r = run_dwell({"bench", "-m", model_.string(), "-p", "4", "-n", "4", "-r", "1",
                              "--json", "--manifest", (dir.path() / "m.toml").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json sp = nlohmann::json::parse(r.out).at("sparsity");
    EXPECT_EQ(fs::path(sp.at("thresholds").get<std::string>()), dir.path() / "t.toml");
    write(dir.path() / "both.toml",
          "[[backend]]\nplugin = \"cpu\"\n[sparsity]\nfraction = 0.4\nthresholds = \"t.toml\"\n");
    const auto both = run_dwell({"bench", "-m", model_.string(), "-p", "4", "-n", "4", "-r", "1",
                                 "--manifest", (dir.path() / "both.toml").string()});
    EXPECT_NE(both.exit_code, 0);
    EXPECT_NE(both.err.find("both fraction and thresholds"), std::string::npos) << both.err;
}

}  // namespace
}  // namespace dwell::test
