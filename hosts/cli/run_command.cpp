// `dwell run`: generate text, streamed to stdout token by token; speed on stderr.
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <iostream>
#include <random>

#include "cli_common.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/llm/generate.hpp"
#include "dwell/core/llm/sampler.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/progress_bar.hpp"
#include "stop_signals.hpp"

namespace dwell::cli {

namespace {

int generate_text(StopSignals& stop, const RuntimeOptions& ro, const std::string& model_path,
                  const SessionOptions& so, const SamplerParams& sp, const std::string& prompt,
                  int32_t n_predict, bool no_echo, bool print_ids, bool interactive,
                  int verbosity) {
    Runtime runtime(ro);
    auto model = Model::load(runtime, model_path, terminal_load_progress());
    Session session(runtime, model, so);
    const auto hooked = stop.hook([&session](int) {
        session.cancel();
        return true;
    });
    if (stop.stopped_by()) return stop.exit_code();  // a signal came while loading
    Sampler sampler(sp);

    const Tokenizer& tok = model->tokenizer();
    const std::vector<int32_t> ids = tok.encode(prompt, true);
    // The prompt is echoed once its evaluation succeeded, so an error is
    // never printed glued to it.
    bool echoed = no_echo || print_ids;
    auto echo = [&] {
        if (echoed) return;
        std::fwrite(prompt.data(), 1, prompt.size(), stdout);
        echoed = true;
    };
    // With a prompt the continuation keeps its leading space; from BOS alone
    // the first piece's dummy-prefix space is dropped, as in decode().
    StreamDecoder stream(tok, prompt.empty());
    // The last token generate() hands out is not in the session yet: the
    // next line goes in after it, or the text would skip a token each turn.
    int32_t pending = -1;
    bool first_id = true;
    const GenerationStats stats = generate(session, ids, n_predict, sampler, [&](int32_t token) {
        pending = token;
        if (print_ids) {
            // Ids, not text: runs compared token for token (a synthetic
            // model's reserved tokens print as nothing).
            std::fprintf(stdout, first_id ? "%d" : ",%d", token);
            first_id = false;
            std::fflush(stdout);
            return true;
        }
        echo();
        const std::string text = stream.push(token);
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
    });
    if (stats.stopped_at_eos) pending = -1;  // its last token was fed before EOS came
    echo();
    const std::string rest = print_ids ? std::string() : stream.finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (interactive) {
        // The conversation goes on in the same session: its KV cache holds
        // everything so far, on whichever backend computes next.
        for (std::string line;;) {
            {
                const StopSignals::Reading reading(stop);
                if (stop.stopped_by() || !std::getline(std::cin, line)) break;
            }
            if (line == "/quit") break;
            if (line.rfind("/backend", 0) == 0) {
                const std::string name = line.size() > 9 ? line.substr(9) : "";
                try {
                    session.use_backend(name);
                    std::fprintf(stderr, "backend: %s\n", name.c_str());
                } catch (const Error& e) {
                    std::fprintf(stderr, "dwell run: %s\n", e.what());
                }
                continue;
            }
            std::vector<int32_t> next;
            if (pending >= 0) next.push_back(pending);
            const std::vector<int32_t> typed = tok.encode(line, false);
            next.insert(next.end(), typed.begin(), typed.end());
            if (next.empty()) continue;  // an empty line with nothing pending adds nothing
            StreamDecoder more(tok, false);
            pending = -1;
            const GenerationStats turn =
                generate(session, next, n_predict, sampler, [&](int32_t token) {
                    pending = token;
                    const std::string text = more.push(token);
                    std::fwrite(text.data(), 1, text.size(), stdout);
                    std::fflush(stdout);
                    return true;
                });
            if (turn.stopped_at_eos) pending = -1;
            const std::string tail = more.finish();
            std::fwrite(tail.data(), 1, tail.size(), stdout);
            std::fputc('\n', stdout);
            std::fflush(stdout);
        }
    }

    std::fprintf(stderr,
                 "prompt: %d tokens in %.3f s (%.1f tok/s) | generation: %d tokens in %.3f s (%.1f "
                 "tok/s)%s\n",
                 stats.n_prompt, stats.prompt_seconds, stats.prompt_tokens_per_second(),
                 stats.n_generated, stats.generation_seconds, stats.generation_tokens_per_second(),
                 stats.stopped_at_eos ? " | stopped at end of sequence"
                 : stats.stopped_at_context
                     ? " | stopped: the context is full (raise --ctx, or --ctx-full shift)"
                     : "");
    if (verbosity > 0) {
        const PoolStats pool = runtime.pool().stats();
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        std::fprintf(stderr, "memory: pool peak %s (KV cache %s), weights %s, peak RSS %s\n",
                     format_bytes(pool.peak_used_bytes).c_str(),
                     format_bytes(session.kv_cache().bytes()).c_str(),
                     format_bytes(model->weight_bytes()).c_str(),
                     format_bytes(static_cast<uint64_t>(usage.ru_maxrss) * 1024).c_str());
        if (const WeightStreamer* ws = model->streamer()) {
            const WeightStreamStats w = ws->stats();
            std::fprintf(stderr,
                         "%s; read %s, decompressed %s; compute %.2f s, waiting for weights "
                         "%.2f s\n",
                         ws->describe().c_str(), format_bytes(w.bytes_read).c_str(),
                         format_bytes(w.bytes_decompressed).c_str(), w.compute_seconds,
                         w.wait_seconds);
            if (w.moe_layers > 0) {
                const auto pct = [&](uint64_t n) {
                    return w.experts_needed ? 100.0 * static_cast<double>(n) /
                                                  static_cast<double>(w.experts_needed)
                                            : 0.0;
                };
                std::fprintf(
                    stderr,
                    "experts: %llu needed, %.1f%% cache hits (%.1f%% read ahead by "
                    "the prefetcher), %llu demand misses; prefetched %llu (%.1f%% "
                    "used; the prediction held %.1f%% of the experts needed); %s of experts "
                    "read, waited %.2f s\n",
                    static_cast<unsigned long long>(w.experts_needed), pct(w.expert_hits),
                    pct(w.expert_prefetch_hits), static_cast<unsigned long long>(w.expert_misses),
                    static_cast<unsigned long long>(w.expert_prefetches),
                    w.expert_prefetches ? 100.0 * static_cast<double>(w.expert_prefetch_hits) /
                                              static_cast<double>(w.expert_prefetches)
                                        : 0.0,
                    w.experts_predictable ? 100.0 * static_cast<double>(w.experts_predicted) /
                                                static_cast<double>(w.experts_predictable)
                                          : 0.0,
                    format_bytes(w.expert_bytes_read).c_str(), w.expert_wait_seconds);
            }
        }
    }
    return stop.stopped_by() ? stop.exit_code() : 0;
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
    CommonArgs common;
    std::string model_path, prompt, kv_type, ctx_full = "stop";
    int32_t n_predict = 128, n_ctx = 0, n_keep = 0;
    bool no_echo = false;
    bool print_ids = false;
    bool interactive = false;
    SamplerParams sp;
    int64_t seed = -1;
    po::options_description desc("dwell run");
    // clang-format off
    desc.add_options()
        ("model,m", po::value(&model_path)->required(), "model file (GGUF)")
        ("prompt,p", po::value(&prompt)->default_value(""), "prompt text (empty: start from BOS)")
        ("n-predict,n", po::value(&n_predict)->default_value(128), "tokens to generate")
        ("ctx,c", po::value(&n_ctx)->default_value(0), "context size (0: the model's)")
        ("kv-type", po::value(&kv_type), "KV-cache type: f16, q8_0, fp8_e4m3 or f32 (default: the manifest's [kv] dtype)")
        ("ctx-full", po::value(&ctx_full)->default_value("stop"), "when the context is full: stop, or shift (drop the older half after --keep tokens)")
        ("keep", po::value(&n_keep)->default_value(0), "tokens at the start a context shift never drops")
        ("temp", po::value(&sp.temperature)->default_value(0.8f, "0.8"), "temperature (0: greedy)")
        ("top-k", po::value(&sp.top_k)->default_value(40), "top-k (0: off)")
        ("top-p", po::value(&sp.top_p)->default_value(0.95f, "0.95"), "top-p (1: off)")
        ("min-p", po::value(&sp.min_p)->default_value(0.05f, "0.05"), "min-p (0: off)")
        ("repeat-penalty", po::value(&sp.repeat_penalty)->default_value(1.0f, "1.0"), "repetition penalty (1: off)")
        ("repeat-last-n", po::value(&sp.repeat_last_n)->default_value(64), "tokens the penalty looks back over")
        ("seed", po::value(&seed)->default_value(-1), "sampling seed (-1: random)")
        ("no-echo", po::bool_switch(&no_echo), "do not print the prompt before the generated text")
        ("print-ids", po::bool_switch(&print_ids), "print the generated token ids, comma-separated, instead of text (to compare runs token for token)")
        ("interactive,i", po::bool_switch(&interactive), "then read lines from stdin, each continuing the text (up to -n tokens); /backend NAME prefers another selected backend from then on, /quit ends");
    // clang-format on
    add_runtime_options(desc, common);
    po::variables_map vm;
    if (!parse("run", "-m MODEL [-p PROMPT] [-n N] [options]", desc, args, vm)) return 0;
    set_verbosity(common.verbosity);
    // Every option is checked before anything loads: a typo costs no model load.
    check_count(n_predict, "--n-predict", 0);
    check_ctx(n_ctx);
    check_sampling(sp);
    check_seed(seed);
    check_ctx_full(ctx_full);
    if (print_ids && interactive)
        throw po::error("--print-ids is for one generation, not --interactive");
    if (n_keep < 0) throw po::error("--keep " + std::to_string(n_keep) + " must be >= 0");
    if (n_ctx > 0 && n_keep >= n_ctx) {
        throw po::error("--keep " + std::to_string(n_keep) + " must be below --ctx " +
                        std::to_string(n_ctx));
    }
    SessionOptions so;
    if (!kv_type.empty()) so.kv_dtype = parse_kv_type(kv_type);
    so.n_ctx = n_ctx;
    so.on_full = ctx_full == "shift" ? ContextFull::Shift : ContextFull::Stop;
    so.n_keep = n_keep;
    sp.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
    const RuntimeOptions ro = runtime_options(common);

    // Ctrl-C and SIGTERM cancel the generation, so that the runtime's
    // destructors run: the thermal governor restores a devfreq cap it set.
    StopSignals stop({SIGINT, SIGTERM});
    try {
        return generate_text(stop, ro, model_path, so, sp, prompt, n_predict, no_echo, print_ids,
                             interactive, common.verbosity);
    } catch (const Error& e) {
        if (e.status() != DWELL_ERR_CANCELLED || !stop.stopped_by()) throw;
        std::fputc('\n', stdout);
        std::fflush(stdout);
        return stop.exit_code();
    }
}

}  // namespace dwell::cli
