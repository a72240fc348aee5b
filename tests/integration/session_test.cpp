// Sessions over the paged KV cache, end to end through the CPU backend:
// fork and the prefix cache share pages yet every session produces the
// tokens an independent one would; save/restore round trips; the memory
// budget refuses with a message instead of an OOM kill; cancel from another
// thread; quantized KV types keep stories260K's perplexity.
#include "dwell/core/session/session.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <latch>
#include <thread>

#include "dwell.h"
#include "dwell/core/base/error.hpp"
#include "dwell/core/kv/kv_prefix_cache.hpp"
#include "dwell/core/llm/generate.hpp"
#include "dwell/core/llm/sampler.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/perplexity.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "fp8_key_reference.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

// 8 KV heads of 64: an F16 row is 1 KiB, so a 16 KiB page holds 16
// positions, as for the synthetic 1.1B shape.
fs::path write_paged_model(const TempDir& dir) {
    SyntheticModelSpec spec = small_model_spec();
    spec.n_embd = 512;
    spec.n_head = 8;
    spec.n_head_kv = 8;
    spec.n_ff = 256;
    spec.n_ctx = 1024;
    const fs::path p = dir.path() / "paged.gguf";
    write_synthetic_model(spec, p);
    return p;
}

RuntimeOptions manifest_options(const TempDir& dir, int prefix_cache_mb,
                                std::optional<uint64_t> budget = std::nullopt) {
    RuntimeOptions o;
    o.manifest = dir.write("m" + std::to_string(prefix_cache_mb) + ".toml",
                           "[device]\nname = \"session test\"\n[[backend]]\nplugin = \"cpu\"\n"
                           "[kv]\ndtype = \"f16\"\nprefix_cache_mb = " +
                               std::to_string(prefix_cache_mb) + "\n");
    o.threads = 2;
    o.memory_budget_bytes = budget;
    return o;
}

std::vector<int32_t> prompt_of(int32_t n, int32_t seed) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i)
        ids[static_cast<size_t>(i)] = (i * 37 + seed * 101 + 7) % 500 + 3;
    return ids;
}

