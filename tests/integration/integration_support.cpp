#include "integration_support.hpp"

#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>
#include <regex>
#include <span>
#include <sstream>
#include <stdexcept>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/llm/generate.hpp"
#include "dwell/core/llm/sampler.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/gguf_metadata_copy.hpp"
#include "dwell/tools/gguf_writer.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "test_paths.hpp"

namespace dwell::test {

namespace fs = std::filesystem;

fs::path test_plugin_dir() {
    return fs::path(DWELL_TEST_BIN_DIR) / ".." / "test-plugins";
}
fs::path dwell_binary() {
    return fs::path(DWELL_TEST_BIN_DIR) / "dwell";
}

SyntheticModelSpec small_model_spec() {
    SyntheticModelSpec spec;
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
    write_synthetic_model(small_model_spec(), p);
    return p;
}

SyntheticModelSpec family_reference_spec(SyntheticFamily family) {
    SyntheticModelSpec s;
    s.family = family;
    s.n_embd = 128;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 256;
    s.n_vocab = 1024;
    s.n_ctx = 256;
    s.dtype = DWELL_F32;
    s.weight_std = 0.05f;
    s.norm_jitter = 0.2f;
    s.rms_eps = 1e-6f;
    switch (family) {
        case SyntheticFamily::llama:
            s.seed = 11;
            break;
        case SyntheticFamily::qwen2:
            s.bias_std = 0.3f;
            s.tied_output = true;
            s.seed = 12;
            break;
        case SyntheticFamily::gemma:
            s.head_dim = 48;  // 4 heads of 48: q is 192 wide, n_embd 128
            s.seed = 13;
            break;
        case SyntheticFamily::mixtral:
            s.n_ff = 128;
            s.n_expert = 4;
            s.n_expert_used = 2;
            s.router_std = 0.15f;
            s.seed = 14;
            break;
        case SyntheticFamily::qwen3:
            s.head_dim = 48;  // q is 192 wide, n_embd 128: the norms are per head
            s.tied_output = true;
            s.seed = 15;
            break;
        case SyntheticFamily::qwen3moe:
            s.head_dim = 48;
            s.n_ff = 64;  // per expert
            s.n_expert = 8;
            s.n_expert_used = 3;
            s.router_std = 0.15f;
            s.seed = 16;
            break;
        case SyntheticFamily::smollm3:
            s.n_layer = 5;  // layer 3 has no RoPE; layer 4 has it again
            s.tied_output = true;
            s.seed = 17;
            break;
        // Gemma 2/3: 4 and 6 layers with a window of 8 (shorter than the 48
        // reference positions) on the local ones; gemma2's soft-caps are set
        // where the synthetic scores and logits reach them.
        case SyntheticFamily::gemma2:
            s.n_layer = 4;
            s.head_dim = 48;
            s.sliding_window = 8;
            s.attn_softcap = 1.5f;
            s.final_softcap = 2.0f;
            s.rope_freq_base_swa = 5000.0f;
            s.seed = 21;
            break;
        case SyntheticFamily::gemma3:
            s.n_layer = 6;
            s.head_dim = 48;
            s.sliding_window = 8;
            s.rope_freq_base = 1000000.0f;
            s.rope_freq_base_swa = 10000.0f;
            s.final_softcap = 2.0f;
            s.seed = 16;
            break;
        // LFM2: six layers, attention at 2 and 5 between short convolutions
        // of 3 taps; GQA (4 query heads on 2 KV heads) with jittered
        // QK-norms, tied output.
        case SyntheticFamily::lfm2:
            s.n_layer = 6;
            s.conv_l_cache = 3;
            s.tied_output = true;
            s.seed = 23;
            break;
        // Qwen3.5: four layers, delta nets at 0..2 (two key heads, four
        // value heads of 32, a 4-tap convolution), gated full attention at
        // 3 (GQA 4 on 2, rotary on 16 of 32 dims), jittered norms, an
        // output of its own (a tied one makes greedy repeat the last token).
        case SyntheticFamily::qwen35:
            s.n_layer = 4;
            s.head_dim = 32;
            s.conv_l_cache = 4;
            s.seed = 25;
            break;
        case SyntheticFamily::llama3:
        case SyntheticFamily::phi3:
            break;  // llama3_phi3_spec() in llama3_phi3_reference_test.cpp
    }
    return s;
}

fs::path edited_gguf_copy(const fs::path& from, const GgufEdit& edit, const fs::path& to) {
    const GgufFile src = GgufFile::open(from);
    GgufWriter w(src.alignment());
    copy_gguf_metadata(src, w, [&](std::string_view k) { return k != edit.key; });
    if (!edit.key.empty() && edit.value) w.add_int32(edit.key, *edit.value);
    if (!edit.key.empty() && edit.text) w.add_string(edit.key, *edit.text);
    for (const auto& t : src.tensors()) {
        const bool edited = !edit.tensor.empty() && t.name == edit.tensor;
        if (edited && edit.renamed.empty()) continue;
        w.add_tensor(edited ? edit.renamed : t.name, t.dtype,
                     std::span<const int64_t>(t.ne, static_cast<size_t>(t.n_dims)),
                     std::span<const uint8_t>(t.data, t.size));
    }
    w.write(to);
    return to;
}

std::string model_load_error(const fs::path& model) {
    Runtime runtime;
    try {
        Model::load(runtime, model);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string sha256_of(const fs::path& path) {
    const std::string bytes = read_file(path);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr))
        throw std::runtime_error("sha256 of " + path.string() + " failed");
    std::string hex;
    char buf[3];
    for (unsigned int i = 0; i < len; ++i) {
        std::snprintf(buf, sizeof buf, "%02x", digest[i]);
        hex += buf;
    }
    return hex;
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
    r.out = read_file(out);
    r.err = read_file(err);
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
    const std::string text = read_file(md);
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

RuntimeOptions session_options(const TempDir& dir, const std::string& name, int prefix_cache_mb) {
    // Built with append: GCC 12's -Wrestrict misreads a chain of operator+.
    std::string text = "[device]\nname = \"";
    text.append(name).append("\"\n[[backend]]\nplugin = \"cpu\"\n[kv]\ndtype = \"f16\"\n");
    text.append("prefix_cache_mb = ").append(std::to_string(prefix_cache_mb)).append("\n");
    std::string file = "m";
    file.append(std::to_string(prefix_cache_mb)).append(".toml");
    RuntimeOptions o;
    o.manifest = dir.write(file, text);
    o.threads = 2;
    return o;
}

std::vector<int32_t> spread_prompt(int32_t n, int32_t seed) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i)
        ids[static_cast<size_t>(i)] = (i * 37 + seed * 101 + 7) % 500 + 3;
    return ids;
}

