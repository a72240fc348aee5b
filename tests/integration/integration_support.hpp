// Helpers shared by the integration tests: a runtime wired to the build's
// plugins, greedy generation, running the `dwell` binary, temp files,
// synthetic models and edited copies of GGUF files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "test_dirs.hpp"

namespace dwell::test {

// Folder with this build's test-only plugins (abi2, partial).
std::filesystem::path test_plugin_dir();
std::filesystem::path dwell_binary();

// A small synthetic Llama (2 layers, Q8_0, vocab 512): its shape, and the
// file written into `dir`.
SyntheticModelSpec small_model_spec();
std::filesystem::path write_small_model(const TempDir& dir);

// The small synthetic model of each family whose logits llama.cpp computed
// for tests/data/families/<family>.logits: every feature of the family in
// play, F32 weights large enough that attention and the FFN dominate the
// residual stream. A change here changes the files' sha256.
SyntheticModelSpec family_reference_spec(SyntheticFamily family);

// Runtime options for session tests: a cpu-only manifest written into
// `dir` (device `name`, F16 KV, the given prefix cache), two threads.
RuntimeOptions session_options(const TempDir& dir, const std::string& name, int prefix_cache_mb);
// n token ids spread over 3..502, different per seed.
std::vector<int32_t> spread_prompt(int32_t n, int32_t seed);
int32_t argmax_of(std::span<const float> v);
std::vector<float> to_vector(std::span<const float> v);

// What a session computed: the logits after its input, then after each
// token fed one per step.
struct StepTrace {
    std::vector<int32_t> tokens;  // the greedy continuation (reference traces)
    std::vector<std::vector<float>> logits;
};
// Greedy: n tokens after what the session holds, one per step.
StepTrace trace_greedy(Session& s, int32_t n);
// Feeds `tokens` one per step; the logits after each, led by the current ones.
std::vector<std::vector<float>> replay_one_per_step(Session& s, std::span<const int32_t> tokens);
// Whether every value of the session's recurrent state is zero.
bool recurrent_state_is_zero(const Session& s);
// The reference the stateful sessions are compared against: a session of
// its own runtime (session_options(dir, name, 0): no prefix cache) fed
// `prompt` in one call, then n greedy tokens.
StepTrace independent_trace(const TempDir& dir, const std::string& name,
                            const std::filesystem::path& model, std::span<const int32_t> prompt,
                            int32_t n, const SessionOptions& so = {});

// What to change in a copy of a GGUF file (edited_gguf_copy).
struct GgufEdit {
    std::string key{};                  // an integer metadata key to set or drop; empty: none
    std::optional<int32_t> value{};     // its new value; nullopt: the key is dropped
    std::string tensor{};               // a tensor to rename or drop; empty: none
    std::string renamed{};              // its new name; empty: the tensor is dropped
    std::optional<std::string> text{};  // `key` set to this string instead (a wrong type)
};
// Writes the GGUF file `from`, with `edit` applied, to `to`; returns `to`.
std::filesystem::path edited_gguf_copy(const std::filesystem::path& from, const GgufEdit& edit,
                                       const std::filesystem::path& to);

// The message loading `model` fails with, or "" when it loads.
std::string model_load_error(const std::filesystem::path& model);

// A file's bytes ("" when it cannot be read).
std::string read_file(const std::filesystem::path& path);
// The sha256 of a file's bytes in lowercase hex; throws std::runtime_error
// when it cannot be computed.
std::string sha256_of(const std::filesystem::path& path);

// Greedy continuation: prompt ids followed by up to n generated ids.
std::vector<int32_t> greedy_ids(Runtime& runtime, const std::filesystem::path& model,
                                const std::string& prompt, int32_t n,
                                std::optional<dwell_dtype> kv_dtype = std::nullopt);

// What ../shared/reference/stories260K.md records from llama.cpp: per
// prompt the full greedy id sequence and the top-5 next-token logits, and
// the text generated from BOS alone.
struct ReferenceCase {
    std::string prompt;
    std::vector<int32_t> full_ids;
    std::vector<std::pair<int32_t, float>> top5;
};

struct Reference {
    std::vector<ReferenceCase> cases;
    std::string bos_only_text;
};

Reference load_reference(const std::filesystem::path& md);

// A test against stories260K and its llama.cpp reference: SetUp fills
// model_ and ref_, or skips saying which file is missing.
class Stories260KReference : public ::testing::Test {
protected:
    void SetUp() override;
    std::filesystem::path model_;
    Reference ref_;
};

struct CommandResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};
// Runs the dwell binary with `input` as its standard input.
CommandResult run_dwell(const std::vector<std::string>& args, const std::string& input = "");

}  // namespace dwell::test
