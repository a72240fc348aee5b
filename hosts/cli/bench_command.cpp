// `dwell bench`: prompt-processing and generation speed, measured as
// llama-bench's pp and tg tests are, so the figures can be set beside it.
// The model is loaded once; each repetition gets a fresh session, so every
// run starts from an empty KV cache.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "cli_common.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/progress_bar.hpp"
#include "dwell/tools/svg_plot.hpp"
#include "dwell/tools/thermal_plant.hpp"

namespace dwell::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Spread {
    double median = 0, min = 0, max = 0;
};

Spread spread(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return {median, v.front(), v.back()};
}

int32_t argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// BOS, then ids from a fixed seed: the same prompt on every run and every
// machine, independent of the tokenizer, so no text shapes the timing.
std::vector<int32_t> prompt_ids(const Tokenizer& tok, int32_t n_vocab, int32_t n) {
    std::vector<int32_t> ids;
    ids.reserve(static_cast<size_t>(n));
    const int32_t bos = tok.bos();
    if (bos >= 0 && bos < n_vocab) ids.push_back(bos);
    std::mt19937 rng(12345);
    while (static_cast<int32_t>(ids.size()) < n) {
        ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab)));
    }
    return ids;
}

// The thread count the CPU backend was given, resolved as the runtime does.
int32_t effective_threads(const Runtime& runtime, const CommonArgs& common) {
    if (common.threads > 0) return common.threads;
    for (const auto& b : runtime.backends()) {
        if (b->device_info().kind != DWELL_DEVICE_CPU) continue;
        const auto it = b->entry().options.find("threads");
        if (it != b->entry().options.end()) return std::stoi(it->second);
    }
    if (runtime.manifest().cpu.threads > 0) return runtime.manifest().cpu.threads;
    return static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
}

// Decode reads every weight once per token except the embedding table, of
// which it reads one row, unless the table doubles as the output matrix.
uint64_t weight_bytes_per_token(const Model& model) {
    uint64_t bytes = model.weight_bytes();
    const dwell_tensor* embd = model.weight("token_embd.weight");
    if (embd && model.weight("output.weight") && embd->n_dims == 2) {
        const uint64_t table = embd->nb[1] * static_cast<uint64_t>(embd->ne[1]);
        if (table <= bytes) bytes = bytes - table + embd->nb[1];
    }
    return bytes;
}

struct Repetition {
    double prefill_seconds = 0;
    double ttft_seconds = 0;
    double decode_seconds = 0;
};

// Device time per op kind from every backend that keeps it (ABI 1.2
// op_times); `reset` starts the backends' counts over.
nlohmann::json backend_profile(const Runtime& runtime, bool reset) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& b : runtime.backends()) {
        const dwell_backend_plugin& api = b->api();
        if (!DWELL_HAS_FIELD(&api, dwell_backend_plugin, op_times) || api.op_times == nullptr) {
            out[b->label()] = "no per-op times";
            continue;
        }
        std::lock_guard lock(b->mutex());
        std::vector<dwell_op_time> times(DWELL_OP_COUNT);
        size_t n = times.size();
        if (api.op_times(b->context(), times.data(), &n, reset ? 1 : 0) != DWELL_OK) continue;
        times.resize(std::min(n, times.size()));
        std::sort(times.begin(), times.end(), [](const dwell_op_time& a, const dwell_op_time& c) {
            return a.seconds > c.seconds;
        });
        nlohmann::json ops = nlohmann::json::array();
        for (const dwell_op_time& t : times) {
            nlohmann::json o = nlohmann::json::object();
            o["op"] = dwell_op_name(t.op);
            o["count"] = t.count;
            o["ms"] = 1e3 * t.seconds;
            ops.push_back(std::move(o));
        }
        out[b->label()] = ops;
    }
    return out;
}

// What the backends' matmuls read of their weights since the last reset,
// summed over the backends that count it (ABI 1.9 weight_reads); `counted`
// says whether any does.
struct WeightReads {
    bool counted = false;
    uint64_t bytes_read = 0, bytes_dense = 0, inputs = 0, inputs_zero = 0;
};

WeightReads weight_reads(const Runtime& runtime, bool reset) {
    WeightReads r;
    for (const auto& b : runtime.backends()) {
        const dwell_backend_plugin& api = b->api();
        if (!DWELL_HAS_FIELD(&api, dwell_backend_plugin, weight_reads) ||
            api.weight_reads == nullptr)
            continue;
        std::lock_guard lock(b->mutex());
        dwell_weight_reads w{};
        w.struct_size = sizeof w;
        if (api.weight_reads(b->context(), &w, reset ? 1 : 0) != DWELL_OK) continue;
        r.counted = true;
        r.bytes_read += w.bytes_read;
        r.bytes_dense += w.bytes_dense;
        r.inputs += w.inputs;
        r.inputs_zero += w.inputs_zero;
    }
    return r;
}

void add_reads(WeightReads& sum, const WeightReads& r) {
    sum.counted = sum.counted || r.counted;
    sum.bytes_read += r.bytes_read;
    sum.bytes_dense += r.bytes_dense;
    sum.inputs += r.inputs;
    sum.inputs_zero += r.inputs_zero;
}

