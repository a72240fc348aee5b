// A model file truncated or rewritten in place (`cp new.gguf served.gguf`)
// while a session uses it: with mapped weights the next step fails in one
// line naming the file and the process lives on; with loaded weights the
// step succeeds, since they no longer depend on the file. Each scenario runs
// in a re-executed child (threadsafe death test), so a SIGBUS is a failing
// test, not a crashed suite.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

enum class Change { Truncate, RewriteInPlace };

// Loads a copy of `model` with `weights`, decodes a prompt, changes the
// copy on disk, decodes one more token, prints the outcome and exits 0 (a
// SIGBUS ends it otherwise).
[[noreturn]] void decode_after_change(const fs::path& model, const std::string& weights,
                                      Change change) {
    TempDir dir;
    const fs::path copy = dir.path() / "served.gguf";
    fs::copy_file(model, copy);
    RuntimeOptions o;
    o.manifest = dir.write("m.toml",
                           "[device]\nname = \"change test\"\n[[backend]]\nplugin = \"cpu\"\n"
                           "[memory]\nweights = \"" +
                               weights + "\"\n");
    o.threads = 2;
    Runtime rt(o);
    auto m = Model::load(rt, copy);
    Session s(rt, m, SessionOptions{});
    s.decode(m->tokenizer().encode("Once upon a time", true));
    if (change == Change::Truncate) {
        fs::resize_file(copy, fs::file_size(copy) / 3);
    } else {
        const std::string bytes = read_file(model);
        std::ofstream(copy, std::ios::binary | std::ios::trunc) << bytes;
    }
    const int32_t next = 5;
    try {
        s.decode(std::span<const int32_t>(&next, 1));
        std::fprintf(stderr, "decoded\n");
    } catch (const Error& e) {
        const std::string what = e.what();
        std::fprintf(stderr, "failed: %s%s\n", what.c_str(),
                     what.find('\n') == std::string::npos ? "" : " (MORE THAN ONE LINE)");
    }
    // Later steps fail the same way rather than run on changed bytes.
    try {
        s.decode(std::span<const int32_t>(&next, 1));
        std::fprintf(stderr, "then decoded\n");
    } catch (const Error&) {
        std::fprintf(stderr, "then failed\n");
    }
    std::fflush(stderr);
    std::_Exit(0);
}

class MappedModelChange : public ::testing::Test {
protected:
    void SetUp() override {
        use_threadsafe_death_tests_where_possible();
        model_ = model_path("stories260K.gguf");
        if (model_.empty()) GTEST_SKIP() << "stories260K.gguf missing";
    }
    fs::path model_;
};

TEST_F(MappedModelChange, MappedWeightsTruncatedFailTheStepNamingTheFile) {
    EXPECT_EXIT(decode_after_change(model_, "mmap", Change::Truncate), ::testing::ExitedWithCode(0),
                "failed: [^\n]*served.gguf: the file changed size while in use \\([0-9]+ bytes "
                "mapped, [0-9]+ now\\): [^\n]*--weights load\nthen failed");
}

TEST_F(MappedModelChange, MappedWeightsRewrittenInPlaceFailTheStepNamingTheFile) {
    EXPECT_EXIT(decode_after_change(model_, "mmap", Change::RewriteInPlace),
                ::testing::ExitedWithCode(0),
                "failed: [^\n]*served.gguf: the file was rewritten in place while in use");
}

TEST_F(MappedModelChange, LoadedWeightsDoNotDependOnTheFileAfterLoading) {
    EXPECT_EXIT(decode_after_change(model_, "load", Change::Truncate), ::testing::ExitedWithCode(0),
                "decoded\nthen decoded");
}

}  // namespace
}  // namespace dwell::test
