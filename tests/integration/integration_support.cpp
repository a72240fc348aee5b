#include "integration_support.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "dwell/core/generate.hpp"
#include "dwell/core/model.hpp"
#include "dwell/core/sampler.hpp"
#include "dwell/core/session.hpp"
#include "dwell/core/synthetic_model.hpp"
#include "test_paths.hpp"

namespace dwell::test {

namespace fs = std::filesystem;

fs::path test_plugin_dir() {
    return fs::path(DWELL_TEST_BIN_DIR) / ".." / "test-plugins";
}
fs::path dwell_binary() {
    return fs::path(DWELL_TEST_BIN_DIR) / "dwell";
}

TempDir::TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("dwell-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

fs::path TempDir::write(const std::string& name, const std::string& content) const {
    fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
}

SyntheticLlamaSpec small_model_spec() {
    SyntheticLlamaSpec spec;
    spec.n_embd = 64;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 128;
    spec.n_vocab = 512;
    spec.n_ctx = 128;
    spec.dtype = DWELL_Q8_0;
    spec.weight_std = 0.1f;
    return spec;
}

fs::path write_small_model(const TempDir& dir) {
    const fs::path p = dir.path() / "small.gguf";
    write_synthetic_llama(small_model_spec(), p);
    return p;
}

std::vector<int32_t> greedy_ids(Runtime& runtime, const fs::path& model_path,
                                const std::string& prompt, int32_t n,
                                std::optional<dwell_dtype> kv_dtype) {
    auto model = Model::load(runtime, model_path);
    SessionOptions so;
    so.kv_dtype = kv_dtype;
    Session session(runtime, model, so);
    SamplerParams sp;
    sp.temperature = 0;
    Sampler sampler(sp);
    std::vector<int32_t> ids = model->tokenizer().encode(prompt, true);
    std::vector<int32_t> prompt_ids = ids;
    generate(session, prompt_ids, n, sampler, [&](int32_t t) {
        ids.push_back(t);
        return true;
    });
    return ids;
}

namespace {

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

CommandResult run_dwell(const std::vector<std::string>& args, const std::string& input) {
    TempDir tmp;
    const fs::path out = tmp.path() / "out", err = tmp.path() / "err";
    const fs::path in = tmp.write("in", input);
    std::vector<std::string> argv_s = emulator_prefix();
    argv_s.push_back(dwell_binary().string());
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    CommandResult r;
    const pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr) ||
            !freopen(in.c_str(), "r", stdin))
            _exit(127);
        std::vector<char*> argv;
        for (auto& a : argv_s) argv.push_back(a.data());
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());  // an emulator is found in PATH
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

namespace {

std::vector<int32_t> parse_ids(const std::string& list) {
    std::vector<int32_t> ids;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) ids.push_back(std::stoi(item));
    return ids;
}

}  // namespace

// Reads the prompts, ids, logits and the BOS-only text out of the Markdown.
Reference load_reference(const std::filesystem::path& md) {
    std::ifstream in(md);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    Reference ref;
    const std::regex heading(R"re(## "([^"]+)" )re");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), heading);
         it != std::sregex_iterator(); ++it) {
        ReferenceCase c;
        c.prompt = (*it)[1];
        const size_t from = static_cast<size_t>(it->position());
        const size_t full = text.find("full sequence ids", from);
        const size_t open = text.find('[', full), close = text.find(']', open);
        c.full_ids = parse_ids(text.substr(open + 1, close - open - 1));
        const size_t top = text.find("top-5", close);
        const size_t line = text.find('\n', top) + 1;
        const std::string pairs = text.substr(line, text.find('\n', line) - line);
        const std::regex pair(R"((\d+):(-?[0-9.]+))");
        for (auto p = std::sregex_iterator(pairs.begin(), pairs.end(), pair);
             p != std::sregex_iterator(); ++p) {
            c.top5.emplace_back(std::stoi((*p)[1]), std::stof((*p)[2]));
        }
        ref.cases.push_back(c);
    }
    const size_t empty = text.find("## Empty prompt");
    const size_t fence = text.find("```", empty);
    const size_t body = text.find('\n', fence) + 1;
    ref.bos_only_text = text.substr(body, text.find("```", body) - body);
    while (!ref.bos_only_text.empty() && ref.bos_only_text.back() == '\n')
        ref.bos_only_text.pop_back();
    return ref;
}

void Stories260KReference::SetUp() {
    model_ = model_path("stories260K.gguf");
    if (model_.empty()) GTEST_SKIP() << "stories260K.gguf not found in " << models_dir();
    const auto md = reference_dir() / "stories260K.md";
    if (!std::filesystem::exists(md)) GTEST_SKIP() << "reference " << md << " not found";
    ref_ = load_reference(md);
    ASSERT_GE(ref_.cases.size(), 2u) << "could not parse " << md;
}

}  // namespace dwell::test
