// What every `dwell` subcommand shares: runtime options on the command line,
// log verbosity, and how a failure is printed (one line, exit code 1).
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "dwell/core/llm/sampler.hpp"
#include "dwell/core/runtime/runtime.hpp"

namespace dwell::cli {

namespace po = boost::program_options;

struct CommonArgs {
    std::string manifest;
    int32_t threads = 0;
    int64_t memory_budget_mb = -1;
    std::string weights;            // empty: the manifest's
    int64_t weight_budget_mb = -1;  // -1: the manifest's
    int32_t prefetch_layers = -1;   // -1: the manifest's
    bool strict = false;
    int verbosity = 0;
    std::string sysroot;   // device detection under a captured tree
    std::string getprop;   // a file of getprop output
    std::string thermal;   // "on" / "off": overrides [thermal] enabled
    double sparsity = -1;  // -1: the manifest's [sparsity] fraction
    std::string sparsity_thresholds;  // empty: the manifest's [sparsity] thresholds
};

// --manifest, --threads, --memory-budget, --strict, -v.
void add_runtime_options(po::options_description& desc, CommonArgs& args);
RuntimeOptions runtime_options(const CommonArgs& args);
void set_verbosity(int verbosity);
// "f32" or "f16"; throws po::validation_error otherwise.
dwell_dtype parse_kv_type(const std::string& name);

// Checks, before anything loads, throwing po::error naming the flag:
// the sampling options (--temp, --top-k, --top-p, --min-p and, when the
// command has them, --repeat-penalty and --repeat-last-n) as the sampler
// accepts them; a context size (--ctx: 0 for the model's, else up to the
// longest a session may have); a token count (>= 0, or >= 1 when positive).
void check_sampling(const SamplerParams& sp);
void check_ctx(int32_t n_ctx, const char* flag = "--ctx");
void check_count(int64_t n, const char* flag, int64_t min);
// --seed: -1 (random) or more; --ctx-full: stop or shift.
void check_seed(int64_t seed);
void check_ctx_full(const std::string& mode);

// A file or folder named on the command line. The checks use the
// non-throwing std::filesystem calls, so a path that cannot be examined
// (a symbolic-link loop, no permission, a name too long) is one line
// "--flag PATH: <reason>", thrown as po::error.
struct FileArg {
    const char* flag;
    std::string path;
};
void check_input_file(const FileArg& file, const std::string& hint = "");
void check_input_dir(const FileArg& dir);
// Throws po::error naming the words when there are any: arguments that no
// option takes (most often the rest of an unquoted prompt).
void check_no_stray_arguments(const std::vector<std::string>& words);
// Outputs are renamed over their target, so an output that is the same
// file as an input (the same name, a hard link or a symbolic link) would
// replace what is read: refused as "OUT PATH is the same file as IN".
// Empty paths are not given and are skipped.
void check_output_not_input(const FileArg& output, std::initializer_list<FileArg> inputs);

// Parses argv for a subcommand; prints help and returns false for --help.
// Throws po::error on bad options.
bool parse(const std::string& command, const std::string& usage, po::options_description& desc,
           const std::vector<std::string>& args, po::variables_map& vm,
           const po::positional_options_description* positional = nullptr);

int run_command(const std::vector<std::string>& args);
int devices_command(const std::vector<std::string>& args);
int serve_command(const std::vector<std::string>& args);
int chat_command(const std::vector<std::string>& args);
int synth_command(const std::vector<std::string>& args);
int eval_command(const std::vector<std::string>& args);
int convert_command(const std::vector<std::string>& args);
int perplexity_command(const std::vector<std::string>& args);
int calibrate_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);

}  // namespace dwell::cli