// The sparsity asked for and achieved over the timed decodes, and the weight
// bytes per decoded token the kernels read (and would have read dense).
nlohmann::json sparsity_json(const Runtime& runtime, const WeightReads& r, int64_t tokens) {
    nlohmann::json j = {{"fraction", runtime.manifest().sparsity.fraction}};
    // Calibrated (--sparsity-thresholds): the file and the share it was
    // calibrated for; `achieved` then says what the decoded text got.
    if (const SparsityThresholds* t = runtime.sparsity_thresholds()) {
        j["thresholds"] = runtime.manifest().sparsity.thresholds.string();
        j["calibrated_for"] = t->sparsity;
    }
    if (!r.counted) {
        j["measured"] = false;
        return j;
    }
    const double n = static_cast<double>(std::max<int64_t>(tokens, 1));
    j["measured"] = true;
    j["achieved"] =
        r.inputs > 0 ? static_cast<double>(r.inputs_zero) / static_cast<double>(r.inputs) : 0.0;
    j["weight_bytes_per_token"] = static_cast<uint64_t>(static_cast<double>(r.bytes_read) / n);
    j["dense_weight_bytes_per_token"] =
        static_cast<uint64_t>(static_cast<double>(r.bytes_dense) / n);
    return j;
}

// The weight residency and, when streamed, what the timed decodes cost in
// reads: per token, and how much of the reader's time hid behind compute.
nlohmann::json weights_json(const Runtime& runtime, const WeightStreamer* streamer,
                            const WeightStreamStats& io, int64_t tokens) {
    const auto& mem = runtime.manifest().memory;
    nlohmann::json j = {{"mode", mem.weights}};
    if (streamer == nullptr) return j;
    const WeightStreamStats s = streamer->stats();
    const double n = static_cast<double>(std::max<int64_t>(tokens, 1));
    const double busy = io.read_seconds + io.decompress_seconds;
    j["budget_bytes"] = mem.weight_budget_bytes;
    j["resident_bytes"] = s.resident_bytes;
    j["pinned_bytes"] = s.pinned_bytes;
    j["streamed_bytes_per_pass"] = s.streamed_bytes;
    j["units"] = s.units;
    j["pinned_units"] = s.pinned_units;
    j["slots"] = s.slots;
    j["prefetch"] = s.prefetch;
    j["direct_io"] = s.direct_io;
    j["read_bytes_per_token"] = static_cast<uint64_t>(static_cast<double>(io.bytes_read) / n);
    j["decompressed_bytes_per_token"] =
        static_cast<uint64_t>(static_cast<double>(io.bytes_decompressed) / n);
    j["compute_ms_per_token"] = 1e3 * io.compute_seconds / n;
    j["wait_ms_per_token"] = 1e3 * io.wait_seconds / n;
    j["read_ms_per_token"] = 1e3 * io.read_seconds / n;
    j["decompress_ms_per_token"] = 1e3 * io.decompress_seconds / n;
    j["demand_reads_per_token"] = static_cast<double>(io.demand_reads) / n;
    // Reader time while the computing thread computed (was not waiting on
    // it), as a share of the shorter of the two: 1 means the cheaper of
    // reading and computing was hidden behind the other entirely.
    const double hidden = std::max(busy - io.wait_seconds, 0.0);
    const double shorter = std::min(busy, io.compute_seconds);
    j["overlap"] = shorter > 0 ? std::clamp(hidden / shorter, 0.0, 1.0) : 1.0;
    if (s.moe_layers > 0) {
        const auto share = [](uint64_t a, uint64_t b) {
            return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
        };
        j["experts"] = {
            {"moe_layers", s.moe_layers},
            {"experts_per_layer", s.n_expert},
            {"cache_slots", s.expert_slots},
            {"cache_bytes", s.expert_slot_bytes * static_cast<uint64_t>(s.expert_slots)},
            {"slot_bytes", s.expert_slot_bytes},
            {"prefetch_margin", s.expert_margin},
            {"readers", s.expert_readers},
            {"needed_per_token", static_cast<double>(io.experts_needed) / n},
            {"hits_per_token", static_cast<double>(io.expert_hits) / n},
            {"prefetch_hits_per_token", static_cast<double>(io.expert_prefetch_hits) / n},
            {"misses_per_token", static_cast<double>(io.expert_misses) / n},
            {"prefetches_per_token", static_cast<double>(io.expert_prefetches) / n},
            {"bytes_read_per_token",
             static_cast<uint64_t>(static_cast<double>(io.expert_bytes_read) / n)},
            {"wait_ms_per_token", 1e3 * io.expert_wait_seconds / n},
            {"hit_rate", share(io.expert_hits, io.experts_needed)},
            {"prefetch_hit_rate", share(io.expert_prefetch_hits, io.experts_needed)},
            {"prefetch_precision", share(io.expert_prefetch_hits, io.expert_prefetches)},
            {"prediction_recall", share(io.experts_predicted, io.experts_predictable)},
            {"cumulative",
             {{"needed", s.experts_needed},
              {"hits", s.expert_hits},
              {"prefetch_hits", s.expert_prefetch_hits},
              {"misses", s.expert_misses},
              {"prefetches", s.expert_prefetches},
              {"bytes_read", s.expert_bytes_read}}}};
    }
    return j;
}