int32_t argmax(std::span<const float> v) {
    return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Greedy: n tokens after what the session holds, starting from its last logits.
std::vector<int32_t> continue_greedy(Session& s, int32_t n) {
    std::vector<int32_t> out;
    int32_t next = argmax(s.last_logits());
    for (int32_t i = 0; i < n; ++i) {
        out.push_back(next);
        next = argmax(s.decode(std::span<const int32_t>(&next, 1)));
    }
    return out;
}

std::vector<int32_t> independent_greedy(const fs::path& model_path, const TempDir& dir,
                                        std::span<const int32_t> prompt, int32_t n) {
    Runtime runtime(manifest_options(dir, 0));
    auto model = Model::load(runtime, model_path);
    Session s(runtime, model);
    s.decode(prompt);
    return continue_greedy(s, n);
}

class Sessions : public ::testing::Test {
protected:
    void SetUp() override { model_path_ = write_paged_model(dir_); }
    TempDir dir_;
    fs::path model_path_;
};

TEST_F(Sessions, ForkSharesPagesAndContinuesLikeAnIndependentSession) {
    const auto prompt = prompt_of(37, 1);
    const auto expected = independent_greedy(model_path_, dir_, prompt, 24);
    Runtime runtime(manifest_options(dir_, 0));
    auto model = Model::load(runtime, model_path_);
    Session a(runtime, model);
    a.decode(prompt);
    ASSERT_EQ(a.kv_cache().rows_per_page(), 16);
    const int32_t before = runtime.kv_pages().pages_in_use();
    std::unique_ptr<Session> b = a.fork();
    EXPECT_EQ(runtime.kv_pages().pages_in_use(), before);  // shared, not copied
    EXPECT_EQ(b->n_past(), a.n_past());
    EXPECT_EQ(b->tokens(), a.tokens());
    // b writes first: it copies the shared partial page; a keeps its own.
    EXPECT_EQ(continue_greedy(*b, 24), expected);
    EXPECT_EQ(continue_greedy(a, 24), expected);
    // Full prompt pages stay shared after both wrote.
    EXPECT_EQ(a.kv_cache().page_ids(0), b->kv_cache().page_ids(0));
    EXPECT_EQ(a.kv_cache().page_ids(1), b->kv_cache().page_ids(1));
}

TEST_F(Sessions, EightSessionsShareA400TokenPrefix) {
    const auto prompt = prompt_of(400, 2);
    const int32_t n_gen = 12;
    const auto expected = independent_greedy(model_path_, dir_, prompt, n_gen);

    int64_t one_session_pages = 0;
    {
        Runtime runtime(manifest_options(dir_, 0));
        auto model = Model::load(runtime, model_path_);
        Session s(runtime, model);
        s.decode(prompt);
        continue_greedy(s, n_gen);
        one_session_pages = runtime.kv_pages().pages_in_use();
        EXPECT_EQ(one_session_pages, s.kv_cache().pages_held());
    }
    // Eight independent sessions (not forks): the prefix cache hands the
    // pages the first one computed to the others, within one process.
    Runtime runtime(manifest_options(dir_, 64));
    auto model = Model::load(runtime, model_path_);
    std::vector<std::unique_ptr<Session>> sessions;
    for (int i = 0; i < 8; ++i) {
        sessions.push_back(std::make_unique<Session>(runtime, model));
        sessions.back()->decode(prompt);
    }
    for (auto& s : sessions) EXPECT_EQ(continue_greedy(*s, n_gen), expected);
    const int64_t eight = runtime.kv_pages().pages_in_use();
    std::printf(
        "[ pages   ] 8 sessions sharing a 400-token prefix: %lld pages, one session: %lld "
        "(%.2fx)\n",
        static_cast<long long>(eight), static_cast<long long>(one_session_pages),
        static_cast<double>(eight) / static_cast<double>(one_session_pages));
    EXPECT_LT(static_cast<double>(eight), 1.5 * static_cast<double>(one_session_pages))
        << eight << " pages for 8 sessions, " << one_session_pages << " for one";
    for (int i = 1; i < 8; ++i) {
        EXPECT_EQ(sessions[static_cast<size_t>(i)]->kv_cache().page_ids(24),
                  sessions[0]->kv_cache().page_ids(24));
    }
    // Across requests: the sessions are gone, their prompt pages stay cached
    // and the next request with that prompt gets the same pages.
    const std::vector<int32_t> first_page = sessions[0]->kv_cache().page_ids(0);
    sessions.clear();
    EXPECT_EQ(runtime.kv_pages().pages_in_use(), runtime.kv_prefixes().pages_held());
    Session again(runtime, model);
    again.decode(prompt);
    EXPECT_EQ(again.kv_cache().page_ids(0), first_page);
    EXPECT_EQ(continue_greedy(again, n_gen), expected);
}

TEST_F(Sessions, SessionsOnSeveralThreadsAtOnce) {
    const auto prompt_a = prompt_of(70, 20), prompt_b = prompt_of(90, 21);
    const auto expected_a = independent_greedy(model_path_, dir_, prompt_a, 20);
    const auto expected_b = independent_greedy(model_path_, dir_, prompt_b, 20);
    Runtime runtime(manifest_options(dir_, 64));
    auto model = Model::load(runtime, model_path_);
    std::vector<std::vector<int32_t>> got(4);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < got.size(); ++i) {
        threads.emplace_back([&, i] {
            Session s(runtime, model);
            s.decode(i % 2 ? prompt_b : prompt_a);
            got[i] = continue_greedy(s, 20);
        });
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i % 2 ? expected_b : expected_a) << i;
}

