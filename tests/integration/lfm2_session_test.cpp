// Sessions of a hybrid model (lfm2: short-convolution layers that carry a
// state beside attention layers) on the cpu backend: a forked, restored,
// shifted, failed-and-retried or prefix-cached session continues exactly
// like an independent one fed the same tokens, token for token and logits
// bit for bit. The independent session batches its prompt the same way, so
// every float is computed by the same kernels in the same order.
#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/kv/kv_prefix_cache.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "integration_support.hpp"
#include "test_dirs.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

// Layers 0 and 1 are convolutions, layer 2 attends. 8 KV heads of 64: an
// F16 KV row is 1 KiB, so a 16 KiB page holds 16 positions.
fs::path write_hybrid_model(const TempDir& dir) {
    SyntheticModelSpec spec;
    spec.family = SyntheticFamily::lfm2;
    spec.n_embd = 512;
    spec.n_layer = 3;
    spec.n_head = 8;
    spec.n_head_kv = 8;
    spec.n_ff = 256;
    spec.n_vocab = 512;
    spec.n_ctx = 512;
    spec.dtype = DWELL_Q8_0;
    spec.weight_std = 0.1f;
    spec.conv_l_cache = 3;
    spec.tied_output = true;
    spec.seed = 31;
    const fs::path p = dir.path() / "hybrid.gguf";
    write_synthetic_model(spec, p);
    return p;
}

class HybridSessions : public ::testing::Test {
protected:
    void SetUp() override {
        if (!fs::exists(fs::path(DWELL_TEST_PLUGIN_DIR) / "libdwell-lfm2.so"))
            GTEST_SKIP() << "the lfm2 model plugin is not built";
        model_path_ = write_hybrid_model(dir_);
    }
    // A session of its own runtime (no prefix cache) fed `prompt` in one
    // call, then n greedy tokens.
    StepTrace independent(std::span<const int32_t> prompt, int32_t n, SessionOptions so = {}) {
        return independent_trace(dir_, "hybrid session test", model_path_, prompt, n, so);
    }
    TempDir dir_;
    fs::path model_path_;
};

TEST_F(HybridSessions, TheModelCarriesAStateTheSessionHolds) {
    Runtime runtime(session_options(dir_, "hybrid session test", 0));
    auto model = Model::load(runtime, model_path_);
    // n_embd * (L_cache - 1) values per layer, every layer.
    EXPECT_EQ(model->info().state_elems[0], 512 * 2);
    EXPECT_EQ(model->info().state_elems[1], 0);
    Session s(runtime, model);
    EXPECT_EQ(s.recurrent_state().all().size(), 3u * 512 * 2);
    EXPECT_TRUE(recurrent_state_is_zero(s));
    s.decode(spread_prompt(5, 1));
    EXPECT_FALSE(recurrent_state_is_zero(s));
}

// Layers 0 and 1 never attend: only layer 2 gets KV pages.
TEST_F(HybridSessions, OnlyTheAttentionLayersGetKvPages) {
    Runtime runtime(session_options(dir_, "hybrid session test", 0));
    auto model = Model::load(runtime, model_path_);
    Session s(runtime, model);
    s.decode(spread_prompt(20, 14));  // 2 logical pages of 16 positions
    EXPECT_EQ(s.kv_cache().pages_held(), 2 * 1 * 2);
    EXPECT_EQ(runtime.kv_pages().pages_in_use(), 2 * 1 * 2);
    EXPECT_TRUE(s.kv_cache().uses_layer(2));
    EXPECT_FALSE(s.kv_cache().uses_layer(0));
    EXPECT_EQ(s.kv_cache().tensor(0, 0), nullptr);
    EXPECT_EQ(s.kv_cache().page_ids(0)[0], KvCache::kNoPage);
}