// The options of `dwell bench --thermal-sim`, checked.
struct ThermalSimArgs {
    double minutes = 10, noise = 0;
    std::string csv_path, svg_path;  // empty: not written
    ThermalConfig config;            // the manifest defaults, --target and --limit applied
};

// Parses and checks the options (po::error naming the flag); nullopt when
// --help was printed.
std::optional<ThermalSimArgs> parse_thermal_sim_args(const std::vector<std::string>& args) {
    ThermalSimArgs a;
    double target = 0, limit = 0;
    bool sim = false;
    po::options_description desc("dwell bench --thermal-sim");
    // clang-format off
    desc.add_options()
        ("thermal-sim", po::bool_switch(&sim), "simulate the thermal governor (no model)")
        ("minutes", po::value(&a.minutes)->default_value(10), "simulated minutes of continuous generation")
        ("csv", po::value(&a.csv_path), "write the time series here, one row per period per policy")
        ("svg", po::value(&a.svg_path), "write a plot of temperature and tok/s here")
        ("target", po::value(&target), "target temperature, C (default: the manifest default, 42)")
        ("limit", po::value(&limit), "hard limit, C (default: the manifest default, 48)")
        ("noise", po::value(&a.noise)->default_value(0), "sensor noise, C (standard deviation, seeded)");
    // clang-format on
    po::variables_map vm;
    if (!parse("bench", "--thermal-sim [--minutes 10] [--csv FILE] [--svg FILE]", desc, args, vm)) {
        return std::nullopt;
    }
    a.config = thermal_sim_config();
    if (vm.count("target")) a.config.target_c = target;
    if (vm.count("limit")) a.config.limit_c = limit;
    if (a.config.limit_c <= a.config.target_c) {
        throw po::error("--limit " + std::to_string(a.config.limit_c) + " must be above --target " +
                        std::to_string(a.config.target_c));
    }
    if (!(a.minutes > 0) || a.minutes > 24 * 60) {
        throw po::error("--minutes " + std::to_string(a.minutes) + " must be in (0, 1440]");
    }
    if (a.noise < 0) throw po::error("--noise must be >= 0");
    return a;
}

// A policy's trace as CSV rows (policy,t_s,temp_c,tok_s,...).
void append_csv_rows(std::ostringstream& csv, const std::string& name,
                     const std::vector<ThermalSample>& trace) {
    char row[256];
    for (const ThermalSample& x : trace) {
        std::snprintf(row, sizeof row, "%s,%.1f,%.3f,%.3f,%.3f,%.3f,%d,%d,%.1f\n", name.c_str(),
                      x.t_s, x.temp_c, x.tok_s, x.actions.duty, x.actions.thread_share,
                      x.actions.freq_capped ? 1 : 0, x.actions.offloaded ? 1 : 0, x.tokens_total);
        csv << row;
    }
}

// A policy's trace as the plot's temperature and tok/s series.
void add_series(SvgPanel& temp_panel, SvgPanel& tok_panel, const std::string& name,
                const char* color, const std::vector<ThermalSample>& trace) {
    SvgSeries temp{name, color, {}, {}}, tok{name, color, {}, {}};
    for (const ThermalSample& x : trace) {
        temp.x.push_back(x.t_s);
        temp.y.push_back(x.temp_c);
        tok.x.push_back(x.t_s);
        tok.y.push_back(x.tok_s);
    }
    temp_panel.series.push_back(std::move(temp));
    tok_panel.series.push_back(std::move(tok));
}

nlohmann::json policy_summary_json(const ThermalSimSummary& s, double tail) {
    return {{"max_temp_c", s.max_temp_c},
            {"seconds_above_limit", s.seconds_above_limit},
            {"tail_seconds", tail},
            {"tail_mean_abs_error_c", s.tail_mean_abs_error_c},
            {"tail_max_abs_error_c", s.tail_max_abs_error_c},
            {"tail_swing_c", s.tail_swing_c},
            {"tail_stops", s.tail_stops},
            {"tokens", s.tokens},
            {"mean_tok_s", s.mean_tok_s}};
}

// The target and the limit, dashed, across the temperature panel.
void add_target_and_limit_lines(SvgPanel& temp_panel, const ThermalConfig& config, double seconds) {
    for (const auto& [label, value, color] : {std::tuple{"target", config.target_c, "#2ca02c"},
                                              std::tuple{"limit", config.limit_c, "#7f7f7f"}}) {
        char text[48];
        std::snprintf(text, sizeof text, "%s %.0f C", label, value);
        temp_panel.series.push_back({text, color, {0.0, seconds}, {value, value}, true});
    }
}

std::string thermal_plot_title(double minutes, const ThermalConfig& config) {
    char title[160];
    std::snprintf(title, sizeof title,
                  "dwell thermal governor, simulated phone: %.0f min of generation, target %.0f C, "
                  "limit %.0f C",
                  minutes, config.target_c, config.limit_c);
    return title;
}

