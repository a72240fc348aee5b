// Several model plugins serving one general.architecture: "llama" files
// are dense (the llama plugin) or mixture-of-experts (the mixtral plugin).
// The host offers a file to each in turn; the one whose variant it is
// serves it, the others decline, and when every one declines the error is
// one line with each plugin's reason.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

// small_model_spec() with 4 experts, 2 per token, in F32.
fs::path write_moe(const TempDir& dir) {
    SyntheticModelSpec s = small_model_spec();
    s.family = SyntheticFamily::mixtral;
    s.dtype = DWELL_F32;
    s.n_expert = 4;
    s.n_expert_used = 2;
    const fs::path p = dir.path() / "moe.gguf";
    write_synthetic_model(s, p);
    return p;
}

// Runs a copy of the dwell binary and of libdwell (the loader also looks
// beside the library) whose plugin folder, lib/dwell, holds only `plugins`,
// with a cpu-only manifest; returns its stderr, and its exit code in *code.
std::string run_with_only(const TempDir& dir, const std::vector<std::string>& plugins,
                          const std::vector<std::string>& args, int* code) {
    const fs::path bin = dir.path() / "bin", lib = dir.path() / "lib";
    fs::create_directories(bin);
    fs::create_directories(lib / "dwell");
    const fs::path build_lib = fs::path(DWELL_TEST_BIN_DIR) / ".." / "lib";
    fs::copy_file(dwell_binary(), bin / "dwell", fs::copy_options::overwrite_existing);
    fs::copy_file(build_lib / "libdwell.so", lib / "libdwell.so",
                  fs::copy_options::overwrite_existing);
    for (const auto& p : plugins) {
        const std::string file = "libdwell-" + p + ".so";
        fs::copy_file(fs::path(DWELL_TEST_PLUGIN_DIR) / file, lib / "dwell" / file,
                      fs::copy_options::overwrite_existing);
    }
    const fs::path manifest = dir.write("cpu.toml",
                                        "[device]\nname = \"cpu only\"\n\n"
                                        "[[backend]]\nplugin = \"cpu\"\n");
    // The binary's RUNPATH yields to LD_LIBRARY_PATH: the copy of libdwell is used.
    std::string cmd = "env -u DWELL_PLUGIN_PATH LD_LIBRARY_PATH='" + lib.string() + "'";
    for (const auto& w : emulator_prefix()) cmd += " '" + w + "'";
    cmd += " '" + (bin / "dwell").string() + "'";
    for (const auto& a : args) cmd += " '" + a + "'";
    const fs::path err = dir.path() / "stderr";
    cmd += " --manifest '" + manifest.string() + "' >/dev/null 2>'" + err.string() + "'";
    const int status = std::system(cmd.c_str());
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return read_file(err);
}

bool one_line(std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return !s.empty() && s.find('\n') == std::string::npos;
}

// What `dwell run` says of `model` when lib/dwell holds only `plugins`: it
// must fail (exit code 1) in one line, which is returned.
std::string refusal_with_only(const TempDir& dir, const std::vector<std::string>& plugins,
                              const fs::path& model) {
    int code = 0;
    const std::string err =
        run_with_only(dir, plugins, {"run", "-m", model.string(), "-p", "a", "-n", "1"}, &code);
    EXPECT_EQ(code, 1) << err;
    EXPECT_TRUE(one_line(err)) << err;
    return err;
}

TEST(ModelPluginChoice, MixtureOfExpertsLlamaFileIsServedByMixtral) {
    TempDir dir;
    Runtime runtime;
    auto model = Model::load(runtime, write_moe(dir));
    EXPECT_EQ(model->architecture(), "llama");
    EXPECT_EQ(model->plugin().name(), "mixtral");
    Session session(runtime, model);
    const std::vector<int32_t> ids = {1, 300, 301};
    const auto logits = session.decode(ids);
    ASSERT_EQ(logits.size(), 512u);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(ModelPluginChoice, DenseLlamaFileIsServedByLlama) {
    TempDir dir;
    Runtime runtime;
    auto model = Model::load(runtime, write_small_model(dir));
    EXPECT_EQ(model->architecture(), "llama");
    EXPECT_EQ(model->plugin().name(), "llama");
}

TEST(ModelPluginChoice, WithoutMixtralTheErrorGivesTheLlamaPluginsReason) {
    TempDir dir;
    const fs::path moe = write_moe(dir);
    const std::string err = refusal_with_only(dir, {"cpu", "llama"}, moe);
    EXPECT_NE(err.find(moe.string()), std::string::npos) << err;
    EXPECT_NE(err.find("declined"), std::string::npos) << err;
    EXPECT_NE(err.find("llama: llama.expert_count = 4: a mixture-of-experts model, served by the "
                       "mixtral plugin"),
              std::string::npos)
        << err;
}

TEST(ModelPluginChoice, WithoutLlamaTheErrorGivesTheMixtralPluginsReason) {
    TempDir dir;
    const fs::path dense = write_small_model(dir);
    const std::string err = refusal_with_only(dir, {"cpu", "mixtral"}, dense);
    EXPECT_NE(err.find("mixtral: llama.expert_count is absent or 0: a dense model, served by the "
                       "llama plugin"),
              std::string::npos)
        << err;
}

TEST(ModelPluginChoice, ExpertCountsOutsideTheirRangeAreRefusedNamingTheKey) {
    TempDir dir;
    const fs::path moe = write_moe(dir);
    struct Case {
        const char* key;
        int32_t value;
        const char* expected;
    };
    for (const Case& c :
         {Case{"llama.expert_used_count", 5, "llama.expert_used_count = 5 is outside 1..4"},
          Case{"llama.expert_used_count", 0, "llama.expert_used_count = 0 is outside 1..4"},
          Case{"llama.expert_count", 300, "llama.expert_count = 300 is outside 1..256"},
          Case{"llama.expert_count", -2, "llama.expert_count = -2 is outside 1..256"}}) {
        const fs::path bad =
            edited_gguf_copy(moe, {.key = c.key, .value = c.value}, dir.path() / "bad.gguf");
        const std::string msg = model_load_error(bad);
        EXPECT_NE(msg.find("the mixtral model plugin refused the model: metadata key " +
                           std::string(c.expected)),
                  std::string::npos)
            << c.key << " = " << c.value << ": " << msg;
        EXPECT_NE(msg.find(bad.string()), std::string::npos) << msg;
        EXPECT_TRUE(one_line(msg)) << msg;
    }
}

TEST(ModelPluginChoice, ExpertsStoredAsSeparateTensorsAreRefusedSayingSo) {
    TempDir dir;
    const fs::path old_layout = edited_gguf_copy(
        write_moe(dir),
        {.tensor = "blk.0.ffn_gate_exps.weight", .renamed = "blk.0.ffn_gate.0.weight"},
        dir.path() / "old.gguf");
    const std::string msg = model_load_error(old_layout);
    EXPECT_NE(msg.find("the mixtral model plugin refused the model: tensor "
                       "blk.0.ffn_gate.0.weight: the experts are stored as separate tensors"),
              std::string::npos)
        << msg;
    EXPECT_TRUE(one_line(msg)) << msg;
}

}  // namespace
}  // namespace dwell::test
