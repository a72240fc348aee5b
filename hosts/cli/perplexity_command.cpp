// `dwell perplexity`: the perplexity of a model on a text file, measured as
// llama-perplexity does (see dwell/core/perplexity.hpp), so the figures can
// be compared with llama.cpp's; optionally the KL divergence from a base run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli_common.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/platform/text_file.hpp"
#include "dwell/core/session/session_file.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/perplexity.hpp"
#include "dwell/tools/progress_bar.hpp"

namespace dwell::cli {

int perplexity_command(const std::vector<std::string>& args) {
    CommonArgs common;
    std::string model_path, text_path, kv_type, base_save, base;
    int32_t n_ctx = 512, n_batch = 256;
    po::options_description desc("dwell perplexity");
    // clang-format off
    desc.add_options()
        ("model,m", po::value(&model_path)->required(), "model file (GGUF)")
        ("file,f", po::value(&text_path)->required(), "text file to measure on")
        ("ctx,c", po::value(&n_ctx)->default_value(512), "tokens per chunk (even, >= 8); the second half of each is scored")
        ("batch,b", po::value(&n_batch)->default_value(256), "longest batch run in one graph")
        ("kv-type", po::value(&kv_type), "KV-cache type: f16, q8_0, fp8_e4m3 or f32 (default: the manifest's [kv] dtype)")
        ("kl-base-save", po::value(&base_save), "write this run's log-probabilities to FILE, as a base for --kl-base")
        ("kl-base", po::value(&base), "compare with the base in FILE: KL divergence, same top token, both PPLs");
    // clang-format on
    add_runtime_options(desc, common);
    po::variables_map vm;
    if (!parse("perplexity", "-m MODEL -f TEXT [--ctx N] [options]", desc, args, vm)) return 0;
    set_verbosity(common.verbosity);
    if (n_ctx < 8 || n_ctx % 2 != 0 || n_ctx > kSessionMaxContext) {
        throw po::error("--ctx " + std::to_string(n_ctx) + " must be even and within 8.." +
                        std::to_string(kSessionMaxContext));
    }
    if (n_batch < 1) throw po::error("--batch " + std::to_string(n_batch) + " must be at least 1");
    SessionOptions so;
    so.n_batch = n_batch;
    if (!kv_type.empty()) so.kv_dtype = parse_kv_type(kv_type);
    if (!base.empty()) check_input_file({"--kl-base", base}, "write one with --kl-base-save");
    const RuntimeOptions ro = runtime_options(common);
    check_output_not_input({"--kl-base-save", base_save}, {{"-m", model_path},
                                                           {"-f", text_path},
                                                           {"--kl-base", base},
                                                           {"--manifest", common.manifest},
                                                           {"--getprop", common.getprop}});

    const std::string text = read_text_file(text_path, "the text file (-f)");
    Runtime runtime(ro);
    auto model = Model::load(runtime, model_path, terminal_load_progress());
    const std::vector<int32_t> tokens = model->tokenizer().encode(text, true);
    if (static_cast<int64_t>(tokens.size()) < n_ctx) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, text_path + ": " + std::to_string(tokens.size()) +
                                                    " tokens, --ctx " + std::to_string(n_ctx) +
                                                    " needs at least " + std::to_string(n_ctx) +
                                                    " (one chunk)");
    }
    const ChunkLayout layout = chunk_layout(static_cast<int64_t>(tokens.size()), n_ctx);

    PerplexityOptions popts;
    popts.n_ctx = n_ctx;
    popts.kl_base_save = base_save;
    popts.kl_base = base;
    PerplexityResult r;
    {
        ProgressBar bar("perplexity", layout.n_chunks);
        popts.progress = [&bar](int32_t done, int32_t) { bar.update(done); };
        r = perplexity(runtime, model, tokens, popts, so);
    }

    if (common.verbosity > 0) {
        std::fprintf(stderr, "chunk PPL:");
        for (size_t i = 0; i < r.chunk_nll.size(); ++i) {
            std::fprintf(stderr, " [%zu]%.4f", i + 1, std::exp(r.chunk_nll[i]));
        }
        std::fprintf(stderr, "\n");
    }
    const double evaluated = static_cast<double>(r.n_chunks) * r.n_ctx;
    std::printf("%d chunks of %d tokens, %lld predictions scored, %.2f s (%.1f tok/s)\n",
                r.n_chunks, r.n_ctx, static_cast<long long>(r.n_scored), r.seconds,
                r.seconds > 0 ? evaluated / r.seconds : 0.0);
    if (r.kl) {
        const KlDivergence& kl = *r.kl;
        std::printf("base PPL = %.4f +/- %.5f (%s)\n", kl.base_ppl.mean, kl.base_ppl.error,
                    base.c_str());
        std::printf("ln(PPL/base PPL) = %.6f +/- %.6f\n", kl.log_ratio.mean, kl.log_ratio.error);
        // KL is never negative; a mean below 0 is f32 rounding of the stored
        // base, and "-0.000000" would read as a defect.
        std::printf("KL divergence (base || model) = %.6f +/- %.6f\n", std::max(0.0, kl.kld.mean),
                    kl.kld.error);
        std::printf("same top token = %.3f +/- %.3f %%\n", 100 * kl.same_top.mean,
                    100 * kl.same_top.error);
    }
    if (!base_save.empty()) std::printf("wrote the KL base to %s\n", base_save.c_str());
    std::printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl.mean, r.ppl.error);
    return 0;
}

}  // namespace dwell::cli
