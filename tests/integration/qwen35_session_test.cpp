// Sessions of a gated delta-net model (qwen35: delta-net layers carrying a
// convolution state and a delta-rule state beside an attention layer) on
// the cpu backend: a forked, restored or prefix-cached session continues
// exactly like an independent one fed the same tokens, logits bit for bit;
// a context shift is refused in one line, since the delta-rule state holds
// every token seen. The independent session batches its prompt the same
// way, so every float is computed by the same kernels in the same order.
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "integration_support.hpp"
#include "test_dirs.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

// Layers 0..2 are delta nets (8 key heads, 16 value heads of 64, 4 taps),
// layer 3 attends with 8 KV heads of 64: an F16 KV row is 1 KiB, so a
// 16 KiB page holds 16 positions.
fs::path write_delta_net_model(const TempDir& dir) {
    SyntheticModelSpec spec;
    spec.family = SyntheticFamily::qwen35;
    spec.n_embd = 512;
    spec.n_layer = 4;
    spec.n_head = 16;
    spec.n_head_kv = 8;
    spec.head_dim = 64;
    spec.n_ff = 256;
    spec.n_vocab = 512;
    spec.n_ctx = 512;
    spec.dtype = DWELL_Q8_0;
    spec.weight_std = 0.1f;
    spec.conv_l_cache = 4;
    spec.tied_output = true;
    spec.seed = 41;
    const fs::path p = dir.path() / "delta.gguf";
    write_synthetic_model(spec, p);
    return p;
}

class DeltaNetSessions : public ::testing::Test {
protected:
    void SetUp() override {
        if (!fs::exists(fs::path(DWELL_TEST_PLUGIN_DIR) / "libdwell-qwen35.so"))
            GTEST_SKIP() << "the qwen35 model plugin is not built";
        model_path_ = write_delta_net_model(dir_);
    }
    StepTrace independent(std::span<const int32_t> prompt, int32_t n) {
        return independent_trace(dir_, "delta-net session test", model_path_, prompt, n);
    }
    TempDir dir_;
    fs::path model_path_;
};

TEST_F(DeltaNetSessions, TheModelDeclaresBothStatesAndTheyMove) {
    Runtime runtime(session_options(dir_, "delta-net session test", 0));
    auto model = Model::load(runtime, model_path_);
    // Convolution: (2 * 8 * 64 + 16 * 64) channels * 3 rows; delta rule:
    // 64 x 64 per value head.
    EXPECT_EQ(model->info().state_elems[0], (2 * 8 * 64 + 16 * 64) * 3);
    EXPECT_EQ(model->info().state_elems[1], 64 * 64 * 16);
    EXPECT_EQ(model->info().flags & DWELL_MODEL_STATE_SPANS_CONTEXT,
              DWELL_MODEL_STATE_SPANS_CONTEXT);
    Session s(runtime, model);
    EXPECT_TRUE(recurrent_state_is_zero(s));
    s.decode(spread_prompt(5, 1));
    EXPECT_FALSE(recurrent_state_is_zero(s));
}

TEST_F(DeltaNetSessions, AForkCopiesTheStateAndContinuesLikeAnIndependentSession) {
    const auto prompt = spread_prompt(37, 1);
    const StepTrace want = independent(prompt, 16);
    Runtime runtime(session_options(dir_, "delta-net session test", 0));
    auto model = Model::load(runtime, model_path_);
    Session a(runtime, model);
    a.decode(prompt);
    const std::vector<float> at_fork = to_vector(a.recurrent_state().all());
    std::unique_ptr<Session> b = a.fork();
    EXPECT_EQ(to_vector(b->recurrent_state().all()), at_fork);
    // b goes first: a's state must not move with it (copied, not shared).
    EXPECT_EQ(replay_one_per_step(*b, want.tokens), want.logits);
    EXPECT_EQ(to_vector(a.recurrent_state().all()), at_fork);
    EXPECT_EQ(replay_one_per_step(a, want.tokens), want.logits);
}

