// `dwell calibrate`: per-input activation-sparsity thresholds measured on a
// text (sparsity_thresholds.hpp), and a table of what they cost in quality
// next to per-token fractions, so a user can choose the sparsity.
//
// One dense pass over the text (perplexity's chunks) records every
// projection input's magnitudes; the threshold of an input for sparsity S
// is the magnitude below which a share S of its entries lie. Then one pass
// per sparsity in each mode measures PPL and KL divergence from the dense
// pass, and (calibrated) the share of the inputs that fell below their
// thresholds: upstream zeros move downstream inputs, so it is not S exactly.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "cli_common.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/config/sparsity_thresholds.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/platform/text_file.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/session/session_file.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/perplexity.hpp"

namespace dwell::cli {

namespace {

namespace fs = std::filesystem;

// Each input's sorted magnitudes over the text.
using Magnitudes = std::map<std::string, std::vector<float>>;

// The threshold under which floor(s * n) of the sorted values lie.
float threshold_at(const std::vector<float>& sorted, double s) {
    if (sorted.empty() || s <= 0) return 0.0f;
    const auto k = std::min(sorted.size() - 1, static_cast<size_t>(std::floor(s * sorted.size())));
    return sorted[k];
}

std::shared_ptr<SparsityThresholds> thresholds_for(const Magnitudes& m, double s,
                                                   const SparsityThresholds& meta) {
    auto t = std::make_shared<SparsityThresholds>(meta);
    t->sparsity = s;
    for (const auto& [key, v] : m) t->values[key] = threshold_at(v, s);
    return t;
}

// A file removed when it goes out of scope (the dense pass's
// log-probabilities, the base of every KL).
struct TempFile {
    fs::path path;
    ~TempFile() {
        std::error_code ec;
        fs::remove(path, ec);
    }
};

}  // namespace

int calibrate_command(const std::vector<std::string>& args) {
    CommonArgs common;
    std::string model_path, text_path, out_path;
    double sparsity = -1;
    int32_t n_ctx = 512, n_batch = 256;
    po::options_description desc("dwell calibrate");
    // clang-format off
    desc.add_options()
        ("model,m", po::value(&model_path)->required(), "model file (GGUF)")
        ("file,f", po::value(&text_path)->required(), "text to calibrate on (perplexity's chunks)")
        ("output,o", po::value(&out_path)->required(), "thresholds file to write (TOML), for --sparsity-thresholds")
        ("ctx,c", po::value(&n_ctx)->default_value(512), "tokens per chunk (even, >= 8)")
        ("batch,b", po::value(&n_batch)->default_value(256), "longest batch run in one graph");
    // clang-format on
    add_runtime_options(desc, common);
    // --sparsity is the share to calibrate for here, not a runtime setting.
    po::variables_map vm;
    if (!parse("calibrate", "-m MODEL -f TEXT --sparsity S -o FILE [--ctx N] [options]", desc, args,
               vm))
        return 0;
    set_verbosity(common.verbosity);
    sparsity = common.sparsity;
    if (sparsity == -1) throw po::error("--sparsity S is required: the share to calibrate for");
    if (!(sparsity > 0 && sparsity <= kMaxSparsity))
        throw po::error("--sparsity " + std::to_string(sparsity) + " must be in (0, 0.95]");
    if (!common.sparsity_thresholds.empty())
        throw po::error(
            "--sparsity-thresholds: calibrate writes thresholds, it does not read them");
    if (n_ctx < 8 || n_ctx % 2 != 0 || n_ctx > kSessionMaxContext) {
        throw po::error("--ctx " + std::to_string(n_ctx) + " must be even and within 8.." +
                        std::to_string(kSessionMaxContext));
    }
    if (n_batch < 1) throw po::error("--batch " + std::to_string(n_batch) + " must be at least 1");
    check_output_not_input({"-o", out_path}, {{"-m", model_path}, {"-f", text_path}});
    CommonArgs dense = common;
    dense.sparsity = -1;
    RuntimeOptions ro = runtime_options(dense);
    ro.sparsity = 0.0f;  // the sessions below say what they want

    const std::string text = read_text_file(text_path, "the text file (-f)");
    Runtime runtime(ro);
    auto model = Model::load(runtime, model_path);
    const std::vector<int32_t> tokens = model->tokenizer().encode(text, true);
    if (static_cast<int64_t>(tokens.size()) < n_ctx) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, text_path + ": " + std::to_string(tokens.size()) +
                                                    " tokens, --ctx " + std::to_string(n_ctx) +
                                                    " needs at least " + std::to_string(n_ctx) +
                                                    " (one chunk)");
    }
    SessionOptions so;
    so.n_batch = n_batch;
    so.prefix_cache = false;  // every pass computes its own pages
    PerplexityOptions popts;
    popts.n_ctx = n_ctx;

    // The dense pass: magnitudes and the KL base.
    TempFile base{fs::path(out_path).parent_path() /
                  (fs::path(out_path).filename().string() + ".base." + std::to_string(getpid()))};
    Magnitudes mags;
    int64_t n_recorded_tokens = 0;
    {
        SessionOptions rec = so;
        rec.sparsity_fraction = 0.0f;
        rec.sparsity_recorder = [&](const std::string& key, std::span<const float> v) {
            auto& dst = mags[key];
            for (const float x : v) dst.push_back(std::fabs(x));
        };
        PerplexityOptions p = popts;
        p.kl_base_save = base.path;
        const PerplexityResult r = perplexity(runtime, model, tokens, p, rec);
        n_recorded_tokens = static_cast<int64_t>(r.n_chunks) * r.n_ctx;
        std::printf("dense: PPL = %.4f over %lld predictions, %zu projection inputs recorded\n",
                    r.ppl.mean, static_cast<long long>(r.n_scored), mags.size());
    }
    for (auto& [key, v] : mags) std::sort(v.begin(), v.end());

    SparsityThresholds meta;
    meta.model = model->path().stem().string();
    char fp[17];
    std::snprintf(fp, sizeof fp, "%016llx",
                  static_cast<unsigned long long>(session_weights_fingerprint(*model)));
    meta.weights = fp;
    meta.tokens = n_recorded_tokens;

    std::vector<double> levels = {0.25, 0.4, 0.5, sparsity};
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end(),
                             [](double a, double b) { return std::fabs(a - b) < 1e-9; }),
                 levels.end());

    std::printf(
        "\n| sparsity | mode | inputs zeroed | PPL | ln(PPL / dense) | KL (dense || sparse) | same "
        "top token |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    for (const double s : levels) {
        for (const bool calibrated : {true, false}) {
            SessionOptions run = so;
            std::shared_ptr<SparsityThresholds> t;
            int64_t below = 0, total = 0;
            if (calibrated) {
                t = thresholds_for(mags, s, meta);
                run.sparsity_thresholds = t;
                run.sparsity_recorder = [&](const std::string& key, std::span<const float> v) {
                    const float th = t->values.at(key);
                    for (const float x : v) below += std::fabs(x) < th;
                    total += static_cast<int64_t>(v.size());
                };
            } else {
                run.sparsity_fraction = static_cast<float>(s);
            }
            PerplexityOptions p = popts;
            p.kl_base = base.path;
            const PerplexityResult r = perplexity(runtime, model, tokens, p, run);
            const KlDivergence& kl = *r.kl;
            char zeroed[32];
            if (calibrated)
                std::snprintf(zeroed, sizeof zeroed, "%.1f %%",
                              total ? 100.0 * static_cast<double>(below) / total : 0.0);
            else
                std::snprintf(zeroed, sizeof zeroed, "%.1f %% per token", 100.0 * s);
            std::printf("| %.2f | %s | %s | %.4f | %.4f | %.4f | %.1f %% |\n", s,
                        calibrated ? "calibrated" : "per-token", zeroed, r.ppl.mean,
                        kl.log_ratio.mean, std::max(0.0, kl.kld.mean), 100 * kl.same_top.mean);
            std::fflush(stdout);
        }
    }
    write_sparsity_thresholds(out_path, *thresholds_for(mags, sparsity, meta));
    std::printf("\nwrote %zu thresholds for sparsity %.2f to %s (use: --sparsity-thresholds %s)\n",
                mags.size(), sparsity, out_path.c_str(), out_path.c_str());
    return 0;
}

}  // namespace dwell::cli