TEST_F(HybridSessions, AForkCopiesTheStateAndContinuesLikeAnIndependentSession) {
    const auto prompt = spread_prompt(37, 1);
    const StepTrace want = independent(prompt, 16);
    Runtime runtime(session_options(dir_, "hybrid session test", 0));
    auto model = Model::load(runtime, model_path_);
    Session a(runtime, model);
    a.decode(prompt);
    const std::vector<float> at_fork = to_vector(a.recurrent_state().all());
    std::unique_ptr<Session> b = a.fork();
    EXPECT_EQ(to_vector(b->recurrent_state().all()), at_fork);
    EXPECT_NE(b->recurrent_state().all().data(), a.recurrent_state().all().data());
    // b goes first: a's state must not move with it (copied, not shared).
    EXPECT_EQ(replay_one_per_step(*b, want.tokens), want.logits);
    EXPECT_EQ(to_vector(a.recurrent_state().all()), at_fork);
    EXPECT_EQ(replay_one_per_step(a, want.tokens), want.logits);
}

TEST_F(HybridSessions, ARestoredSessionContinuesLikeAnIndependentSession) {
    const auto prompt = spread_prompt(29, 2);
    const StepTrace want = independent(prompt, 12);
    Runtime runtime(session_options(dir_, "hybrid session test", 0));
    auto model = Model::load(runtime, model_path_);
    const fs::path file = dir_.path() / "hybrid.dwses";
    std::vector<float> saved;
    {
        Session a(runtime, model);
        a.decode(prompt);
        // Four tokens in, so the state holds generated tokens too.
        replay_one_per_step(a, std::span<const int32_t>(want.tokens).first(4));
        saved = to_vector(a.recurrent_state().all());
        a.save(file);
    }
    std::unique_ptr<Session> r = Session::restore(runtime, model, file);
    EXPECT_EQ(to_vector(r->recurrent_state().all()), saved);
    EXPECT_EQ(to_vector(r->last_logits()), want.logits[4]);
    const auto rest = std::span<const int32_t>(want.tokens).subspan(4);
    const std::vector<std::vector<float>> got = replay_one_per_step(*r, rest);
    EXPECT_EQ(got, std::vector<std::vector<float>>(want.logits.begin() + 4, want.logits.end()));
}

// Calls `on_message` for every log line: the test's hook into a step.
class HookSink : public spdlog::sinks::base_sink<std::mutex> {
public:
    explicit HookSink(std::function<void(const std::string&)> f) : f_(std::move(f)) {}

protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        f_(std::string(msg.payload.data(), msg.payload.size()));
    }
    void flush_() override {}

private:
    std::function<void(const std::string&)> f_;
};

TEST_F(HybridSessions, AFailedStepLeavesTheStateAsItWas) {
    SessionOptions so;
    so.n_batch = 8;
    const auto prompt = spread_prompt(20, 3), more = spread_prompt(24, 4);
    Runtime runtime(session_options(dir_, "hybrid session test", 0));
    auto model = Model::load(runtime, model_path_);
    Session s(runtime, model, so);
    s.decode(prompt);
    const std::vector<float> before = to_vector(s.recurrent_state().all());
    const std::vector<float> logits_before = to_vector(s.last_logits());

    // The next step logs its placement before it runs its first batch of
    // 8: the hook cancels then, so the second batch is refused after the
    // first one advanced the state.
    s.use_backend("cpu");
    const auto previous = spdlog::default_logger();
    bool hooked = false;
    auto logger = std::make_shared<spdlog::logger>(
        "hook", std::make_shared<HookSink>([&](const std::string& line) {
            if (line.rfind("placement:", 0) == 0) {
                hooked = true;
                s.cancel();
            }
        }));
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
    try {
        s.decode(more);
        ADD_FAILURE() << "the cancelled step ran to the end";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_CANCELLED) << e.what();
    }
    spdlog::set_default_logger(previous);
    ASSERT_TRUE(hooked);
    s.clear_cancel();
    EXPECT_EQ(s.n_past(), 20);
    EXPECT_EQ(to_vector(s.recurrent_state().all()), before);
    EXPECT_EQ(to_vector(s.last_logits()), logits_before);

    // It goes on as a session that never failed.
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), more.begin(), more.end());
    Runtime other(session_options(dir_, "hybrid session test", 0));
    auto model2 = Model::load(other, model_path_);
    Session clean(other, model2, so);
    clean.decode(prompt);
    EXPECT_EQ(to_vector(clean.decode(more)), to_vector(s.decode(more)));
    EXPECT_EQ(to_vector(clean.recurrent_state().all()), to_vector(s.recurrent_state().all()));
}