// `dwell bench --thermal-sim`: the thermal governor on a simulated phone
// (ThermalPlant), no model needed. Runs the three policies for the same
// minutes of continuous generation; writes every period to a CSV, draws
// temperature and tok/s in an SVG, prints a JSON summary per policy on
// stdout and a table on stderr.
int thermal_sim_bench(const std::vector<std::string>& args) {
    const std::optional<ThermalSimArgs> parsed = parse_thermal_sim_args(args);
    if (!parsed) return 0;
    const ThermalSimArgs& a = *parsed;
    const ThermalConfig& config = a.config;
    ThermalPlantParams plant;
    plant.sensor_noise_c = a.noise;
    const double seconds = a.minutes * 60;
    // The steadiness figures look at the last half, at most 5 minutes: after
    // the initial approach.
    const double tail = std::min(300.0, seconds / 2);

    const ThermalSimPolicy policies[] = {ThermalSimPolicy::off, ThermalSimPolicy::stop_and_go,
                                         ThermalSimPolicy::dwell};
    const char* colors[] = {"#d62728", "#ff7f0e", "#1f77b4"};
    // Files only when asked: a run for the summary leaves nothing behind.
    check_output_not_input({"--svg", a.svg_path}, {{"--csv", a.csv_path}});
    std::optional<OutputFile> csv_file;
    std::ostringstream csv;
    if (!a.csv_path.empty()) {
        // Refused before the simulation when the path cannot take the file.
        csv_file.emplace(a.csv_path);
        csv << "policy,t_s,temp_c,tok_s,duty,thread_share,freq_capped,offloaded,tokens_total\n";
    }
    SvgPanel temp_panel{"Hottest device temperature", "time (s)", "temperature (C)", {}};
    SvgPanel tok_panel{"Generation speed", "time (s)", "tokens/s", {}};
    nlohmann::json summary = nlohmann::json::object();
    std::fprintf(stderr, "%-12s %8s %10s %10s %10s %10s %10s\n", "policy", "max C", "above s",
                 "|err| C", "swing C", "tokens", "tok/s");
    for (size_t k = 0; k < std::size(policies); ++k) {
        const std::vector<ThermalSample> trace =
            run_thermal_sim(plant, config, policies[k], seconds);
        const std::string name = thermal_sim_policy_name(policies[k]);
        if (csv_file) append_csv_rows(csv, name, trace);
        add_series(temp_panel, tok_panel, name, colors[k], trace);
        const ThermalSimSummary s = summarize_thermal_sim(trace, config, tail);
        summary[name] = policy_summary_json(s, tail);
        std::fprintf(stderr, "%-12s %8.2f %10.0f %10.2f %10.2f %10.0f %10.2f\n", name.c_str(),
                     s.max_temp_c, s.seconds_above_limit, s.tail_mean_abs_error_c, s.tail_swing_c,
                     s.tokens, s.mean_tok_s);
    }
    if (csv_file) {
        csv_file->write(csv.str());
        csv_file->commit();
    }
    add_target_and_limit_lines(temp_panel, config, seconds);
    temp_panel.x_max = tok_panel.x_max = seconds;
    tok_panel.y_max = plant.full_tok_s * 1.1;
    if (!a.svg_path.empty()) {
        write_output_file(
            a.svg_path, render_svg(thermal_plot_title(a.minutes, config), {temp_panel, tok_panel}));
    }
    summary["target_c"] = config.target_c;
    summary["limit_c"] = config.limit_c;
    summary["minutes"] = a.minutes;
    if (!a.csv_path.empty()) summary["csv"] = a.csv_path;
    if (!a.svg_path.empty()) summary["svg"] = a.svg_path;
    std::cout << summary.dump(2) << "\n";
    return 0;
}

// The options of `dwell bench` with a model (the thermal simulation has
// its own).
struct BenchArgs {
    CommonArgs common;
    std::string model_path, kv_type;
    int32_t n_prompt = 128, n_gen = 64, reps = 5, n_ctx = 0, depth = 0;
    // "greedy": each decode feeds back the argmax; "random": ids from a
    // fixed-seed stream, so a MoE's routing varies as over real text (a
    // synthetic model's greedy text repeats one token, whose experts then
    // stay cached and the storage reads vanish from the figures).
    std::string decode_tokens = "greedy";
    bool json = false;
    bool profile = false;
};

