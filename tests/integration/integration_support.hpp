// Helpers shared by the integration tests: a runtime wired to the build's
// plugins, greedy generation, running the `dwell` binary, temp files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dwell/core/runtime.hpp"
#include "dwell/core/synthetic_model.hpp"

namespace dwell::test {

// Folder with this build's test-only plugins (abi2, partial).
std::filesystem::path test_plugin_dir();
std::filesystem::path dwell_binary();

// A manifest file in a fresh temp folder; removed with the object.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path write(const std::string& name, const std::string& content) const;

private:
    std::filesystem::path path_;
};

// A small synthetic Llama (2 layers, Q8_0, vocab 512): its shape, and the
// file written into `dir`.
SyntheticLlamaSpec small_model_spec();
std::filesystem::path write_small_model(const TempDir& dir);

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