// Layers 0 and 1 see no attention: their inputs, and so their states,
// depend on the tokens alone. A shift that kept the state as it is gives
// them the very state of a session that never shifted.
TEST_F(HybridSessions, AContextShiftKeepsTheState) {
    const auto prompt = spread_prompt(64, 5);
    const int32_t next = 42;
    Runtime runtime(session_options(dir_, "hybrid session test", 0));
    auto model = Model::load(runtime, model_path_);
    SessionOptions so;
    so.n_ctx = 64;
    so.on_full = ContextFull::Shift;
    so.n_keep = 8;
    Session a(runtime, model, so);
    a.decode(prompt);
    a.decode(std::span<const int32_t>(&next, 1));
    ASSERT_EQ(a.n_shifted(), 28);

    so = {};
    so.n_ctx = 128;
    Session b(runtime, model, so);
    b.decode(prompt);
    b.decode(std::span<const int32_t>(&next, 1));
    EXPECT_EQ(b.n_shifted(), 0);
    EXPECT_FALSE(recurrent_state_is_zero(a));
    EXPECT_EQ(to_vector(a.recurrent_state().all()), to_vector(b.recurrent_state().all()));
}

// Pages go to the prefix cache with the state after them where a batch
// ended; another session adopts pages up to the last one with a state and
// then continues like an independent session.
TEST_F(HybridSessions, PrefixCachePagesCarryTheStateAfterThem) {
    Runtime runtime(session_options(dir_, "hybrid session test", 64));
    auto model = Model::load(runtime, model_path_);
    const auto base = spread_prompt(50, 6);
    // 50 tokens run as 48 (cut at the page boundary) and 2: only the page
    // ending at 48 has a state.
    Session a(runtime, model);
    a.decode(base);
    EXPECT_EQ(runtime.kv_prefixes().entries(), 3);

    const auto with_tail = [&](size_t n, int32_t seed) {
        std::vector<int32_t> p(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(n));
        const auto tail = spread_prompt(10, seed);
        p.insert(p.end(), tail.begin(), tail.end());
        return p;
    };
    {
        // Three pages and their state adopted, ten tokens computed.
        const auto p = with_tail(48, 7);
        const StepTrace want = independent(p, 8);
        Session b(runtime, model);
        b.decode(p);
        EXPECT_EQ(b.n_cached_tokens(), 48);
        EXPECT_EQ(replay_one_per_step(b, want.tokens), want.logits);
    }
    {
        // Pages 0 and 1 match but have no state, page 2 differs: nothing
        // can be adopted, everything is computed.
        const auto p = with_tail(40, 8);
        const StepTrace want = independent(p, 8);
        Session c(runtime, model);
        c.decode(p);
        EXPECT_EQ(c.n_cached_tokens(), 0);
        EXPECT_EQ(replay_one_per_step(c, want.tokens), want.logits);
    }
    {
        // One token per step leaves a state at every boundary: a prompt
        // sharing two pages with it adopts them.
        const auto p = spread_prompt(33, 9);
        Session d(runtime, model);
        for (int32_t t : p) d.decode(std::span<const int32_t>(&t, 1));
        std::vector<int32_t> q(p.begin(), p.begin() + 32);
        const auto tail = spread_prompt(6, 10);
        q.insert(q.end(), tail.begin(), tail.end());
        Session e(runtime, model);
        e.decode(q);
        EXPECT_EQ(e.n_cached_tokens(), 32);
        // The independent session runs the 32 tokens one per step too.
        Runtime solo(session_options(dir_, "hybrid session test", 0));
        auto solo_model = Model::load(solo, model_path_);
        Session f(solo, solo_model);
        for (size_t i = 0; i < 32; ++i) f.decode(std::span<const int32_t>(&q[i], 1));
        f.decode(std::span<const int32_t>(q).subspan(32));
        const StepTrace want = trace_greedy(f, 8);
        EXPECT_EQ(replay_one_per_step(e, want.tokens), want.logits);
    }
}