// Parses and checks the options, before anything loads (po::error naming
// the flag); nullopt when --help was printed.
std::optional<BenchArgs> parse_bench_args(const std::vector<std::string>& args) {
    BenchArgs a;
    po::options_description desc("dwell bench");
    // clang-format off
    desc.add_options()
        ("model,m", po::value(&a.model_path)->required(), "model file (GGUF or dwell pack)")
        ("n-prompt,p", po::value(&a.n_prompt)->default_value(128), "prompt tokens decoded in one call (prefill)")
        ("n-gen,n", po::value(&a.n_gen)->default_value(64), "tokens generated one at a time (decode)")
        ("decode-tokens", po::value(&a.decode_tokens)->default_value("greedy"), "what each decode is fed: greedy (the last argmax) or random (ids from a fixed seed: varied MoE routing, the same on every run)")
        ("repetitions,r", po::value(&a.reps)->default_value(5), "timed repetitions, after one untimed warm-up")
        ("ctx,c", po::value(&a.n_ctx)->default_value(0), "context size (0: the model's)")
        ("depth,d", po::value(&a.depth)->default_value(0), "tokens already in the context when prefill and decode are timed")
        ("kv-type", po::value(&a.kv_type), "KV-cache type: f16, q8_0, fp8_e4m3 or f32 (default: the manifest's [kv] dtype)")
        ("json", po::bool_switch(&a.json), "print one JSON object instead of a table")
        ("profile", po::bool_switch(&a.profile), "device time per op kind over the timed repetitions, from backends that measure it (OpenCL profiling events)")
        ("thermal-sim", "instead: the thermal governor on a simulated phone, no model (see dwell bench --thermal-sim --help)");
    // clang-format on
    add_runtime_options(desc, a.common);
    po::variables_map vm;
    if (!parse("bench", "-m MODEL [-p N] [-n N] [-r N] [--json] [options]", desc, args, vm)) {
        return std::nullopt;
    }
    set_verbosity(a.common.verbosity);
    if (a.n_prompt < 1)
        throw po::error("--n-prompt " + std::to_string(a.n_prompt) + " must be >= 1");
    if (a.n_gen < 1) throw po::error("--n-gen " + std::to_string(a.n_gen) + " must be >= 1");
    if (a.reps < 1) throw po::error("--repetitions " + std::to_string(a.reps) + " must be >= 1");
    if (a.decode_tokens != "greedy" && a.decode_tokens != "random")
        throw po::error("--decode-tokens " + a.decode_tokens + " is not greedy or random");
    check_ctx(a.n_ctx);
    if (a.depth < 0) throw po::error("--depth " + std::to_string(a.depth) + " must be >= 0");
    return a;
}

SessionOptions bench_session_options(const BenchArgs& a) {
    SessionOptions so;
    so.n_ctx = a.n_ctx;
    // One graph for the whole prompt, as llama-bench's default batch does.
    so.n_batch = std::max(so.n_batch, a.n_prompt);
    if (!a.kv_type.empty()) so.kv_dtype = parse_kv_type(a.kv_type);
    return so;
}

RuntimeOptions bench_runtime_options(const CommonArgs& common) {
    RuntimeOptions ro = runtime_options(common);
    // Every repetition decodes the same prompt: cached pages would make
    // prefill free, so only the forks of the depth share pages.
    ro.prefix_cache_bytes = 0;
    return ro;
}

// The context size the session gets; throws po::error when the depth, the
// prompt and the generated tokens do not fit in it.
int64_t checked_context(const BenchArgs& a, const Model& model) {
    const int64_t ctx = a.n_ctx > 0 ? a.n_ctx : model.info().n_ctx_train;
    if (int64_t{a.depth} + a.n_prompt + a.n_gen + 1 > ctx) {
        throw po::error("--depth " + std::to_string(a.depth) + " + -p " +
                        std::to_string(a.n_prompt) + " + -n " + std::to_string(a.n_gen) +
                        " + 1 exceeds the context of " + std::to_string(ctx) + " (raise --ctx)");
    }
    return ctx;
}

// Decodes `depth` filler tokens into `base`, n_batch at a time, so that
// every repetition times prefill and decode on top of a filled context.
void fill_context(Session& base, const Tokenizer& tok, int32_t n_vocab, int32_t depth,
                  int32_t n_batch) {
    ProgressBar fill("fill", depth);
    const std::vector<int32_t> filler = prompt_ids(tok, n_vocab, depth);
    for (int32_t start = 0; start < depth; start += n_batch) {
        const int32_t n = std::min(n_batch, depth - start);
        base.decode(std::span<const int32_t>(filler).subspan(static_cast<size_t>(start),
                                                             static_cast<size_t>(n)));
        fill.update(start + n);
    }
}

// Adds to `sum` what the weight reader did between two of its snapshots.
void add_stream_delta(WeightStreamStats& sum, const WeightStreamStats& a,
                      const WeightStreamStats& b) {
    sum.bytes_read += b.bytes_read - a.bytes_read;
    sum.bytes_decompressed += b.bytes_decompressed - a.bytes_decompressed;
    sum.wait_seconds += b.wait_seconds - a.wait_seconds;
    sum.compute_seconds += b.compute_seconds - a.compute_seconds;
    sum.read_seconds += b.read_seconds - a.read_seconds;
    sum.decompress_seconds += b.decompress_seconds - a.decompress_seconds;
    sum.demand_reads += b.demand_reads - a.demand_reads;
    sum.unit_reads += b.unit_reads - a.unit_reads;
    sum.experts_needed += b.experts_needed - a.experts_needed;
    sum.expert_hits += b.expert_hits - a.expert_hits;
    sum.expert_prefetch_hits += b.expert_prefetch_hits - a.expert_prefetch_hits;
    sum.expert_misses += b.expert_misses - a.expert_misses;
    sum.expert_prefetches += b.expert_prefetches - a.expert_prefetches;
    sum.expert_bytes_read += b.expert_bytes_read - a.expert_bytes_read;
    sum.expert_wait_seconds += b.expert_wait_seconds - a.expert_wait_seconds;
    sum.experts_predicted += b.experts_predicted - a.experts_predicted;
    sum.experts_predictable += b.experts_predictable - a.experts_predictable;
}