// A session file is renamed over its target: saved over the model it runs
// (by name or through a hard link) it would replace the weights.
TEST(SessionSave, RefusesTheModelFileItRuns) {
    TempDir dir;
    const fs::path model_file = write_small_model(dir);
    const fs::path linked = dir.path() / "linked.gguf";
    fs::create_hard_link(model_file, linked);
    const std::string before = sha256_of(model_file);
    Runtime runtime;
    auto model = Model::load(runtime, model_file);
    Session s(runtime, model);
    const int32_t ids[] = {1, 2, 3};
    s.decode(ids);
    for (const fs::path& target : {model_file, linked}) {
        try {
            s.save(target);
            ADD_FAILURE() << target << " was written";
        } catch (const Error& e) {
            EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT);
            EXPECT_NE(std::string(e.what()).find("the model file this session runs"),
                      std::string::npos)
                << e.what();
        }
    }
    EXPECT_EQ(sha256_of(model_file), before);
    s.save(dir.path() / "s.session");  // another file is fine
}

TEST_F(Sessions, SaveAndRestoreRoundTrip) {
    const auto prompt = prompt_of(53, 3);
    const fs::path file = dir_.path() / "conversation.dwses";
    std::vector<int32_t> continued;
    std::vector<unsigned char> rows;
    {
        Runtime runtime(manifest_options(dir_, 0));
        auto model = Model::load(runtime, model_path_);
        Session a(runtime, model);
        a.decode(prompt);
        continue_greedy(a, 5);
        a.save(file);
        const KvCache& kv = a.kv_cache();
        for (int64_t pos = 0; pos < a.n_past(); ++pos) {
            const unsigned char* r = kv.row(1, 1, pos);
            rows.insert(rows.end(), r, r + kv.row_bytes());
        }
        continued = continue_greedy(a, 20);
    }
    // Another runtime, as after an app restart.
    Runtime runtime(manifest_options(dir_, 0));
    auto model = Model::load(runtime, model_path_);
    std::unique_ptr<Session> b = Session::restore(runtime, model, file);
    EXPECT_EQ(b->n_past(), 53 + 5);
    const KvCache& kv = b->kv_cache();
    std::vector<unsigned char> restored;
    for (int64_t pos = 0; pos < b->n_past(); ++pos) {
        const unsigned char* r = kv.row(1, 1, pos);
        restored.insert(restored.end(), r, r + kv.row_bytes());
    }
    EXPECT_EQ(restored, rows);
    EXPECT_EQ(continue_greedy(*b, 20), continued);

    // Damage anywhere is caught by the checksum, naming the file.
    std::string bytes;
    {
        std::ifstream in(file, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    bytes[bytes.size() / 2] ^= 0x10;
    const fs::path damaged = dir_.write("damaged.dwses", bytes);
    try {
        Session::restore(runtime, model, damaged);
        FAIL() << "a damaged session was restored";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_CORRUPT);
        EXPECT_NE(std::string(e.what()).find("damaged.dwses"), std::string::npos) << e.what();
    }
    // Another model's session is refused.
    const fs::path other = write_small_model(dir_);
    auto other_model = Model::load(runtime, other);
    EXPECT_THROW(Session::restore(runtime, other_model, file), Error);
}

// A fine-tune has the shape and size of its base: only the weights differ.
// The session file's fingerprint of them refuses it, in one line naming the
// file; a copy of the same weights under another name is the same model.
TEST_F(Sessions, ASessionNeverRestoresIntoOtherWeightsOfItsShape) {
    SyntheticModelSpec spec = small_model_spec();
    spec.n_embd = 512;
    spec.n_head = 8;
    spec.n_head_kv = 8;
    spec.n_ff = 256;
    spec.n_ctx = 1024;
    spec.seed = 99;
    const fs::path tuned = dir_.path() / "tuned.gguf";
    write_synthetic_model(spec, tuned);
    const fs::path copy = dir_.path() / "copy.gguf";
    fs::copy_file(model_path_, copy);
    const fs::path file = dir_.path() / "base.dwses";
    Runtime runtime(manifest_options(dir_, 0));
    auto base = Model::load(runtime, model_path_);
    auto other = Model::load(runtime, tuned);
    ASSERT_EQ(base->weight_bytes(), other->weight_bytes());
    ASSERT_EQ(base->info().kv_width, other->info().kv_width);
    EXPECT_NE(session_weights_fingerprint(*base), session_weights_fingerprint(*other));
    Session a(runtime, base);
    a.decode(prompt_of(20, 1));
    a.save(file);
    try {
        Session::restore(runtime, other, file);
        FAIL() << "a session restored into other weights of the same shape";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(msg.rfind(file.string() + ": ", 0), 0u) << msg;
        EXPECT_NE(msg.find("other weights than " + tuned.string()), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    auto same = Model::load(runtime, copy);
    EXPECT_EQ(Session::restore(runtime, same, file)->n_past(), 20);
}

// Saving needs no room in the context: the last generated token goes into
// the file undecoded and comes back as the pending token.
TEST_F(Sessions, AFullContextSavesWithItsPendingToken) {
    const fs::path file = dir_.path() / "full.dwses";
    Runtime runtime(manifest_options(dir_, 0));
    auto model = Model::load(runtime, model_path_);
    SessionOptions so;
    so.n_ctx = 32;
    Session a(runtime, model, so);
    a.decode(prompt_of(32, 2));
    const int32_t pending = argmax(a.last_logits());
    EXPECT_THROW(a.decode(std::span<const int32_t>(&pending, 1)), Error);  // full indeed
    SessionExtras out;
    out.pending_token = pending;
    out.host_data = "the host's bytes";
    a.save(file, out);
    SessionExtras in;
    auto b = Session::restore(runtime, model, file, so, &in);
    EXPECT_EQ(b->n_past(), 32);
    EXPECT_EQ(b->tokens(), a.tokens());
    EXPECT_EQ(in.pending_token, pending);
    EXPECT_EQ(in.host_data, "the host's bytes");
    EXPECT_TRUE(in.had_host_data);
    // A host that takes no extras gets the pending token decoded when there
    // is room: here, by shifting.
    so.on_full = ContextFull::Shift;
    so.n_keep = 4;
    auto c = Session::restore(runtime, model, file, so);
    EXPECT_EQ(c->tokens().back(), pending);
}

// The C API saves a session whose context is full (it used to feed the
// pending token first, which a full context refuses), and the pending
// token comes back with it.
TEST_F(Sessions, TheCApiSavesAFullContext) {
    const fs::path manifest = dir_.write("capi.toml", "[[backend]]\nplugin = \"cpu\"\n");
    const std::string manifest_s = manifest.string(), model_s = model_path_.string();
    const std::string file = (dir_.path() / "capi.dwses").string();
    dwell_error err{};
    dwell_runtime_options ro;
    dwell_runtime_options_init(&ro);
    ro.manifest_path = manifest_s.c_str();
    dwell_runtime* rt = nullptr;
    ASSERT_EQ(dwell_runtime_open(&ro, &rt, &err), DWELL_OK) << err.message;
    dwell_llm* llm = nullptr;
    ASSERT_EQ(dwell_llm_load(rt, model_s.c_str(), &llm, &err), DWELL_OK) << err.message;
    dwell_session_options so;
    dwell_session_options_init(&so);
    so.n_ctx = 24;
    dwell_session* s = nullptr;
    ASSERT_EQ(dwell_session_create(llm, &so, &s, &err), DWELL_OK) << err.message;
    dwell_generate_options go;
    dwell_generate_options_init(&go);
    go.max_tokens = 100;
    dwell_generation_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    int32_t last = -1;
    auto on_token = [](void* user, int32_t token, const char*, size_t) {
        if (token >= 0) *static_cast<int32_t*>(user) = token;
        return 0;
    };
    ASSERT_EQ(dwell_session_generate(s, "a b c", &go, on_token, &last, &st, &err), DWELL_OK)
        << err.message;
    ASSERT_TRUE(st.stopped_at_context) << "generated " << st.n_generated;
    EXPECT_EQ(dwell_session_save(s, file.c_str(), &err), DWELL_OK) << err.message;
    dwell_session* t = nullptr;
    ASSERT_EQ(dwell_session_create(llm, &so, &t, &err), DWELL_OK) << err.message;
    EXPECT_EQ(dwell_session_load(t, file.c_str(), &err), DWELL_OK) << err.message;
    dwell_session_stats ss;
    std::memset(&ss, 0, sizeof ss);
    ss.struct_size = sizeof ss;
    EXPECT_EQ(dwell_session_stats_get(t, &ss, &err), DWELL_OK);
    EXPECT_EQ(ss.n_past, 24);
    dwell_session_free(t);
    dwell_session_free(s);
    dwell_llm_free(llm);
    dwell_runtime_close(rt);
    // The file holds the last token generated, not yet decoded.
    Runtime runtime(manifest_options(dir_, 0));
    auto model = Model::load(runtime, model_path_);
    SessionOptions opts;
    opts.n_ctx = 24;
    SessionExtras extras;
    auto restored = Session::restore(runtime, model, file, opts, &extras);
    EXPECT_EQ(extras.pending_token, last);
    EXPECT_NE(last, -1);
}

struct Footprint {
    uint64_t weights = 0;
    uint64_t activations = 0;  // the arena of the largest batch (256 tokens)
};

Footprint measure_footprint(const fs::path& model_path, const TempDir& dir) {
    Runtime runtime(manifest_options(dir, 0));
    auto model = Model::load(runtime, model_path);
    Session s(runtime, model);
    s.decode(prompt_of(256, 0));
    const PoolStats st = runtime.pool().stats();
    return {model->weight_bytes(), st.used_by[static_cast<int>(MemoryUse::Activations)]};
}

// 2 layers x K,V: one logical page of 16 positions takes 4 pages of 16 KiB.
constexpr uint64_t kLogicalPageBytes = 4 * 16384;

TEST_F(Sessions, BudgetRefusesWithAMessageNotAKill) {
    const Footprint f = measure_footprint(model_path_, dir_);
    {
        // Weights alone do not fit.
        Runtime runtime(manifest_options(dir_, 0, f.weights / 2));
        try {
            Model::load(runtime, model_path_);
            FAIL() << "weights over the budget were loaded";
        } catch (const Error& e) {
            const std::string m = e.what();
            EXPECT_EQ(e.status(), DWELL_ERR_OUT_OF_MEMORY);
            EXPECT_NE(m.find("the weights of"), std::string::npos) << m;
            EXPECT_NE(m.find("budget"), std::string::npos) << m;
        }
    }
    // Weights and activations fit, and KV for 6 logical pages (96 positions).
    Runtime runtime(manifest_options(dir_, 0, f.weights + f.activations + 6 * kLogicalPageBytes));
    auto model = Model::load(runtime, model_path_);
    // A context whose whole cache fits what the weights leave (the check at
    // creation), while the activations leave room for only 6 pages of it.
    SessionOptions so;
    so.n_ctx = 640;
    ASSERT_LE(uint64_t{640} / 16 * kLogicalPageBytes, f.activations + 6 * kLogicalPageBytes);
    Session s(runtime, model, so);
    s.decode(prompt_of(32, 4));
    try {
        s.decode(prompt_of(600, 5));
        FAIL() << "a KV cache over the budget was allocated";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_EQ(e.status(), DWELL_ERR_OUT_OF_MEMORY);
        EXPECT_NE(m.find("KV cache"), std::string::npos) << m;
        EXPECT_NE(m.find("weights"), std::string::npos) << m;  // what holds the budget
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
    // The failed call left the session as it was, and it goes on.
    EXPECT_EQ(s.n_past(), 32);
    s.decode(prompt_of(8, 6));
    EXPECT_EQ(s.n_past(), 40);
}

TEST_F(Sessions, PrefixCacheGivesWayToLiveSessionsUnderTheBudget) {
    const Footprint f = measure_footprint(model_path_, dir_);
    // Room for 20 logical pages: one 240-token session (15) at a time.
    Runtime runtime(manifest_options(dir_, 64, f.weights + f.activations + 20 * kLogicalPageBytes));
    auto model = Model::load(runtime, model_path_);
    SessionOptions so;
    so.n_ctx = 256;  // the whole cache fits what the weights leave
    for (int i = 0; i < 6; ++i) {
        // Finished sessions leave their pages to the prefix cache; the next
        // prompt needs them back.
        Session s(runtime, model, so);
        s.decode(prompt_of(240, 10 + i));
        EXPECT_EQ(s.n_past(), 240);
    }
    EXPECT_GT(runtime.kv_prefixes().pages_held(), 0);
    EXPECT_LE(runtime.kv_pages().pages_in_use(), 20 * 4);
}

TEST_F(Sessions, CancelFromAnotherThread) {
    Runtime runtime(manifest_options(dir_, 0));
    auto model = Model::load(runtime, model_path_);
    Session s(runtime, model);
    s.cancel();
    try {
        s.decode(prompt_of(10, 7));
        FAIL() << "a cancelled session decoded";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_CANCELLED);
    }
    EXPECT_EQ(s.n_past(), 0);
    s.clear_cancel();

    // Generation streams tokens; another thread cancels after the fifth.
    std::latch fifth(1), cancelled(1);
    std::thread canceller([&] {
        fifth.wait();
        s.cancel();
        cancelled.count_down();
    });
    SamplerParams sp;
    sp.temperature = 0;
    Sampler sampler(sp);
    int streamed = 0;
    const auto prompt = prompt_of(20, 8);
    try {
        generate(s, prompt, 100, sampler, [&](int32_t) {
            if (++streamed == 5) {
                fifth.count_down();
                cancelled.wait();
            }
            return true;
        });
        FAIL() << "generation ran past cancel()";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_CANCELLED);
    }
    canceller.join();
    EXPECT_EQ(streamed, 5);
    EXPECT_EQ(s.n_past(), 20 + 4);  // the fifth token was never fed
    s.clear_cancel();
    s.decode(prompt_of(3, 9));  // still usable
    EXPECT_EQ(s.n_past(), 27);
}

// A shifted key must be the key the model computes for that token at its
// new position. Layer 0's keys and values depend on the token alone, so
// there the shifted cache must equal a session that saw only the kept
// tokens.
// A session of 64 tokens that keeps the first 8 on a shift.
SessionOptions shifting_64(dwell_dtype kv) {
    SessionOptions so;
    so.n_ctx = 64;
    so.kv_dtype = kv;
    so.on_full = ContextFull::Shift;
    so.n_keep = 8;
    return so;
}

// Fills a's context and decodes one more token, which drops the 28 tokens
// after the first 8; returns the tokens it keeps.
std::vector<int32_t> fill_and_shift(Session& a) {
    const auto prompt = prompt_of(64, 11);
    a.decode(prompt);
    const int32_t next = 42;
    a.decode(std::span<const int32_t>(&next, 1));
    EXPECT_EQ(a.n_shifted(), 28);
    EXPECT_EQ(a.n_past(), 64 - 28 + 1);
    std::vector<int32_t> kept(prompt.begin(), prompt.begin() + 8);
    kept.insert(kept.end(), prompt.begin() + 36, prompt.end());
    kept.push_back(next);
    EXPECT_EQ(a.tokens(), kept);
    return kept;
}

TEST_F(Sessions, ContextShiftReRotatesKeysToTheirNewPositions) {
    Runtime runtime(manifest_options(dir_, 0));
    auto model = Model::load(runtime, model_path_);
    SessionOptions so = shifting_64(DWELL_F32);
    Session a(runtime, model, so);
    const std::vector<int32_t> kept = fill_and_shift(a);
    so.on_full = ContextFull::Stop;
    Session b(runtime, model, so);
    b.decode(kept);
    const KvCache& ka = a.kv_cache();
    const KvCache& kb = b.kv_cache();
    const auto width = static_cast<size_t>(ka.kv_width());
    double worst = 0;
    for (int64_t pos = 0; pos < a.n_past(); ++pos) {
        const auto* k1 = reinterpret_cast<const float*>(ka.row(0, 0, pos));
        const auto* k2 = reinterpret_cast<const float*>(kb.row(0, 0, pos));
        double row_max = 0, row_err = 0;
        for (size_t i = 0; i < width; ++i) {
            row_max = std::max(row_max, std::fabs(static_cast<double>(k2[i])));
            row_err = std::max(row_err, std::fabs(static_cast<double>(k1[i]) - k2[i]));
        }
        // The backend builds RoPE angles in float as ggml does; the shift
        // turns them in double: they agree to float rounding of the angles.
        worst = std::max(worst, row_err / row_max);
        EXPECT_EQ(std::memcmp(ka.row(0, 1, pos), kb.row(0, 1, pos), ka.row_bytes()), 0) << pos;
    }
    EXPECT_LT(worst, 1e-4);
}

// FP8 keys are offset keys whose offset depends on the position: a shift
// decodes each moved key with its old offset and stores it again with its
// new one. Layer 0's shifted keys, decoded, must be the F32 keys of a
// session that saw only the kept tokens, to E4M3 rounding (twice: when
// stored and when moved); the values move as they are.
TEST_F(Sessions, ContextShiftStoresFp8KeysAgainWithTheirNewOffsets) {
    Runtime runtime(manifest_options(dir_, 0));
    auto model = Model::load(runtime, model_path_);
    // n_keep 8 is inside the first block of 16: kept and moved rows share it.
    SessionOptions so = shifting_64(DWELL_FP8_E4M3);
    Session a(runtime, model, so);
    const std::vector<int32_t> kept = fill_and_shift(a);
    so.on_full = ContextFull::Stop;
    so.kv_dtype = DWELL_F32;
    Session exact(runtime, model, so);
    exact.decode(kept);
    so.kv_dtype = DWELL_FP8_E4M3;
    Session fresh(runtime, model, so);
    fresh.decode(kept);

    const KvCache& ka = a.kv_cache();
    const auto width = ka.kv_width();
    const auto rows_of = [&](const KvCache& kv) {
        std::vector<std::vector<uint8_t>> rows;
        for (int64_t pos = 0; pos < a.n_past(); ++pos) {
            const auto* r = static_cast<const uint8_t*>(kv.row(0, 0, pos));
            rows.emplace_back(r, r + width);
        }
        return rows;
    };
    const auto shifted_rows = rows_of(ka), fresh_rows = rows_of(fresh.kv_cache());
    double worst_shifted = 0, worst_fresh = 0;
    for (int64_t pos = 0; pos < a.n_past(); ++pos) {
        const auto* want = reinterpret_cast<const float*>(exact.kv_cache().row(0, 0, pos));
        const auto got = test::ref_fp8_key_decode(shifted_rows, pos, width);
        const auto got_fresh = test::ref_fp8_key_decode(fresh_rows, pos, width);
        double row_max = 0, err = 0, err_fresh = 0;
        for (int64_t i = 0; i < width; ++i) {
            row_max = std::max(row_max, std::fabs(static_cast<double>(want[i])));
            err = std::max(err, std::fabs(got[static_cast<size_t>(i)] - want[i]));
            err_fresh = std::max(err_fresh, std::fabs(got_fresh[static_cast<size_t>(i)] - want[i]));
        }
        worst_shifted = std::max(worst_shifted, err / row_max);
        worst_fresh = std::max(worst_fresh, err_fresh / row_max);
        EXPECT_EQ(std::memcmp(ka.row(0, 1, pos), fresh.kv_cache().row(0, 1, pos), ka.row_bytes()),
                  0)
            << pos;
    }
    std::printf("[ fp8 shift ] worst key error / row max: shifted %.4f, fresh %.4f\n",
                worst_shifted, worst_fresh);
    // A stored value is one of the two E4M3 neighbours of key - offset, so
    // within one step (1/8 of it); a moved one is also rounded to nearest
    // (1/16). Measured 0.079 and 0.108; moving the codes with plain
    // re-rounding, offsets ignored, gives 0.57.
    EXPECT_LT(worst_fresh, 0.125);
    EXPECT_LT(worst_shifted, 0.1875);
}

TEST_F(Sessions, GenerationGoesPastTheContextOnlyWhenShifting) {
    Runtime runtime(manifest_options(dir_, 0));
    auto model = Model::load(runtime, model_path_);
    SamplerParams sp;
    sp.temperature = 0;
    for (ContextFull mode : {ContextFull::Stop, ContextFull::Shift}) {
        SessionOptions so;
        so.n_ctx = 64;
        so.on_full = mode;
        so.n_keep = 4;
        Session s(runtime, model, so);
        Sampler sampler(sp);
        int32_t streamed = 0;
        const GenerationStats st =
            generate(s, prompt_of(20, 12), 200, sampler, [&](int32_t) { return ++streamed > 0; });
        if (mode == ContextFull::Stop) {
            EXPECT_TRUE(st.stopped_at_context);
            EXPECT_EQ(s.n_past(), 64);
            const int32_t one = 5;
            try {
                s.decode(std::span<const int32_t>(&one, 1));
                FAIL() << "decoded past a full context";
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("context full"), std::string::npos);
            }
        } else {
            EXPECT_FALSE(st.stopped_at_context);
            EXPECT_EQ(streamed, 200);
            EXPECT_GT(s.n_shifted(), 0);
            EXPECT_LE(s.n_past(), 64);
            const std::vector<int32_t> prompt = prompt_of(20, 12);
            EXPECT_EQ(std::vector<int32_t>(s.tokens().begin(), s.tokens().begin() + 4),
                      std::vector<int32_t>(prompt.begin(), prompt.begin() + 4));
        }
    }
}

// Must show: Q8_0 and FP8 KV keep stories260K's perplexity near F16's.
TEST(Stories260KKvTypes, QuantizedKvPerplexityWithinOnePercent) {
    const fs::path model_path = test::model_path("stories260K.gguf");
    if (model_path.empty()) GTEST_SKIP() << "stories260K.gguf not found in " << models_dir();
    const fs::path text = reference_dir() / "tinystory-eval.txt";
    if (!fs::exists(text)) GTEST_SKIP() << text << " not found";
    std::ifstream in(text, std::ios::binary);
    const std::string content((std::istreambuf_iterator<char>(in)), {});
    Runtime runtime;
    auto model = Model::load(runtime, model_path);
    const auto tokens = model->tokenizer().encode(content, true);
    // 512 is `dwell perplexity`'s default context. FP8 keys meet 1% only as
    // offset keys (quant.h): plain E4M3 codes give +1.5 / +3.0 / +6.4% at
    // 128 / 256 / 512, since stories260K's 8-wide heads carry a slowly
    // turning part up to |26| that 3 mantissa bits round coarsely.
    for (const int64_t n_ctx : {128, 256, 512}) {
        PerplexityOptions o;
        o.n_ctx = n_ctx;
        double f16 = 0;
        for (dwell_dtype t : {DWELL_F16, DWELL_Q8_0, DWELL_FP8_E4M3}) {
            SessionOptions so;
            so.kv_dtype = t;
            const double ppl = perplexity(runtime, model, tokens, o, so).ppl.mean;
            if (t == DWELL_F16) {
                f16 = ppl;
                continue;
            }
            EXPECT_NEAR(ppl, f16, 0.01 * f16) << dwell_dtype_name(t) << " at ctx " << n_ctx;
            std::printf("[ KV type ] ctx %lld %s perplexity %.4f vs f16 %.4f (%+.3f%%)\n",
                        static_cast<long long>(n_ctx), dwell_dtype_name(t), ppl, f16,
                        100.0 * (ppl - f16) / f16);
        }
    }
}

}  // namespace
}  // namespace dwell::test
