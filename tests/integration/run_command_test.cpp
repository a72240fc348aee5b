// `dwell run -i`: each line typed continues the same text. The last token
// of a reply is not in the session when generation ends (generate()'s
// contract), so the next line must go in after it: the transcript equals
// a greedy generation through the library that feeds it.
#include <gtest/gtest.h>

#include "dwell/core/llm/generate.hpp"
#include "dwell/core/llm/sampler.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

// Greedy text of one turn: `input` fed, then n tokens; `last` is the last
// token handed out (not yet fed), -1 after EOS.
std::string greedy_turn(Session& s, Sampler& sampler, std::vector<int32_t> input, int32_t n,
                        int32_t& last, bool strip) {
    StreamDecoder dec(s.model().tokenizer(), strip);
    std::string text;
    const GenerationStats st = generate(s, input, n, sampler, [&](int32_t t) {
        last = t;
        text += dec.push(t);
        return true;
    });
    if (st.stopped_at_eos) last = -1;
    return text + dec.finish();
}

TEST(RunCommand, InteractiveLinesContinueAfterTheLastGeneratedToken) {
    const auto model_path = dwell::test::model_path("stories260K.gguf");
    if (model_path.empty()) GTEST_SKIP() << "stories260K.gguf not found in " << models_dir();
    TempDir dir;
    const auto manifest =
        dir.write("cpu.toml", "[[backend]]\nplugin = \"cpu\"\n[cpu]\nthreads = 1\n");
    // A case where the dropped token changes the continuation (stories260K
    // often carries on the same either way).
    const std::string prompt = "Tom had a red ball", line1 = " and", line2 = " Then";
    const int32_t n = 8;

    RuntimeOptions o;
    o.manifest = manifest;
    Runtime runtime(o);
    auto model = Model::load(runtime, model_path);
    Session s(runtime, model);
    SamplerParams sp;
    sp.temperature = 0;
    Sampler sampler(sp);
    const Tokenizer& tok = model->tokenizer();
    int32_t last = -1;
    const std::string first = greedy_turn(s, sampler, tok.encode(prompt, true), n, last, false);
    std::vector<std::string> expected = {prompt + first};
    for (const std::string& line : {line1, line2}) {
        std::vector<int32_t> input;
        if (last >= 0) input.push_back(last);
        const auto typed = tok.encode(line, false);
        input.insert(input.end(), typed.begin(), typed.end());
        expected.push_back(greedy_turn(s, sampler, input, n, last, false));
    }

    const auto r =
        run_dwell({"run", "-m", model_path.string(), "-p", prompt, "-n", std::to_string(n),
                   "--temp", "0", "--manifest", manifest.string(), "-i"},
                  line1 + "\n" + line2 + "\n/quit\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string want;
    for (const auto& e : expected) want += e + "\n";
    EXPECT_EQ(r.out, want);
}

// --print-ids prints the ids a greedy generation through the library hands
// out, comma-separated, and nothing of the prompt or the text.
TEST(RunCommand, PrintIdsGivesTheGeneratedTokenIds) {
    const auto model_path = dwell::test::model_path("stories260K.gguf");
    if (model_path.empty()) GTEST_SKIP() << "stories260K.gguf not found in " << models_dir();
    TempDir dir;
    const auto manifest =
        dir.write("cpu.toml", "[[backend]]\nplugin = \"cpu\"\n[cpu]\nthreads = 1\n");
    const std::string prompt = "Tom had a red ball";
    const int32_t n = 12;
    RuntimeOptions o;
    o.manifest = manifest;
    Runtime runtime(o);
    auto model = Model::load(runtime, model_path);
    Session s(runtime, model);
    SamplerParams sp;
    sp.temperature = 0;
    Sampler sampler(sp);
    std::string want;
    generate(s, model->tokenizer().encode(prompt, true), n, sampler, [&](int32_t t) {
        want += (want.empty() ? "" : ",") + std::to_string(t);
        return true;
    });
    const auto r =
        run_dwell({"run", "-m", model_path.string(), "-p", prompt, "-n", std::to_string(n),
                   "--temp", "0", "--manifest", manifest.string(), "--print-ids"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want + "\n");
    const auto both = run_dwell({"run", "-m", model_path.string(), "--print-ids", "-i"});
    EXPECT_EQ(both.exit_code, 2) << both.err;
    EXPECT_NE(both.err.find("--print-ids is for one generation"), std::string::npos) << both.err;
}

// --sparsity 0 is off: the same greedy tokens as without the flag, on the
// real model; a sparsity that zeroes most inputs changes them (it is on).
TEST(RunCommand, SparsityZeroGivesTheTokensOfNoSparsity) {
    const auto model_path = dwell::test::model_path("stories260K.gguf");
    if (!std::filesystem::exists(model_path)) GTEST_SKIP() << "stories260K.gguf not present";
    auto run = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {
            "run",    "-m", model_path.string(), "-p", "Once upon a time", "-n", "24",
            "--temp", "0",  "--threads",         "2"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = run_dwell(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        return r.out;
    };
    const std::string plain = run({});
    EXPECT_EQ(run({"--sparsity", "0"}), plain);
    EXPECT_NE(run({"--sparsity", "0.9"}), plain);
}

// The core logs through spdlog's default logger, which the CLI sets up: -v
// must reach the library's info logs (the backend it selected), and the
// default level must keep them out. Both break when libdwell and the CLI
// hold two spdlog registries (core/CMakeLists.txt: libdwell's symbols are
// hidden, so only the shared libspdlog makes the registry one).
TEST(RunCommand, VerboseShowsTheLibrarysInfoLogsAndTheDefaultHidesThem) {
    const auto model_path = dwell::test::model_path("stories260K.gguf");
    if (model_path.empty()) GTEST_SKIP() << "stories260K.gguf not found in " << models_dir();
    TempDir dir;
    const auto manifest =
        dir.write("cpu.toml", "[[backend]]\nplugin = \"cpu\"\n[cpu]\nthreads = 1\n");
    const std::vector<std::string> args = {
        "run", "-m",         model_path.string(), "-p", "Once", "-n", "2", "--temp",
        "0",   "--manifest", manifest.string()};
    const std::string selected = "info: backend cpu/";  // "... cpu/cpu0 selected (path)"

    std::vector<std::string> verbose = args;
    verbose.push_back("-v");
    const auto v = run_dwell(verbose);
    ASSERT_EQ(v.exit_code, 0) << v.err;
    EXPECT_NE(v.err.find(selected), std::string::npos) << v.err;
    EXPECT_NE(v.err.find(" selected ("), std::string::npos) << v.err;
    EXPECT_EQ(v.out.find(selected), std::string::npos) << v.out;  // logs go to stderr

    const auto quiet = run_dwell(args);
    ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
    EXPECT_EQ(quiet.err.find("selected"), std::string::npos) << quiet.err;
    EXPECT_EQ(quiet.out.find("selected"), std::string::npos) << quiet.out;
}

}  // namespace
}  // namespace dwell::test