// Prefill of the prompt, then n_gen decodes (fed the argmax, or with
// `random_ids` the next of those), on `session`; the bar
// advances once per decode call. With `decode_io`, the weight reader's
// work during the decodes is added to it.
Repetition time_repetition(const Runtime& runtime, Session& session,
                           const std::vector<int32_t>& prompt, int32_t n_gen,
                           const std::vector<int32_t>* random_ids, ProgressBar& bar, int64_t& done,
                           const WeightStreamer* streamer, WeightStreamStats* decode_io,
                           WeightReads* reads) {
    Repetition r;
    auto t0 = Clock::now();
    const std::span<const float> logits = session.decode(prompt);
    r.prefill_seconds = seconds_since(t0);
    int32_t next = argmax(logits);
    // TTFT includes choosing the token, as a user waits for that too.
    r.ttft_seconds = seconds_since(t0);
    bar.update(++done);
    const WeightStreamStats io0 = streamer ? streamer->stats() : WeightStreamStats{};
    weight_reads(runtime, true);  // counts start with the decodes
    t0 = Clock::now();
    for (int32_t i = 0; i < n_gen; ++i) {
        const int32_t fed = random_ids ? (*random_ids)[static_cast<size_t>(i)] : next;
        next = argmax(session.decode(std::span<const int32_t>(&fed, 1)));
        bar.update(++done);
    }
    r.decode_seconds = seconds_since(t0);
    if (reads) add_reads(*reads, weight_reads(runtime, false));
    if (streamer && decode_io) add_stream_delta(*decode_io, io0, streamer->stats());
    return r;
}

struct Timings {
    std::vector<Repetition> runs;
    // Streamed weights: what the timed decodes read and waited for.
    WeightStreamStats decode_io{};
    // What the timed decodes' matmuls read of the weights.
    WeightReads reads{};
};

// One untimed warm-up, then the timed repetitions, each on a fresh fork of
// `base` (sharing its pages). With --profile the backends' op times start
// over after the warm-up.
Timings time_repetitions(const Runtime& runtime, const Session& base,
                         const std::vector<int32_t>& prompt, const BenchArgs& a,
                         const WeightStreamer* streamer) {
    Timings t;
    ProgressBar bar("bench", int64_t{a.reps + 1} * (a.n_gen + 1));
    int64_t done = 0;
    // Random ids: each repetition its own n_gen of one fixed-seed stream, so
    // the timed runs meet tokens (and a MoE's experts) the warm-up did not
    // bring in, and every run of the command sees the same ones.
    std::vector<std::vector<int32_t>> random_ids;
    if (a.decode_tokens == "random") {
        std::mt19937 rng(54321);
        const auto n_vocab = static_cast<uint32_t>(base.model().info().n_vocab);
        random_ids.resize(static_cast<size_t>(a.reps) + 1);
        for (auto& ids : random_ids)
            for (int32_t i = 0; i < a.n_gen; ++i)
                ids.push_back(static_cast<int32_t>(rng() % n_vocab));
    }
    for (int32_t rep = 0; rep <= a.reps; ++rep) {
        std::unique_ptr<Session> session = base.fork();
        if (rep == 1 && a.profile) backend_profile(runtime, true);  // after the warm-up
        // Repetition 0 warms caches and page tables.
        const Repetition r = time_repetition(
            runtime, *session, prompt, a.n_gen,
            random_ids.empty() ? nullptr : &random_ids[static_cast<size_t>(rep)], bar, done,
            streamer, rep > 0 ? &t.decode_io : nullptr, rep > 0 ? &t.reads : nullptr);
        if (rep > 0) t.runs.push_back(r);
    }
    return t;
}

// What both reports show, from the timings and the loaded runtime.
struct BenchFigures {
    Spread pp, tg, ttft;
    std::string kv_name;
    uint64_t kv_bytes_per_token = 0;
    double kv_page_bytes_per_token = 0;
    uint64_t peak_rss = 0;
    uint64_t model_bytes = 0;
    std::vector<std::string> backends;
    int32_t threads = 0;
    int64_t ctx = 0;
};