TEST_F(DeltaNetSessions, ARestoredSessionContinuesLikeAnIndependentSession) {
    const auto prompt = spread_prompt(29, 2);
    const StepTrace want = independent(prompt, 12);
    Runtime runtime(session_options(dir_, "delta-net session test", 0));
    auto model = Model::load(runtime, model_path_);
    const fs::path file = dir_.path() / "delta.dwses";
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
    EXPECT_EQ(replay_one_per_step(*r, rest),
              std::vector<std::vector<float>>(want.logits.begin() + 4, want.logits.end()));
}

// The delta-rule state cannot forget dropped tokens: the session says so
// in one line and keeps what it had, instead of shifting.
TEST_F(DeltaNetSessions, AContextShiftIsRefusedInOneLine) {
    Runtime runtime(session_options(dir_, "delta-net session test", 0));
    auto model = Model::load(runtime, model_path_);
    SessionOptions so;
    so.n_ctx = 64;
    so.on_full = ContextFull::Shift;
    so.n_keep = 8;
    Session a(runtime, model, so);
    a.decode(spread_prompt(64, 5));
    const std::vector<float> before = to_vector(a.recurrent_state().all());
    const int32_t next = 42;
    try {
        a.decode(std::span<const int32_t>(&next, 1));
        FAIL() << "the context shifted";
    } catch (const ContextFullError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("qwen35"), std::string::npos) << msg;
        EXPECT_NE(msg.find("cannot shift"), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    EXPECT_EQ(a.n_shifted(), 0);
    EXPECT_EQ(a.n_past(), 64);
    EXPECT_EQ(to_vector(a.recurrent_state().all()), before);
}

// Pages go to the prefix cache with the states after them where a batch
// ended; another session adopts them and continues like an independent one.
TEST_F(DeltaNetSessions, PrefixCachePagesCarryTheStateAfterThem) {
    Runtime runtime(session_options(dir_, "delta-net session test", 64));
    auto model = Model::load(runtime, model_path_);
    const auto base = spread_prompt(50, 6);
    Session a(runtime, model);
    a.decode(base);
    std::vector<int32_t> p(base.begin(), base.begin() + 48);
    const auto tail = spread_prompt(10, 7);
    p.insert(p.end(), tail.begin(), tail.end());
    const StepTrace want = independent(p, 8);
    Session b(runtime, model);
    b.decode(p);
    EXPECT_EQ(b.n_cached_tokens(), 48);
    EXPECT_EQ(replay_one_per_step(b, want.tokens), want.logits);
}

// A backend that takes GATED_DELTA_NET, scribbles over the state and
// fails: the scheduler reruns the node on the cpu from the state as it was,
// so the tokens and logits are a cpu-only run's.
TEST_F(DeltaNetSessions, ADeltaNetRetriedElsewhereStartsFromTheStateBeforeTheFailedTry) {
    const auto prompt = spread_prompt(21, 11);
    const StepTrace want = independent(prompt, 6);
    RuntimeOptions o;
    o.manifest =
        dir_.write("partial.toml", "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                                       "\"]\n\n[[backend]]\nplugin = \"partial\"\n"
                                       "options = { offer_gated_delta_net = \"1\" }\n\n"
                                       "[[backend]]\nplugin = \"cpu\"\n[kv]\ndtype = \"f16\"\n"
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

// A backend built before ABI 1.7 never gets a delta-net op, and the
// placement says why.
TEST_F(DeltaNetSessions, BackendsBeforeAbi17GetNoDeltaNetOps) {
    RuntimeOptions o;
    o.manifest =
        dir_.write("partial13.toml", "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                                         "\"]\n\n[[backend]]\nplugin = \"partial13\"\n"
                                         "options = { offer_gated_delta_net = \"1\" }\n\n"
                                         "[[backend]]\nplugin = \"cpu\"\n");
    Runtime rt(o);
    ASSERT_EQ(rt.backends().size(), 2u);
    auto model = Model::load(rt, model_path_);
    Session s(rt, model);
    s.decode(spread_prompt(4, 12));
    const std::string summary = s.placement_summary();
    EXPECT_NE(summary.find("partial13/adder0: built against dwell ABI 1.3, which predates the "
                           "gated delta-net ops"),
              std::string::npos)
        << summary;
}

}  // namespace
}  // namespace dwell::test
