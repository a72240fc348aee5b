// `dwell` options as a person mistypes them: every bad value of every
// subcommand exits 2 with one line naming the flag, before anything loads
// (the model path given does not exist, so a load would fail differently);
// warnings that are one line naming what to change; help that lists every
// command; files written only when asked.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

// The lines of `s` that are not empty.
std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::string line;
    for (char c : s + "\n") {
        if (c != '\n') {
            line += c;
        } else if (!line.empty()) {
            out.push_back(line);
            line.clear();
        }
    }
    return out;
}

struct BadOption {
    std::vector<std::string> args;  // after the command and its model/file arguments
    std::string flag;               // the message must name it
};

struct Command {
    std::string name;
    std::vector<std::string> base;  // what the command needs, pointing at files that do not exist
    std::vector<BadOption> bad;
};

TEST(CliOptions, EveryBadOptionExits2NamingTheFlagBeforeAnythingLoads) {
    TempDir dir;
    const std::string missing = (dir.path() / "no-such-model.gguf").string();
    const std::string out = (dir.path() / "out.bin").string();
    const std::string text = dir.write("text.txt", "Once upon a time").string();
    // A symbolic-link loop: examining it fails (ELOOP), which must read as
    // the option's error, not as a std::filesystem exception.
    const std::string loop = (dir.path() / "loopA").string();
    fs::create_symlink(dir.path() / "loopB", loop);
    fs::create_symlink(loop, dir.path() / "loopB");
    // Options every command with a runtime shares.
    const std::vector<BadOption> runtime_bad = {
        {{"--manifest", loop}, "--manifest " + loop + ": Too many levels of symbolic links"},
        {{"--sysroot", loop}, "--sysroot " + loop + ": Too many levels of symbolic links"},
        {{"--getprop", loop}, "--getprop " + loop + ": Too many levels of symbolic links"},
        {{"--getprop", dir.path().string()}, "--getprop"},  // a folder
        {{"--threads", "-1"}, "--threads"},
        {{"--memory-budget", "-5"}, "--memory-budget"},
        {{"--weights", "disk"}, "--weights"},
        {{"--thermal", "maybe"}, "--thermal"},
        {{"--sparsity", "0.99"}, "--sparsity"},
        {{"--sparsity", "-0.1"}, "--sparsity"},
        {{"--sparsity", "nan"}, "--sparsity"},
        {{"--manifest", (dir.path() / "no-such.toml").string()}, "--manifest"},
        {{"--sysroot", (dir.path() / "no-such-dir").string()}, "--sysroot"},
    };
    const std::vector<BadOption> sampling_bad = {
        {{"--temp", "-1"}, "--temp"},
        {{"--temp", "nan"}, "--temp"},
        {{"--top-p", "5"}, "--top-p"},
        {{"--top-p", "0"}, "--top-p"},
        {{"--top-k", "-3"}, "--top-k"},
        {{"--min-p", "1.5"}, "--min-p"},
        {{"--ctx", "-1"}, "--ctx"},
        {{"--ctx", "99999999"}, "--ctx"},
        {{"--kv-type", "q4"}, "--kv-type"},
        {{"--ctx-full", "wrap"}, "--ctx-full"},
        {{"--n-predict", "-2"}, "--n-predict"},
        {{"--seed", "-5"}, "--seed"},
        {{"--temp", "warm"}, "--temp"},
    };
    std::vector<Command> commands = {
        {"run",
         {"-m", missing},
         {{{"--repeat-penalty", "0"}, "--repeat-penalty"},
          {{"--repeat-last-n", "-1"}, "--repeat-last-n"},
          {{"--keep", "-1"}, "--keep"},
          {{"--keep", "64", "--ctx", "32"}, "--keep"},
          // An unquoted prompt: the words after the first are no option's.
          {{"-p", "Once", "upon", "a", "time"}, "unexpected arguments 'upon' 'a' 'time'"}}},
        {"chat", {"-m", missing}, {{{"--chat-template", "nonsense"}, "--chat-template"}}},
        {"bench",
         {"-m", missing},
         {{{"-p", "0"}, "--n-prompt"},
          {{"-n", "0"}, "--n-gen"},
          {{"-r", "0"}, "--repetitions"},
          {{"--ctx", "-1"}, "--ctx"},
          {{"--ctx", "99999999"}, "--ctx"},
          {{"--depth", "-1"}, "--depth"},
          {{"--kv-type", "q4"}, "--kv-type"}}},
        {"perplexity",
         {"-m", missing, "-f", text},
         {{{"--ctx", "7"}, "--ctx"},
          {{"--ctx", "99999998"}, "--ctx"},
          {{"--batch", "0"}, "--batch"},
          {{"--kv-type", "q4"}, "--kv-type"},
          {{"--kl-base", (dir.path() / "no-such.base").string()}, "--kl-base"},
          {{"--kl-base", loop}, "--kl-base " + loop + ": Too many levels of symbolic links"}}},
        {"eval",
         {"-m", missing, "--logits", out},
         {{{"--ids", "1,x"}, "--ids"},
          {{"--ids", "1,2", "--ctx", "-1"}, "--ctx"},
          {{"--ids", "1,2", "--kv-type", "q4"}, "--kv-type"}}},
        {"convert",
         {missing, "-o", out},
         {{{"--quant", "q3"}, "--quant"},
          {{"--compress", "lzma"}, "--compress"},
          {{"--zstd-level", "0"}, "--zstd-level"},
          {{"--frame-kb", "1"}, "--frame-kb"},
          {{"--snr-db", "-1"}, "--snr-db"}}},
        {"synth",
         {"-o", out},
         {{{"--arch", "gpt9"}, "--arch"},
          {{"--type", "q3"}, "--type"},
          {{"--n-layer", "0"}, "--n-layer"},
          {{"--n-embd", "-4"}, "--n-embd"},
          {{"--n-vocab", "0"}, "--n-vocab"},
          {{"--ctx", "0"}, "--ctx"},
          {{"--n-embd", "100", "--n-head", "3"}, "--n-head"},
          {{"--vocab", (dir.path() / "no-such.model").string()}, "--vocab"},
          {{"--vocab", loop}, "--vocab " + loop + ": Too many levels of symbolic links"},
          // A context past what the model plugins read, or past uint32 (it
          // was written wrapped: 4294967297 as 1). Larger sizes are
          // SynthRefusesSizesThePluginsWouldRefuse's, under a memory limit.
          {{"--ctx", "4294967297"}, "--ctx 4294967297 is outside 1..16777216"},
          {{"--ctx", "20000000"}, "--ctx"},
          // Gemma 2/3's options: for those families only, and in range.
          {{"--sliding-window", "8"}, "not llama"},
          {{"--arch", "gemma2", "--sliding-window", "-1"}, "--sliding-window"},
          {{"--arch", "gemma2", "--swa-pattern", "5000"}, "--swa-pattern"},
          {{"--arch", "gemma2", "--attn-softcap", "-2"}, "--attn-softcap"},
          {{"--arch", "gemma3", "--attn-softcap", "1"}, "--attn-softcap"},
          // LFM2's convolution taps: for lfm2 only, and what SHORT_CONV runs.
          {{"--l-cache", "4"}, "--l-cache is for --arch lfm2"},
          {{"--arch", "lfm2", "--l-cache", "1"}, "--l-cache must be in 2..16"},
          {{"--arch", "lfm2", "--l-cache", "17"}, "--l-cache must be in 2..16"}}},
        {"devices", {}, {{{"--getprop", (dir.path() / "no-such.txt").string()}, "--getprop"}}},
        {"bench",
         {"--thermal-sim"},
         {{{"--minutes", "0"}, "--minutes"},
          {{"--noise", "-1"}, "--noise"},
          {{"--target", "50", "--limit", "40"}, "--limit"}}},
    };
    for (const std::string name : {"run", "chat"}) {
        for (auto& c : commands) {
            if (c.name == name) c.bad.insert(c.bad.end(), sampling_bad.begin(), sampling_bad.end());
        }
    }
    // A stray word anywhere is refused naming it, by every command (convert
    // takes one positional argument, its input, which its base gives).
    for (auto& c : commands) {
        std::vector<std::string> stray = {"stray"};
        if (c.name == "eval") stray.insert(stray.begin(), {"--ids", "1,2"});
        c.bad.push_back({stray, "unexpected argument 'stray'"});
    }
    for (auto& c : commands) {
        if (c.name == "convert" || c.name == "synth" ||
            c.base == std::vector<std::string>{"--thermal-sim"})
            continue;
        for (BadOption b : runtime_bad) {
            // eval needs its input given, so only the runtime option is wrong
            if (c.name == "eval") b.args.insert(b.args.begin(), {"--ids", "1,2"});
            c.bad.push_back(b);
        }
    }
    int checked = 0;
    for (const Command& c : commands) {
        for (const BadOption& b : c.bad) {
            std::vector<std::string> args = {c.name};
            args.insert(args.end(), c.base.begin(), c.base.end());
            args.insert(args.end(), b.args.begin(), b.args.end());
            std::string shown;
            for (const auto& a : args) shown += a + " ";
            const auto r = run_dwell(args);
            EXPECT_EQ(r.exit_code, 2) << shown << "\n" << r.err;
            const auto err = lines_of(r.err);
            ASSERT_EQ(err.size(), 1u) << shown << "\n" << r.err;
            EXPECT_NE(err[0].find(b.flag), std::string::npos) << shown << "\n" << r.err;
            EXPECT_EQ(err[0].find("filesystem error"), std::string::npos) << shown << "\n" << r.err;
            // Nothing was opened: the missing model is never mentioned.
            EXPECT_EQ(err[0].find("no-such-model"), std::string::npos) << shown << "\n" << r.err;
            EXPECT_TRUE(r.out.empty()) << shown << "\n" << r.out;
            ++checked;
        }
    }
    EXPECT_GE(checked, 120);
    EXPECT_FALSE(fs::exists(out));
}