// A backend that takes SHORT_CONV, scribbles over the state and fails:
// the scheduler reruns the node on the cpu from the state as it was, so
// the tokens and logits are a cpu-only run's.
TEST_F(HybridSessions, AShortConvRetriedElsewhereStartsFromTheStateBeforeTheFailedTry) {
    const auto prompt = spread_prompt(21, 11);
    const StepTrace want = independent(prompt, 6);
    // Direct calls (the host puts the state back), and isolated steps on
    // the backend's thread (its scribbles stay in the step's own copy).
    for (const char* deadline : {"", "step_timeout_ms = 600000\n"}) {
        SCOPED_TRACE(*deadline ? "isolated steps" : "direct calls");
        RuntimeOptions o;
        o.manifest = dir_.write("partial.toml",
                                "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                                    "\"]\n\n[[backend]]\nplugin = \"partial\"\n"
                                    "options = { offer_short_conv = \"1\" }\n" +
                                    deadline +
                                    "\n[[backend]]\nplugin = \"cpu\"\n[kv]\ndtype = \"f16\"\n"
                                    "prefix_cache_mb = 0\n");
        o.threads = 2;
        Runtime rt(o);
        ASSERT_EQ(rt.backends().size(), 2u);
        auto model = Model::load(rt, model_path_);
        Session s(rt, model);
        s.decode(prompt);
        EXPECT_EQ(replay_one_per_step(s, want.tokens), want.logits);
        EXPECT_GE(rt.backends()[0]->health().report().failed_steps, 1u);
    }
}

// Isolated steps run on copies of what the nodes touch: the state a
// SHORT_CONV advances must come back with the results.
TEST_F(HybridSessions, IsolatedStepsBringTheAdvancedStateBack) {
    const auto prompt = spread_prompt(19, 13);
    const StepTrace want = independent(prompt, 6);
    RuntimeOptions o;
    o.manifest = dir_.write("isolated.toml",
                            "[[backend]]\nplugin = \"cpu\"\nstep_timeout_ms = 600000\n"
                            "[kv]\ndtype = \"f16\"\nprefix_cache_mb = 0\n");
    o.threads = 2;
    Runtime rt(o);
    auto model = Model::load(rt, model_path_);
    Session s(rt, model);
    s.decode(prompt);
    EXPECT_EQ(replay_one_per_step(s, want.tokens), want.logits);
}

// A backend built before ABI 1.6 never gets a SHORT_CONV, and the
// placement says why.
TEST_F(HybridSessions, BackendsBeforeAbi16GetNoShortConvolution) {
    RuntimeOptions o;
    o.manifest =
        dir_.write("partial13.toml", "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                                         "\"]\n\n[[backend]]\nplugin = \"partial13\"\n"
                                         "options = { offer_short_conv = \"1\" }\n\n"
                                         "[[backend]]\nplugin = \"cpu\"\n");
    Runtime rt(o);
    ASSERT_EQ(rt.backends().size(), 2u);
    auto model = Model::load(rt, model_path_);
    Session s(rt, model);
    s.decode(spread_prompt(4, 12));
    const std::string summary = s.placement_summary();
    EXPECT_NE(summary.find("partial13/adder0: built against dwell ABI 1.3, which predates short "
                           "convolutions and their recurrent state (rebuild it against 1.6 or "
                           "later)"),
              std::string::npos)
        << summary;
    const size_t at = summary.find("partial13/adder0: ");
    ASSERT_NE(at, std::string::npos) << summary;
    const std::string line = summary.substr(at, summary.find('\n', at) - at);
    EXPECT_EQ(line.find("short_conv"), std::string::npos) << line;
}

}  // namespace
}  // namespace dwell::test