BenchFigures bench_figures(const BenchArgs& a, Runtime& runtime, const Model& model,
                           const KvCache& kv, const std::vector<Repetition>& runs, int64_t ctx) {
    BenchFigures f;
    f.kv_name = dwell_dtype_name(kv.dtype());
    f.kv_bytes_per_token = kv.bytes_per_token();
    // What a token costs in pages, padding at the end of each page included.
    f.kv_page_bytes_per_token = static_cast<double>(runtime.kv_pages().page_bytes()) * 2.0 *
                                kv.n_layer() / static_cast<double>(kv.rows_per_page());

    std::vector<double> pp, tg, ttft;
    for (const Repetition& r : runs) {
        pp.push_back(a.n_prompt / r.prefill_seconds);
        tg.push_back(a.n_gen / r.decode_seconds);
        ttft.push_back(r.ttft_seconds * 1e3);
    }
    f.pp = spread(pp);
    f.tg = spread(tg);
    f.ttft = spread(ttft);
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    f.peak_rss = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
    std::error_code ec;
    f.model_bytes = std::filesystem::file_size(model.path(), ec);
    for (const auto& b : runtime.backends()) f.backends.push_back(b->label());
    f.threads = effective_threads(runtime, a.common);
    f.ctx = ctx;
    return f;
}

// One JSON object on one line.
void print_json_report(const BenchArgs& a, const BenchFigures& f, const Runtime& runtime,
                       const Model& model, const WeightStreamer* streamer,
                       const WeightStreamStats& decode_io, const WeightReads& reads) {
    auto stats = [](const Spread& s) {
        return nlohmann::json{{"median", s.median}, {"min", s.min}, {"max", s.max}};
    };
    nlohmann::json j = {
        {"model", model.path().string()},
        {"architecture", model.architecture()},
        {"model_bytes", f.model_bytes},
        {"weight_bytes", model.weight_bytes()},
        {"weight_bytes_per_token", weight_bytes_per_token(model)},
        {"backends", f.backends},
        {"threads", f.threads},
        {"kv_type", f.kv_name},
        {"kv_bytes_per_token", f.kv_bytes_per_token},
        {"kv_page_bytes_per_token", f.kv_page_bytes_per_token},
        {"n_ctx", f.ctx},
        {"depth", a.depth},
        {"n_prompt", a.n_prompt},
        {"n_gen", a.n_gen},
        {"decode_tokens", a.decode_tokens},
        {"repetitions", a.reps},
        {"prefill_tokens_per_second", stats(f.pp)},
        {"decode_tokens_per_second", stats(f.tg)},
        {"ttft_ms", stats(f.ttft)},
        {"peak_rss_bytes", f.peak_rss},
        {"weights", weights_json(runtime, streamer, decode_io, int64_t{a.reps} * a.n_gen)},
        {"sparsity", sparsity_json(runtime, reads, int64_t{a.reps} * a.n_gen)},
    };
    if (a.profile) j["profile"] = backend_profile(runtime, false);
    std::cout << j.dump() << "\n";
}

// Per backend that measures it, each op kind's device time and share.
void print_profile_table(const Runtime& runtime, int32_t reps) {
    const nlohmann::json prof = backend_profile(runtime, false);
    for (const auto& [backend, ops] : prof.items()) {
        if (!ops.is_array()) {
            std::printf("profile  %s: %s\n", backend.c_str(), ops.get<std::string>().c_str());
            continue;
        }
        double total = 0;
        for (const auto& o : ops) total += o["ms"].get<double>();
        std::printf("profile  %s, %d repetitions (device time per op kind):\n", backend.c_str(),
                    reps);
        for (const auto& o : ops) {
            std::printf(
                "  %-14s %8llu nodes %10.2f ms %5.1f%%\n", o["op"].get<std::string>().c_str(),
                static_cast<unsigned long long>(o["count"].get<uint64_t>()), o["ms"].get<double>(),
                total > 0 ? 100.0 * o["ms"].get<double>() / total : 0.0);
        }
    }
}

// What streaming the weights cost per decoded token.
void print_weight_streaming(const Runtime& runtime, const WeightStreamer& streamer,
                            const WeightStreamStats& decode_io, int64_t tokens) {
    const nlohmann::json w = weights_json(runtime, &streamer, decode_io, tokens);
    std::printf("weights  %s\n", streamer.describe().c_str());
    std::printf(
        "         per decoded token: %s read, %s decompressed; compute %.1f ms, "
        "waiting for weights %.1f ms; overlap of reading and compute %.0f%%\n",
        format_bytes(w["read_bytes_per_token"].get<uint64_t>()).c_str(),
        format_bytes(w["decompressed_bytes_per_token"].get<uint64_t>()).c_str(),
        w["compute_ms_per_token"].get<double>(), w["wait_ms_per_token"].get<double>(),
        100.0 * w["overlap"].get<double>());
    if (w.contains("experts")) {
        const nlohmann::json& e = w["experts"];
        std::printf(
            "experts  per decoded token: %.1f needed, %.1f%% cache hits (%.1f%% read ahead by "
            "the prefetcher), %.1f demand misses, %.1f prefetched (%.1f%% used), %s read, "
            "waiting %.1f ms; the prediction held %.1f%% of the experts needed\n",
            e["needed_per_token"].get<double>(), 100.0 * e["hit_rate"].get<double>(),
            100.0 * e["prefetch_hit_rate"].get<double>(), e["misses_per_token"].get<double>(),
            e["prefetches_per_token"].get<double>(), 100.0 * e["prefetch_precision"].get<double>(),
            format_bytes(e["bytes_read_per_token"].get<uint64_t>()).c_str(),
            e["wait_ms_per_token"].get<double>(), 100.0 * e["prediction_recall"].get<double>());
    }
}

