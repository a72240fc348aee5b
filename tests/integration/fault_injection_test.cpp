// Fault injection: the test backend "partial" (it runs the graph's adds)
// fails on command — an error status at the Nth call, a hang past its step
// deadline, a wrong-size result — while a generation runs. Each time the
// scheduler reruns that step on the cpu backend, the tokens equal a
// cpu-only run's, the session goes on, and the failing backend is marked
// unhealthy (where the fault calls for it) and reported: a log line and its
// health report.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/config/manifest.hpp"
#include "dwell/core/llm/generate.hpp"
#include "dwell/core/llm/sampler.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "integration_support.hpp"
#include "log_capture.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kTokens = 12;

// Greedy: the prompt, kTokens generated, then kTokens more in the same
// session (the conversation going on after the fault).
std::vector<int32_t> two_turns(Runtime& runtime, const fs::path& model_path) {
    auto model = Model::load(runtime, model_path);
    Session session(runtime, model);
    SamplerParams sp;
    sp.temperature = 0;
    Sampler sampler(sp);
    std::vector<int32_t> ids = model->tokenizer().encode("the dog", true);
    const auto collect = [&](int32_t t) {
        ids.push_back(t);
        return true;
    };
    generate(session, std::vector<int32_t>(ids), kTokens, sampler, collect);
    // The last token is not in the cache yet: it opens the second turn.
    generate(session, std::vector<int32_t>{ids.back()}, kTokens, sampler, collect);
    return ids;
}

class FaultInjection : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = write_small_model(dir_);
        Runtime cpu_only;
        expected_ = two_turns(cpu_only, model_);
        ASSERT_EQ(expected_.size(), 3u + 2 * kTokens);  // BOS, "the", "dog"
    }

    // The partial backend first, with these options (and step deadline),
    // then cpu for everything else.
    RuntimeOptions options(const std::string& partial_options, int32_t step_timeout_ms = 0) {
        std::string text = "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                           "\"]\n\n[[backend]]\nplugin = \"partial\"\noptions = { " +
                           partial_options + " }\n";
        if (step_timeout_ms > 0)
            text += "step_timeout_ms = " + std::to_string(step_timeout_ms) + "\n";
        text += "\n[[backend]]\nplugin = \"cpu\"\n";
        RuntimeOptions o;
        // Appends, not operator+ chains: GCC 12 warns falsely (-Wrestrict) on those.
        std::string name = "m";
        name.append(std::to_string(++manifests_)).append(".toml");
        o.manifest = dir_.write(name, text);
        return o;
    }

    TempDir dir_;
    fs::path model_;
    std::vector<int32_t> expected_;
    int manifests_ = 0;
};

// A deadline so long it never passes: the same path as a real one
// (isolated steps on the backend's thread), without timing.
constexpr int32_t kIsolated = 600000;

TEST_F(FaultInjection, AnErrorAtTheNthCallRerunsThatStepAndTheBackendStaysInUse) {
    for (const int32_t deadline : {0, kIsolated}) {
        SCOPED_TRACE(deadline ? "isolated steps" : "direct calls");
        LogCapture log;
        Runtime rt(options("fail_at = \"10\"", deadline));
        ASSERT_EQ(rt.backends().size(), 2u);
        EXPECT_EQ(two_turns(rt, model_), expected_);
        const BackendHealthReport h = rt.backends()[0]->health().report();
        EXPECT_TRUE(h.healthy);  // one error is not enough
        EXPECT_EQ(h.failed_steps, 1u);
        EXPECT_EQ(h.error_statuses, 1u);
        EXPECT_GT(h.steps_run, 20u);  // it went on computing adds after the failure
        EXPECT_EQ(describe(h),
                  "healthy, " + std::to_string(h.steps_run) + " steps, 1 failed: 1 error status");
        EXPECT_NE(h.last_failure.find("partial/adder0 failed on nodes"), std::string::npos)
            << h.last_failure;
        EXPECT_NE(h.last_failure.find("injected failure (call 10)"), std::string::npos)
            << h.last_failure;
        const std::string text = log.text();
        EXPECT_NE(text.find(h.last_failure + ": running them on the next backend"),
                  std::string::npos)
            << text;
    }
}

TEST_F(FaultInjection, ErrorsFromTheNthCallOnMakeTheBackendUnhealthy) {
    for (const int32_t deadline : {0, kIsolated}) {
        SCOPED_TRACE(deadline ? "isolated steps" : "direct calls");
        LogCapture log;
        Runtime rt(options("fail_from = \"10\"", deadline));
        EXPECT_EQ(two_turns(rt, model_), expected_);
        const Backend& partial = *rt.backends()[0];
        const BackendHealthReport h = partial.health().report();
        EXPECT_FALSE(h.healthy);
        EXPECT_EQ(h.error_statuses, 3u);  // then it got no more nodes
        EXPECT_EQ(h.unhealthy_reason, "unhealthy after 3 failed steps in a row");
        EXPECT_EQ(describe(h), "unhealthy after 3 failed steps in a row (" +
                                   std::to_string(h.steps_run) +
                                   " steps, 3 failed: 3 error statuses)");
        EXPECT_NE(log.text().find("partial/adder0 is now unhealthy after 3 failed steps in a row "
                                  "and gets no more nodes"),
                  std::string::npos)
            << log.text();
        EXPECT_TRUE(rt.backends()[1]->healthy());
    }
}