int32_t argmax_of(std::span<const float> v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<float> to_vector(std::span<const float> v) {
    return {v.begin(), v.end()};
}

StepTrace trace_greedy(Session& s, int32_t n) {
    StepTrace t;
    t.logits.push_back(to_vector(s.last_logits()));
    for (int32_t i = 0; i < n; ++i) {
        const int32_t next = argmax_of(t.logits.back());
        t.tokens.push_back(next);
        t.logits.push_back(to_vector(s.decode(std::span<const int32_t>(&next, 1))));
    }
    return t;
}

std::vector<std::vector<float>> replay_one_per_step(Session& s, std::span<const int32_t> tokens) {
    std::vector<std::vector<float>> out{to_vector(s.last_logits())};
    for (int32_t t : tokens) out.push_back(to_vector(s.decode(std::span<const int32_t>(&t, 1))));
    return out;
}

bool recurrent_state_is_zero(const Session& s) {
    const auto v = s.recurrent_state().all();
    return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
}

StepTrace independent_trace(const TempDir& dir, const std::string& name,
                            const std::filesystem::path& model, std::span<const int32_t> prompt,
                            int32_t n, const SessionOptions& so) {
    Runtime runtime(session_options(dir, name, 0));
    auto loaded = Model::load(runtime, model);
    Session s(runtime, loaded, so);
    s.decode(prompt);
    return trace_greedy(s, n);
}

}  // namespace dwell::test