TEST(CliOptions, MoreThreadsThanCoresWarnsInOneLine) {
    const unsigned cores = std::thread::hardware_concurrency();
    if (cores == 0) GTEST_SKIP() << "the core count is unknown here";
    TempDir dir;
    const std::string missing = (dir.path() / "no-such-model.gguf").string();
    const auto r = run_dwell({"run", "-m", missing, "--threads", std::to_string(cores + 1)});
    const auto err = lines_of(r.err);
    ASSERT_FALSE(err.empty()) << r.err;
    EXPECT_NE(err[0].find("--threads " + std::to_string(cores + 1)), std::string::npos) << r.err;
    EXPECT_NE(err[0].find(std::to_string(cores) + " cores"), std::string::npos) << r.err;
    EXPECT_NE(err[0].find("warning"), std::string::npos) << r.err;
}

TEST(CliOptions, HelpListsEveryCommand) {
    const auto r = run_dwell({"--help"});
    ASSERT_EQ(r.exit_code, 0);
    for (const char* c :
         {"run", "eval", "perplexity", "bench", "chat", "serve", "devices", "convert", "synth"}) {
        EXPECT_NE(r.out.find(std::string("\n  ") + c + " "), std::string::npos) << c << "\n"
                                                                                << r.out;
    }
}