// The table for a reader, llama-bench's test names in the first column.
void print_table_report(const BenchArgs& a, const BenchFigures& f, const Runtime& runtime,
                        const Model& model, const WeightStreamer* streamer,
                        const WeightStreamStats& decode_io, const WeightReads& reads) {
    std::string labels;
    for (const auto& b : f.backends) labels += (labels.empty() ? "" : ", ") + b;
    std::printf("model    %s (%s, weights %s)\n", printable_text(model.path().string()).c_str(),
                format_bytes(f.model_bytes).c_str(), format_bytes(model.weight_bytes()).c_str());
    std::printf("backends %s | threads %d | ctx %lld | depth %d | %d repetitions\n", labels.c_str(),
                f.threads, static_cast<long long>(f.ctx), a.depth, a.reps);
    std::printf("kv       %s, %llu bytes per token (%.0f with page padding)\n", f.kv_name.c_str(),
                static_cast<unsigned long long>(f.kv_bytes_per_token), f.kv_page_bytes_per_token);
    std::printf("%-18s %10s %10s %10s\n", "test", "median", "min", "max");
    const std::string pp_name = "pp" + std::to_string(a.n_prompt) + " tok/s";
    const std::string tg_name = "tg" + std::to_string(a.n_gen) + " tok/s";
    std::printf("%-18s %10.2f %10.2f %10.2f\n", pp_name.c_str(), f.pp.median, f.pp.min, f.pp.max);
    std::printf("%-18s %10.2f %10.2f %10.2f\n", tg_name.c_str(), f.tg.median, f.tg.min, f.tg.max);
    std::printf("%-18s %10.2f %10.2f %10.2f\n", "TTFT ms", f.ttft.median, f.ttft.min, f.ttft.max);
    std::printf("peak RSS %s\n", format_bytes(f.peak_rss).c_str());
    if (a.profile) print_profile_table(runtime, a.reps);
    if (streamer) print_weight_streaming(runtime, *streamer, decode_io, int64_t{a.reps} * a.n_gen);
    const nlohmann::json sp = sparsity_json(runtime, reads, int64_t{a.reps} * a.n_gen);
    if (sp["measured"].get<bool>() && sp.contains("thresholds")) {
        std::printf(
            "sparsity calibrated for %.0f%% (%s), %.1f%% of projection inputs zero; weights "
            "read per decoded token %s (dense %s)\n",
            100.0 * sp["calibrated_for"].get<double>(), sp["thresholds"].get<std::string>().c_str(),
            100.0 * sp["achieved"].get<double>(),
            format_bytes(sp["weight_bytes_per_token"].get<uint64_t>()).c_str(),
            format_bytes(sp["dense_weight_bytes_per_token"].get<uint64_t>()).c_str());
    } else if (sp["measured"].get<bool>()) {
        std::printf(
            "sparsity %.0f%% asked, %.1f%% of projection inputs zero; weights read per "
            "decoded token %s (dense %s)\n",
            100.0 * sp["fraction"].get<double>(), 100.0 * sp["achieved"].get<double>(),
            format_bytes(sp["weight_bytes_per_token"].get<uint64_t>()).c_str(),
            format_bytes(sp["dense_weight_bytes_per_token"].get<uint64_t>()).c_str());
    }
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
    // The thermal simulation needs no model: its own options.
    if (std::find(args.begin(), args.end(), "--thermal-sim") != args.end()) {
        return thermal_sim_bench(args);
    }
    const std::optional<BenchArgs> parsed = parse_bench_args(args);
    if (!parsed) return 0;
    const BenchArgs& a = *parsed;
    const SessionOptions so = bench_session_options(a);

    Runtime runtime(bench_runtime_options(a.common));
    auto model = Model::load(runtime, a.model_path, terminal_load_progress());
    const int64_t ctx = checked_context(a, *model);
    const int32_t n_vocab = static_cast<int32_t>(model->info().n_vocab);
    const std::vector<int32_t> prompt = prompt_ids(model->tokenizer(), n_vocab, a.n_prompt);

    // The context already holds `depth` tokens: filled once, then every
    // repetition forks it (sharing its pages) and times prefill and decode
    // on top.
    Session base(runtime, model, so);
    if (a.depth > 0) fill_context(base, model->tokenizer(), n_vocab, a.depth, so.n_batch);
    const WeightStreamer* streamer = model->streamer();
    const Timings t = time_repetitions(runtime, base, prompt, a, streamer);
    const BenchFigures f = bench_figures(a, runtime, *model, base.kv_cache(), t.runs, ctx);
    if (a.json) {
        print_json_report(a, f, runtime, *model, streamer, t.decode_io, t.reads);
    } else {
        print_table_report(a, f, runtime, *model, streamer, t.decode_io, t.reads);
    }
    return 0;
}

}  // namespace dwell::cli