TEST_F(FaultInjection, AHangPastTheStepDeadlineIsAbandonedAndRerun) {
    // The 10th call sleeps 3 s; the deadline is 1 s, far above what an add
    // takes even under a sanitizer. The hung call finishes writing into its
    // private buffers while the generation goes on (and under ASan, any
    // write into freed memory would be reported); the runtime waits for it
    // when it closes.
    LogCapture log;
    {
        Runtime rt(options("hang_at = \"10\", hang_ms = \"3000\"", 1000));
        EXPECT_EQ(two_turns(rt, model_), expected_);
        const BackendHealthReport h = rt.backends()[0]->health().report();
        EXPECT_FALSE(h.healthy);
        EXPECT_EQ(h.timeouts, 1u);
        EXPECT_EQ(h.unhealthy_reason, "unhealthy after a step ran past its deadline");
        EXPECT_EQ(describe(h), "unhealthy after a step ran past its deadline (" +
                                   std::to_string(h.steps_run) + " steps, 1 failed: 1 timeout)");
        EXPECT_NE(h.last_failure.find("no result within its step_timeout_ms of 1000 ms"),
                  std::string::npos)
            << h.last_failure;
        EXPECT_NE(log.text().find("partial/adder0 is now unhealthy after a step ran past its "
                                  "deadline and gets no more nodes"),
                  std::string::npos)
            << log.text();
        // A new session on the same runtime leaves the backend out.
        auto model = Model::load(rt, model_);
        Session s(rt, model);
        s.decode(model->tokenizer().encode("the dog", true));
        EXPECT_NE(s.placement_summary().find("partial/adder0: no nodes"), std::string::npos)
            << s.placement_summary();
    }
}

TEST_F(FaultInjection, WritingPastAnOutputIsAWrongSizeResult) {
    LogCapture log;
    Runtime rt(options("overrun_at = \"10\"", kIsolated));
    EXPECT_EQ(two_turns(rt, model_), expected_);
    const BackendHealthReport h = rt.backends()[0]->health().report();
    EXPECT_FALSE(h.healthy);
    EXPECT_EQ(h.wrong_sizes, 1u);
    EXPECT_EQ(h.unhealthy_reason, "unhealthy after a wrong-size result");
    // 16 floats past the end of a [64, 1] f32 output: four adds a step, so
    // the 10th call is in the third step, which feeds one token.
    EXPECT_NE(h.last_failure.find("wrote 64 bytes past the end of tensor"), std::string::npos)
        << h.last_failure;
    EXPECT_NE(h.last_failure.find("add"), std::string::npos) << h.last_failure;
    EXPECT_NE(log.text().find("wrong-size result"), std::string::npos) << log.text();
}

TEST_F(FaultInjection, AnOutputReportedWithAnotherShapeIsAWrongSizeResult) {
    for (const int32_t deadline : {0, kIsolated}) {
        SCOPED_TRACE(deadline ? "isolated steps" : "direct calls");
        Runtime rt(options("reshape_at = \"10\"", deadline));
        EXPECT_EQ(two_turns(rt, model_), expected_);
        const BackendHealthReport h = rt.backends()[0]->health().report();
        EXPECT_FALSE(h.healthy);
        EXPECT_EQ(h.wrong_sizes, 1u);
        EXPECT_NE(h.last_failure.find("came back as [64, 2] f32, the graph's is [64, 1] f32"),
                  std::string::npos)
            << h.last_failure;
    }
}

TEST(StepIsolation, EveryOpIsolatedGivesTheSameTokensAcrossKvPages) {
    // The cpu backend with a deadline runs every op, attention over the
    // paged KV cache included, on private copies; 4 KiB pages hold 32 f32
    // rows of the small model's K or V, so 103 positions span four pages.
    TempDir dir;
    const auto model = write_small_model(dir);
    const auto manifest = [&](const std::string& name, const std::string& backend_keys) {
        std::string text = "[memory]\npage_kb = 4\n[kv]\ndtype = \"f32\"\n";
        text.append("[[backend]]\nplugin = \"cpu\"\n").append(backend_keys);
        RuntimeOptions o;
        o.manifest = dir.write(name, text);
        return o;
    };
    Runtime direct(manifest("direct.toml", ""));
    Runtime isolated(manifest("isolated.toml", "step_timeout_ms = 600000\n"));
    const auto expected = greedy_ids(direct, model, "the dog", 100);
    EXPECT_EQ(greedy_ids(isolated, model, "the dog", 100), expected);
    const BackendHealthReport h = isolated.backends()[0]->health().report();
    EXPECT_TRUE(h.healthy);
    EXPECT_EQ(h.failed_steps, 0u);
    EXPECT_GE(h.steps_run, 100u);  // the prompt, then one step per token
}

TEST(StepIsolation, StepTimeoutIsCheckedInTheManifest) {
    const std::string head = "[[backend]]\nplugin = \"cpu\"\n";
    EXPECT_EQ(Manifest::parse(head, "").backends[0].step_timeout_ms, 0);
    EXPECT_EQ(Manifest::parse(head + "step_timeout_ms = 250\n", "").backends[0].step_timeout_ms,
              250);
    for (const std::string bad : {"0", "600001", "\"250\"", "2.5"}) {
        try {
            Manifest::parse(head + "step_timeout_ms = " + bad + "\n", "t.toml");
            FAIL() << bad << " was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("t.toml:3:19: [[backend]] step_timeout_ms must"),
                      std::string::npos)
                << e.what();
        }
    }
}

}  // namespace
}  // namespace dwell::test