// Sets an environment variable for the test's lifetime (the dwell child
// inherits it).
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (old_) {
            setenv(name_, old_->c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

TEST(CliOptions, ABadCpuSimdValueWarnsOnceNamingTheAcceptedValues) {
    const ScopedEnv env("DWELL_CPU_SIMD", "bogus");
    const auto r = run_dwell({"devices"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> simd;
    for (const auto& line : lines_of(r.err))
        if (line.find("DWELL_CPU_SIMD") != std::string::npos) simd.push_back(line);
    ASSERT_EQ(simd.size(), 1u) << r.err;
    EXPECT_NE(simd[0].find("DWELL_CPU_SIMD=bogus"), std::string::npos) << simd[0];
    EXPECT_NE(simd[0].find("accepted: scalar"), std::string::npos) << simd[0];
    EXPECT_NE(simd[0].find("warning"), std::string::npos) << simd[0];
}

TEST(CliOptions, TheCpuPluginSaysWhichSimdLevelRuns) {
    {
        const ScopedEnv env("DWELL_CPU_SIMD", "scalar");
        const auto r = run_dwell({"devices"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find("CPU backend: scalar kernels"), std::string::npos) << r.out;
        EXPECT_EQ(r.err.find("DWELL_CPU_SIMD"), std::string::npos) << r.err;  // a valid value
    }
    // Without the variable: the best level this CPU runs, which is the one
    // named when scalar is forced and is not the best.
    const ScopedEnv env("DWELL_CPU_SIMD", "");
    const auto r = run_dwell({"devices"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("CPU backend: "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("scalar reference kernels"), std::string::npos) << r.out;
}

TEST(CliOptions, ThermalSimWritesFilesOnlyWhenAsked) {
    TempDir dir;
    const fs::path cwd = fs::current_path();
    fs::current_path(dir.path());
    const auto quiet = run_dwell({"bench", "--thermal-sim", "--minutes", "1"});
    fs::current_path(cwd);
    ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
    EXPECT_TRUE(fs::is_empty(dir.path())) << "files were written unasked";
    EXPECT_NE(quiet.out.find("\"dwell\""), std::string::npos) << quiet.out;  // the summary

    const fs::path csv = dir.path() / "t.csv", svg = dir.path() / "t.svg";
    const auto asked = run_dwell(
        {"bench", "--thermal-sim", "--minutes", "1", "--csv", csv.string(), "--svg", svg.string()});
    ASSERT_EQ(asked.exit_code, 0) << asked.err;
    EXPECT_EQ(read_file(csv).rfind("policy,t_s,", 0), 0u);
    EXPECT_NE(read_file(svg).find("<svg"), std::string::npos);
}

TEST(CliOptions, VersionRefusesAStrayArgument) {
    const auto r = run_dwell({"version", "garbage"});
    EXPECT_EQ(r.exit_code, 2) << r.out;
    ASSERT_EQ(lines_of(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("unexpected argument 'garbage'"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
}

// An output that is the same file as an input (by name, hard link or
// symbolic link) is refused in one line naming both flags, before anything
// is written: outputs are renamed over their target, so the input (even a
// read-only one) would be replaced.
TEST(CliOptions, AnOutputThatIsAnInputIsRefusedAndTheInputKept) {
    TempDir dir;
    const fs::path model = write_small_model(dir);
    const std::string m = model.string();
    const std::string hard = (dir.path() / "hard.gguf").string();
    const std::string soft = (dir.path() / "soft.gguf").string();
    fs::create_hard_link(model, hard);
    fs::create_symlink(model, soft);
    const fs::path text = dir.write("t.txt", "Once upon a time there was a girl.\n");
    const fs::path vocab = dir.write("v.model", "a vocabulary file");
    const std::string model_sha = sha256_of(model), text_sha = sha256_of(text),
                      vocab_sha = sha256_of(vocab);
    struct Case {
        std::vector<std::string> args;
        std::string output_flag, input_flag;
    };
    const Case cases[] = {
        {{"eval", "-m", m, "--ids", "1,2", "--logits", m}, "--logits", "-m"},
        {{"eval", "-m", m, "--ids", "1,2", "--logits", hard}, "--logits", "-m"},
        {{"eval", "-m", m, "--ids", "1,2", "--logits", soft}, "--logits", "-m"},
        {{"bench", "--thermal-sim", "--minutes", "1", "--csv", text.string(), "--svg",
          text.string()},
         "--svg",
         "--csv"},
        {{"convert", m, "-o", m, "-q"}, "-o", "the input"},
        {{"convert", m, "-o", hard, "-q"}, "-o", "the input"},
        {{"synth", "--vocab", vocab.string(), "-o", vocab.string()}, "-o", "--vocab"},
        {{"perplexity", "-m", m, "-f", text.string(), "-c", "8", "--kl-base-save", text.string()},
         "--kl-base-save",
         "-f"},
        {{"perplexity", "-m", m, "-f", text.string(), "-c", "8", "--kl-base-save", hard},
         "--kl-base-save",
         "-m"},
    };
    for (const Case& c : cases) {
        std::string shown;
        for (const auto& a : c.args) shown += a + " ";
        const auto r = run_dwell(c.args);
        EXPECT_EQ(r.exit_code, 2) << shown << "\n" << r.err;
        const auto err = lines_of(r.err);
        ASSERT_EQ(err.size(), 1u) << shown << "\n" << r.err;
        EXPECT_NE(err[0].find(c.output_flag + " "), std::string::npos) << shown << "\n" << r.err;
        EXPECT_NE(err[0].find("is the same file as " + c.input_flag + " "), std::string::npos)
            << shown << "\n"
            << r.err;
    }
    // chat's /save: the one command fails, the conversation goes on.
    const auto r = run_dwell({"chat", "-m", m, "--chat-template", "chatml", "-n", "2"},
                             "/save " + hard + "\n/quit\n");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("/save " + hard + " is the same file as -m"), std::string::npos) << r.err;
    EXPECT_EQ(sha256_of(model), model_sha);
    EXPECT_EQ(sha256_of(text), text_sha);
    EXPECT_EQ(sha256_of(vocab), vocab_sha);
}

// `dwell synth ARGS` under a 2 GiB address-space limit, so that a size
// check that regresses fails fast instead of filling the machine's memory:
// the exit status and standard error. Skipped where such a limit cannot
// work (sanitizers reserve more; an emulator would be limited too).
// Sanitizer runtimes reserve terabytes of address space and the emulator
// its own: a ulimit -v cannot bound synth there. The Release suite runs these.
constexpr const char* kNoAddressSpaceLimit =
    "an address-space limit cannot bound a sanitizer or emulator build (the native Release "
    "suite runs this test)";

std::optional<std::pair<int, std::string>> synth_limited(const TempDir& dir,
                                                         const std::string& args) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    (void)dir;
    (void)args;
    return std::nullopt;
#else
    if (!emulator_prefix().empty()) return std::nullopt;
    const fs::path err = dir.path() / "err.txt";
    const std::string cmd = "ulimit -v 2000000; exec '" + dwell_binary().string() + "' synth -o '" +
                            (dir.path() / "big.gguf").string() + "' " + args + " 2>'" +
                            err.string() + "'";
    const int status = std::system(cmd.c_str());
    if (!WIFEXITED(status)) return std::pair{-1, read_file(err)};
    return std::pair{WEXITSTATUS(status), read_file(err)};
#endif
}

// Sizes past what the model plugins read (once written, run refused them)
// and files too large to hold are option errors naming the flag.
TEST(CliOptions, SynthRefusesSizesThePluginsWouldRefuse) {
    TempDir dir;
    const std::pair<std::string, std::string> cases[] = {
        {"--n-vocab 100000000", "--n-vocab 100000000 is outside 1..16777216"},
        {"--head-dim 100000", "--head-dim 100000 is outside 1..4096"},
        {"--n-embd 2097152", "--n-embd 2097152 is outside 1..1048576"},
        {"--n-layer 5000", "--n-layer 5000 is outside 1..4096"},
        {"--n-ff 8388608", "--n-ff 8388608 is outside 1..4194304"},
        {"--n-embd 1048576 --n-head 16384 --n-vocab 16777216",
         "over synth's limit of 64 GiB (lower --n-vocab"},
    };
    for (const auto& [args, expected] : cases) {
        const auto r = synth_limited(dir, args);
        if (!r) GTEST_SKIP() << kNoAddressSpaceLimit;
        EXPECT_EQ(r->first, 2) << args << "\n" << r->second;
        ASSERT_EQ(lines_of(r->second).size(), 1u) << args << "\n" << r->second;
        EXPECT_NE(r->second.find(expected), std::string::npos) << args << "\n" << r->second;
        EXPECT_FALSE(fs::exists(dir.path() / "big.gguf")) << args;
    }
}

// A spec within synth's limits that this machine cannot hold: one line
// saying so, not a bare std::bad_alloc.
TEST(CliOptions, SynthOutOfMemoryIsOneLineSayingSo) {
    TempDir dir;
    // A 2.25 GiB Q4_0 embedding table (shared as the output) under the 2 GiB
    // limit: small enough on disk that synth's free-space check, which comes
    // first, passes on any test machine.
    const auto r = synth_limited(dir,
                                 "--n-vocab 4194304 --n-embd 1024 --n-layer 1 --n-ff 256 --n-head "
                                 "8 --n-head-kv 8 --tied --type q4_0");
    if (!r) GTEST_SKIP() << kNoAddressSpaceLimit;
    EXPECT_EQ(r->first, 1) << r->second;
    ASSERT_EQ(lines_of(r->second).size(), 1u) << r->second;
    EXPECT_NE(r->second.find("synth: out of memory"), std::string::npos) << r->second;
    EXPECT_NE(r->second.find("GiB"), std::string::npos) << r->second;
    EXPECT_EQ(r->second.find("bad_alloc"), std::string::npos) << r->second;
    EXPECT_FALSE(fs::exists(dir.path() / "big.gguf"));
}

// A file that is not a sentencepiece model: one line naming it and what is
// wrong, without sentencepiece's source locations.
TEST(CliOptions, ANonSentencepieceVocabIsOneClearLine) {
    TempDir dir;
    const fs::path bad = dir.write("bad.model", std::string("\x07\x07\x07\x07", 4));
    const auto r =
        run_dwell({"synth", "--vocab", bad.string(), "-o", (dir.path() / "o.gguf").string()});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    ASSERT_EQ(lines_of(r.err).size(), 1u) << r.err;
    EXPECT_NE(
        r.err.find(bad.string() + ": not a usable sentencepiece model (protobuf parse failed)"),
        std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find(".cc("), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dwell::test
