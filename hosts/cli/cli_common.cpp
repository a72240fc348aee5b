#include "cli_common.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <iostream>
#include <thread>

#include "dwell/core/base/error.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/session/session_file.hpp"

namespace dwell::cli {

void add_runtime_options(po::options_description& desc, CommonArgs& args) {
    // clang-format off
    desc.add_options()
        ("manifest", po::value(&args.manifest), "device manifest (TOML); default: the one matching this device")
        ("threads,t", po::value(&args.threads), "CPU threads (default: the manifest's [cpu] threads, else all cores)")
        ("memory-budget", po::value(&args.memory_budget_mb), "memory budget in MiB, 0 for none (overrides [memory] budget_mb)")
        ("weights", po::value(&args.weights), "weight residency: mmap, load or stream (overrides [memory] weights)")
        ("weight-budget", po::value(&args.weight_budget_mb), "stream: MiB of weights resident at once (overrides [memory] weight_budget_mb)")
        ("prefetch", po::value(&args.prefetch_layers), "stream: layers read ahead (overrides [memory] prefetch_layers)")
        ("sparsity", po::value(&args.sparsity), "activation sparsity at decode: share of each projection input zeroed per token, smallest first, 0..0.95 (overrides [sparsity]; 0: off)")
        ("sparsity-thresholds", po::value(&args.sparsity_thresholds), "activation sparsity with calibrated per-input thresholds from FILE (dwell calibrate; overrides [sparsity]; not with --sparsity)")
        ("strict", po::bool_switch(&args.strict), "fail instead of falling back to a lower-priority backend")
        ("sysroot", po::value(&args.sysroot), "detect the device from a captured tree (proc/, sys/, getprop.txt) instead of /")
        ("getprop", po::value(&args.getprop), "read Android properties from this file of getprop output")
        ("thermal", po::value(&args.thermal), "on or off: the thermal governor (default: the manifest's [thermal]); its sensors are read under --sysroot")
        ("verbose,v", po::value<int>(&args.verbosity)->implicit_value(1)->zero_tokens(), "log placement and loading (-v)");
    // clang-format on
}

RuntimeOptions runtime_options(const CommonArgs& args) {
    RuntimeOptions o;
    if (!args.manifest.empty()) {
        // Checked here so a typo fails as an option, before anything loads.
        check_input_file({"--manifest", args.manifest});
        o.manifest = args.manifest;
    }
    if (!args.sysroot.empty()) {
        check_input_dir({"--sysroot", args.sysroot});
        o.device_root = args.sysroot;
    }
    if (!args.thermal.empty()) {
        if (args.thermal != "on" && args.thermal != "off")
            throw po::error("--thermal '" + args.thermal + "' is not on or off");
        o.thermal = args.thermal == "on";
    }
    if (!args.getprop.empty()) {
        check_input_file({"--getprop", args.getprop});
        o.getprop_file = args.getprop;
    }
    if (args.threads < 0 || args.threads > 1024) {
        throw po::error("--threads " + std::to_string(args.threads) +
                        " is out of range (1..1024, or 0 for all cores)");
    }
    const unsigned cores = std::thread::hardware_concurrency();
    if (cores > 0 && static_cast<unsigned>(args.threads) > cores) {
        spdlog::warn(
            "--threads {} is more than the {} cores here: the extra threads only wait "
            "for a core (use --threads {} or fewer)",
            args.threads, cores, cores);
    }
    o.threads = args.threads;
    if (args.memory_budget_mb != -1) {
        // 2^30 MiB = 1 PiB: anything larger is a typo, and << 20 must not wrap.
        if (args.memory_budget_mb < 0 || args.memory_budget_mb > (int64_t{1} << 30)) {
            throw po::error("--memory-budget " + std::to_string(args.memory_budget_mb) +
                            " is out of range (MiB, 0 for no budget)");
        }
        o.memory_budget_bytes = static_cast<uint64_t>(args.memory_budget_mb) << 20;
    }
    if (!args.weights.empty()) {
        if (args.weights != "mmap" && args.weights != "load" && args.weights != "stream") {
            throw po::error("--weights '" + args.weights + "' is not one of mmap, load, stream");
        }
        o.weights = args.weights;
    }
    if (args.weight_budget_mb != -1) {
        if (args.weight_budget_mb < 1 || args.weight_budget_mb > (int64_t{1} << 30)) {
            throw po::error("--weight-budget " + std::to_string(args.weight_budget_mb) +
                            " is out of range (MiB, at least 1)");
        }
        o.weight_budget_bytes = static_cast<uint64_t>(args.weight_budget_mb) << 20;
        if (!o.weights) o.weights = "stream";  // a weight budget only means something streamed
    }
    if (args.prefetch_layers != -1) {
        if (args.prefetch_layers < 0 || args.prefetch_layers > 64) {
            throw po::error("--prefetch " + std::to_string(args.prefetch_layers) +
                            " is out of range (0..64 layers)");
        }
        o.prefetch_layers = args.prefetch_layers;
    }
    if (args.sparsity != -1) {
        if (!(args.sparsity >= 0 && args.sparsity <= kMaxSparsity)) {
            throw po::error("--sparsity " + std::to_string(args.sparsity) +
                            " is out of range (a fraction 0..0.95 of each input zeroed; 0: off)");
        }
        o.sparsity = static_cast<float>(args.sparsity);
    }
    if (!args.sparsity_thresholds.empty()) {
        if (args.sparsity != -1) {
            throw po::error(
                "--sparsity and --sparsity-thresholds are exclusive: a fraction per token or "
                "calibrated thresholds, not both");
        }
        check_input_file({"--sparsity-thresholds", args.sparsity_thresholds},
                         "write one with dwell calibrate");
        // Read here too, so a malformed file is a bad option (exit 2).
        try {
            (void)read_sparsity_thresholds(args.sparsity_thresholds);
        } catch (const Error& e) {
            throw po::error(std::string("--sparsity-thresholds: ") + e.what());
        }
        o.sparsity_thresholds = args.sparsity_thresholds;
    }
    o.strict = args.strict;
    return o;
}

dwell_dtype parse_kv_type(const std::string& name) {
    if (name == "f32") return DWELL_F32;
    if (name == "f16") return DWELL_F16;
    if (name == "q8_0") return DWELL_Q8_0;
    if (name == "fp8" || name == "fp8_e4m3") return DWELL_FP8_E4M3;
    throw po::error("--kv-type '" + name +
                    "' is not a KV-cache type (use f16, q8_0, fp8_e4m3 or f32)");
}

void check_sampling(const SamplerParams& sp) {
    // Written as !(ok) so that NaN fails every check, as in the sampler.
    auto text = [](float v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
        return std::string(buf);
    };
    if (!(sp.temperature >= 0.0f) || std::isinf(sp.temperature))
        throw po::error("--temp " + text(sp.temperature) + " must be >= 0 (0: greedy)");
    if (sp.top_k < 0)
        throw po::error("--top-k " + std::to_string(sp.top_k) + " must be 0 (off) or positive");
    if (!(sp.top_p > 0.0f && sp.top_p <= 1.0f))
        throw po::error("--top-p " + text(sp.top_p) + " must be in (0, 1] (1: off)");
    if (!(sp.min_p >= 0.0f && sp.min_p < 1.0f))
        throw po::error("--min-p " + text(sp.min_p) + " must be in [0, 1) (0: off)");
    if (!(sp.repeat_penalty > 0.0f) || std::isinf(sp.repeat_penalty))
        throw po::error("--repeat-penalty " + text(sp.repeat_penalty) + " must be > 0 (1: off)");
    if (sp.repeat_last_n < 0)
        throw po::error("--repeat-last-n " + std::to_string(sp.repeat_last_n) + " must be >= 0");
}

void check_ctx(int32_t n_ctx, const char* flag) {
    if (n_ctx < 0 || n_ctx > kSessionMaxContext) {
        throw po::error(std::string(flag) + " " + std::to_string(n_ctx) +
                        " is not a context size (use 1.." + std::to_string(kSessionMaxContext) +
                        ", or 0 for the model's)");
    }
}

void check_count(int64_t n, const char* flag, int64_t min) {
    if (n < min) {
        throw po::error(std::string(flag) + " " + std::to_string(n) +
                        " must be >= " + std::to_string(min));
    }
}

void check_seed(int64_t seed) {
    if (seed < -1)
        throw po::error("--seed " + std::to_string(seed) + " must be >= 0, or -1 for random");
}

void check_ctx_full(const std::string& mode) {
    if (mode != "stop" && mode != "shift")
        throw po::error("--ctx-full '" + mode + "' must be stop or shift");
}

namespace {

// The file's type, or a po::error "--flag PATH: <reason>" when it cannot be
// examined (a symbolic-link loop, no permission, a name too long). A path
// that does not exist is not_found, for the callers' own message.
std::filesystem::file_type type_of(const FileArg& f) {
    std::error_code ec;
    const auto st = std::filesystem::status(f.path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
        throw po::error(std::string(f.flag) + " " + f.path + ": " + ec.message());
    return st.type();
}

}  // namespace

void check_input_file(const FileArg& file, const std::string& hint) {
    if (type_of(file) != std::filesystem::file_type::regular) {
        throw po::error(std::string(file.flag) + " " + file.path + " is not a readable file" +
                        (hint.empty() ? "" : " (" + hint + ")"));
    }
}

void check_input_dir(const FileArg& dir) {
    if (type_of(dir) != std::filesystem::file_type::directory)
        throw po::error(std::string(dir.flag) + " " + dir.path + " is not a directory");
}

void check_no_stray_arguments(const std::vector<std::string>& words) {
    if (words.empty()) return;
    std::string list;
    for (const auto& w : words) list.append(list.empty() ? "'" : " '").append(w).append("'");
    throw po::error(
        std::string(words.size() == 1 ? "unexpected argument " : "unexpected arguments ") + list +
        " (quote a value that has spaces, e.g. -p \"Once upon a time\")");
}

void check_output_not_input(const FileArg& output, std::initializer_list<FileArg> inputs) {
    if (output.path.empty()) return;
    for (const FileArg& in : inputs) {
        if (!in.path.empty() && same_file(output.path, in.path)) {
            throw po::error(std::string(output.flag) + " " + output.path + " is the same file as " +
                            in.flag + " " + in.path +
                            ": writing it would destroy the input (choose another output file)");
        }
    }
}

void set_verbosity(int verbosity) {
    // Logs go to stderr so stdout carries only the generated text.
    auto logger = spdlog::stderr_color_mt("dwell");
    logger->set_pattern("dwell: %^%l%$: %v");
    spdlog::set_default_logger(logger);
    spdlog::set_level(verbosity >= 2   ? spdlog::level::debug
                      : verbosity == 1 ? spdlog::level::info
                                       : spdlog::level::warn);
}

bool parse(const std::string& command, const std::string& usage, po::options_description& desc,
           const std::vector<std::string>& args, po::variables_map& vm,
           const po::positional_options_description* positional) {
    desc.add_options()("help,h", po::bool_switch(), "show this help");
    po::command_line_parser parser(args);
    parser.options(desc);
    // Positional words are matched here rather than by boost, which drops
    // those a command does not declare: `-p Once upon a time` would run
    // with the prompt "Once" and say nothing.
    po::parsed_options parsed = parser.run();
    std::vector<std::string> unexpected;
    unsigned position = 0;
    for (auto& opt : parsed.options) {
        if (opt.position_key < 0) continue;
        if (positional && position < positional->max_total_count()) {
            opt.string_key = positional->name_for_position(position++);
        } else {
            unexpected.insert(unexpected.end(), opt.value.begin(), opt.value.end());
        }
    }
    check_no_stray_arguments(unexpected);
    po::store(parsed, vm);
    // --help wins over missing required options, so notify() comes after it.
    if (vm.count("help") && vm["help"].as<bool>()) {
        std::cout << "usage: dwell " << command << " " << usage << "\n\n" << desc << "\n";
        return false;
    }
    po::notify(vm);
    return true;
}

}  // namespace dwell::cli
