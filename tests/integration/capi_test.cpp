// The C API (hosts/capi/include/dwell.h) end to end: stories260K's greedy
// tokens equal llama.cpp's through it, a conversation continues across
// calls and across save/load, cancel from another thread stops a reply and
// leaves the session usable, and every misuse is a code plus one line.
// Logs go to stderr or the application's callback, never stdout; NULL
// options are the defaults; a full context has its own status; numeric
// options out of range are refused naming the field; no message names a
// CLI flag.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <mutex>
#include <thread>

#include "dwell.h"
#include "integration_support.hpp"

extern "C" int dwell_capi_header_is_c(void);

namespace dwell::test {
namespace {

struct Collected {
    std::vector<int32_t> ids;
    std::string text;
};

int collect(void* user, int32_t token, const char* text, size_t len) {
    auto* c = static_cast<Collected*>(user);
    if (token >= 0) c->ids.push_back(token);
    c->text.append(text, len);
    return 0;
}

class CApi : public Stories260KReference {
protected:
    void SetUp() override {
        Stories260KReference::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        const auto manifest =
            dir_.write("cpu.toml", "[[backend]]\nplugin = \"cpu\"\n[cpu]\nthreads = 2\n");
        dwell_runtime_options o;
        dwell_runtime_options_init(&o);
        o.manifest_path = manifest_text_.assign(manifest.string()).c_str();
        ASSERT_EQ(dwell_runtime_open(&o, &rt_, &err_), DWELL_OK) << err_.message;
        ASSERT_EQ(dwell_llm_load(rt_, model_.c_str(), &model_h_, &err_), DWELL_OK) << err_.message;
    }
    void TearDown() override {
        // Released in the "wrong" order on purpose: each keeps what it needs.
        dwell_runtime_close(rt_);
        dwell_llm_free(model_h_);
    }

    dwell_session* new_session() {
        dwell_session* s = nullptr;
        EXPECT_EQ(dwell_session_create(model_h_, nullptr, &s, &err_), DWELL_OK) << err_.message;
        return s;
    }

    // Ids the prompt tokenizes to (with BOS).
    std::vector<int32_t> prompt_ids(const std::string& prompt) {
        size_t n = 0;
        EXPECT_EQ(dwell_tokenize(model_h_, prompt.c_str(), 1, nullptr, 0, &n, &err_), DWELL_OK);
        std::vector<int32_t> ids(n);
        EXPECT_EQ(dwell_tokenize(model_h_, prompt.c_str(), 1, ids.data(), ids.size(), &n, &err_),
                  DWELL_OK);
        return ids;
    }

    TempDir dir_;
    std::string manifest_text_;
    dwell_runtime* rt_ = nullptr;
    dwell_llm* model_h_ = nullptr;
    dwell_error err_{};
};

TEST_F(CApi, VersionAndHeaderCompileAsC) {
    EXPECT_EQ(dwell_capi_version() >> 16, uint32_t{DWELL_CAPI_VERSION_MAJOR});
    EXPECT_EQ(dwell_capi_header_is_c(), DWELL_CAPI_VERSION_MAJOR);
}

TEST_F(CApi, GreedyTokensEqualLlamaCppAndContinueAcrossCalls) {
    for (const ReferenceCase& c : ref_.cases) {
        SCOPED_TRACE(c.prompt);
        const auto prompt = prompt_ids(c.prompt);
        ASSERT_EQ(std::vector<int32_t>(c.full_ids.begin(), c.full_ids.begin() + prompt.size()),
                  prompt);
        const auto n_gen = static_cast<int32_t>(c.full_ids.size() - prompt.size());
        ASSERT_GE(n_gen, 4);
        // In two calls: the second continues where the first stopped.
        dwell_session* s = new_session();
        dwell_generate_options g;
        dwell_generate_options_init(&g);
        g.max_tokens = n_gen / 2;
        Collected got;
        dwell_generation_stats st;
        st.struct_size = sizeof st;
        ASSERT_EQ(dwell_session_generate(s, c.prompt.c_str(), &g, collect, &got, &st, &err_),
                  DWELL_OK)
            << err_.message;
        EXPECT_EQ(st.n_prompt, static_cast<int32_t>(prompt.size()));
        g.max_tokens = n_gen - n_gen / 2;
        ASSERT_EQ(dwell_session_generate(s, "", &g, collect, &got, nullptr, &err_), DWELL_OK)
            << err_.message;
        std::vector<int32_t> full = prompt;
        full.insert(full.end(), got.ids.begin(), got.ids.end());
        EXPECT_EQ(full, c.full_ids);
        EXPECT_FALSE(got.text.empty());

        dwell_session_stats ss;
        ss.struct_size = sizeof ss;
        ASSERT_EQ(dwell_session_stats_get(s, &ss, &err_), DWELL_OK);
        EXPECT_EQ(ss.n_past, static_cast<int32_t>(c.full_ids.size()) - 1);  // last one pending
        EXPECT_GT(ss.kv_bytes, 0u);
        dwell_runtime_stats rs;
        rs.struct_size = sizeof rs;
        ASSERT_EQ(dwell_runtime_stats_get(rt_, &rs, &err_), DWELL_OK);
        EXPECT_GT(rs.kv_pages_in_use, 0u);
        EXPECT_EQ(rs.n_backends, 1u);
        EXPECT_NE(std::string(rs.manifest).find("cpu.toml"), std::string::npos);
        dwell_backend_stats bs;
        bs.struct_size = sizeof bs;
        ASSERT_EQ(dwell_backend_stats_get(rt_, 0, &bs, &err_), DWELL_OK) << err_.message;
        EXPECT_STREQ(bs.label, "cpu/cpu0");
        EXPECT_EQ(bs.healthy, 1);
        EXPECT_GT(bs.steps_run, 0u);
        EXPECT_EQ(bs.failed_steps, 0u);
        EXPECT_STREQ(bs.unhealthy_reason, "");
        EXPECT_EQ(dwell_backend_stats_get(rt_, 1, &bs, &err_), DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(err_.message).find("backend 1 of 1"), std::string::npos)
            << err_.message;
        bs.struct_size = offsetof(dwell_backend_stats, last_failure);
        EXPECT_EQ(dwell_backend_stats_get(rt_, 0, &bs, &err_), DWELL_ERR_INVALID_ARGUMENT);
        dwell_session_free(s);
    }
}

TEST_F(CApi, SaveAndLoadContinueTheSameConversation) {
    const ReferenceCase& c = ref_.cases.front();
    const auto prompt = prompt_ids(c.prompt);
    const auto n_gen = static_cast<int32_t>(c.full_ids.size() - prompt.size());
    dwell_session* s = new_session();
    dwell_generate_options g;
    dwell_generate_options_init(&g);
    g.max_tokens = 3;
    Collected got;
    ASSERT_EQ(dwell_session_generate(s, c.prompt.c_str(), &g, collect, &got, nullptr, &err_),
              DWELL_OK);
    const auto file = dir_.path() / "conversation.dwell-session";
    ASSERT_EQ(dwell_session_save(s, file.c_str(), &err_), DWELL_OK) << err_.message;
    dwell_session_free(s);

    dwell_session* back = new_session();
    ASSERT_EQ(dwell_session_load(back, file.c_str(), &err_), DWELL_OK) << err_.message;
    g.max_tokens = n_gen - 3;
    ASSERT_EQ(dwell_session_generate(back, "", &g, collect, &got, nullptr, &err_), DWELL_OK)
        << err_.message;
    std::vector<int32_t> full = prompt;
    full.insert(full.end(), got.ids.begin(), got.ids.end());
    EXPECT_EQ(full, c.full_ids);
    dwell_session_free(back);
}

TEST_F(CApi, CancelFromAnotherThreadStopsTheReplyAndTheSessionGoesOn) {
    dwell_session* s = new_session();
    struct Shared {
        std::mutex m;
        std::condition_variable cv;
        bool first = false, cancelled = false;
        int tokens = 0;
    } sh;
    std::thread canceller([&] {
        std::unique_lock lock(sh.m);
        sh.cv.wait(lock, [&] { return sh.first; });
        dwell_session_cancel(s);
        sh.cancelled = true;
        sh.cv.notify_all();
    });
    dwell_generate_options g;
    dwell_generate_options_init(&g);
    g.max_tokens = 400;
    const auto on_token = [](void* user, int32_t token, const char*, size_t) -> int {
        auto* sh = static_cast<Shared*>(user);
        if (token < 0) return 0;
        std::unique_lock lock(sh->m);
        ++sh->tokens;
        sh->first = true;
        sh->cv.notify_all();
        sh->cv.wait(lock, [&] { return sh->cancelled; });  // the cancel lands mid-reply
        return 0;
    };
    EXPECT_EQ(dwell_session_generate(s, "Once upon a time", &g, on_token, &sh, nullptr, &err_),
              DWELL_ERR_CANCELLED);
    canceller.join();
    EXPECT_EQ(err_.code, DWELL_ERR_CANCELLED);
    EXPECT_FALSE(std::string(err_.message).empty());
    EXPECT_LT(sh.tokens, 5);
    // usable again, and the cancel does not stick
    g.max_tokens = 4;
    Collected more;
    EXPECT_EQ(dwell_session_generate(s, " and then", &g, collect, &more, nullptr, &err_), DWELL_OK)
        << err_.message;
    EXPECT_EQ(more.ids.size(), 4u);
    dwell_session_free(s);
}

TEST_F(CApi, MisuseIsACodeAndOneLine) {
    dwell_llm* m = nullptr;
    EXPECT_EQ(dwell_llm_load(rt_, "/nonexistent/model.gguf", &m, &err_), DWELL_ERR_IO);
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(std::string(err_.message).find("/nonexistent/model.gguf"), std::string::npos)
        << err_.message;
    EXPECT_EQ(std::string(err_.message).find('\n'), std::string::npos);

    EXPECT_EQ(dwell_session_create(nullptr, nullptr, nullptr, &err_), DWELL_ERR_INVALID_ARGUMENT);
    dwell_session_options so;
    dwell_session_options_init(&so);
    so.struct_size = 4;  // a caller built against nothing sensible
    dwell_session* s = nullptr;
    EXPECT_EQ(dwell_session_create(model_h_, &so, &s, &err_), DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(err_.message).find("struct_size"), std::string::npos);

    dwell_runtime_options ro;
    dwell_runtime_options_init(&ro);
    ro.manifest_path = "/nonexistent/phone.toml";
    dwell_runtime* rt = nullptr;
    EXPECT_NE(dwell_runtime_open(&ro, &rt, &err_), DWELL_OK);
    EXPECT_NE(std::string(err_.message).find("/nonexistent/phone.toml"), std::string::npos);
    EXPECT_EQ(rt, nullptr);

    // errors may be ignored (NULL error)
    EXPECT_EQ(dwell_llm_load(rt_, "/nonexistent/model.gguf", &m, nullptr), DWELL_ERR_IO);

    dwell_llm_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(dwell_llm_info_get(model_h_, &info, &err_), DWELL_OK);
    EXPECT_EQ(std::string(info.architecture), "llama");
    EXPECT_GT(info.n_vocab, 0);
}

// What the process writes to its stdout and stderr file descriptors while
// the object lives (the library's FILE* and fd writes alike).
class StdCapture {
public:
    explicit StdCapture(const TempDir& dir)
        : out_(dir.path() / "stdout.txt"), err_(dir.path() / "stderr.txt") {
        std::fflush(stdout);
        std::fflush(stderr);
        saved_out_ = ::dup(1);
        saved_err_ = ::dup(2);
        redirect(out_, 1);
        redirect(err_, 2);
    }
    ~StdCapture() { restore(); }
    StdCapture(const StdCapture&) = delete;
    StdCapture& operator=(const StdCapture&) = delete;

    // Ends the capture: {stdout, stderr}.
    std::pair<std::string, std::string> finish() {
        restore();
        return {read_file(out_), read_file(err_)};
    }

private:
    static void redirect(const std::filesystem::path& to, int fd) {
        const int f = ::open(to.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
        ASSERT_GE(f, 0) << to;
        ::dup2(f, fd);
        ::close(f);
    }
    void restore() {
        if (saved_out_ < 0) return;
        std::fflush(stdout);
        std::fflush(stderr);
        ::dup2(saved_out_, 1);
        ::dup2(saved_err_, 2);
        ::close(saved_out_);
        ::close(saved_err_);
        saved_out_ = saved_err_ = -1;
    }
    std::filesystem::path out_, err_;
    int saved_out_ = -1, saved_err_ = -1;
};

struct LogLine {
    int32_t level;
    std::string text;
};

struct LogLines {
    std::mutex m;
    std::vector<LogLine> lines;
    bool has(int32_t level, const std::string& part) {
        std::lock_guard lock(m);
        for (const LogLine& l : lines)
            if (l.level == level && l.text.find(part) != std::string::npos) return true;
        return false;
    }
    size_t count() {
        std::lock_guard lock(m);
        return lines.size();
    }
};

void collect_log(void* user, int32_t level, const char* message, size_t len) {
    auto* lines = static_cast<LogLines*>(user);
    std::lock_guard lock(lines->m);
    lines->lines.push_back({level, std::string(message, len)});
    // message is NUL-terminated at len
    EXPECT_EQ(message[len], '\0');
}

// The process-wide log settings back to the library's defaults after a test.
struct DefaultLogging {
    ~DefaultLogging() {
        dwell_set_log_callback(nullptr, nullptr);
        dwell_set_log_level(DWELL_CAPI_LOG_WARNING, nullptr);
    }
};

class CApiApp : public CApi {
protected:
    // Runtime (debug logging unless told), model, session and a short
    // greedy reply, as an application does it: everything released.
    dwell_status run_app(int32_t log_level = DWELL_CAPI_LOG_DEBUG) {
        dwell_runtime_options o;
        dwell_runtime_options_init(&o);
        o.manifest_path = manifest_text_.c_str();
        o.log_level = log_level;
        dwell_runtime* rt = nullptr;
        dwell_status s = dwell_runtime_open(&o, &rt, &err_);
        if (s != DWELL_OK) return s;
        dwell_llm* m = nullptr;
        s = dwell_llm_load(rt, model_.c_str(), &m, &err_);
        dwell_session* session = nullptr;
        if (s == DWELL_OK) s = dwell_session_create(m, nullptr, &session, &err_);
        dwell_generate_options g;
        dwell_generate_options_init(&g);
        g.max_tokens = 8;
        Collected got;
        if (s == DWELL_OK)
            s = dwell_session_generate(session, "Once upon a time", &g, collect, &got, nullptr,
                                       &err_);
        if (s == DWELL_OK && got.ids.size() != 8u) s = DWELL_ERR_INTERNAL;
        dwell_session_free(session);
        dwell_llm_free(m);
        dwell_runtime_close(rt);
        return s;
    }
    DefaultLogging restore_logging_;
};

TEST_F(CApiApp, VerboseLogsGoToStderrNotStdout) {
    StdCapture capture(dir_);
    const dwell_status s = run_app();
    const auto [out, err] = capture.finish();
    ASSERT_EQ(s, DWELL_OK) << err_.message;
    EXPECT_EQ(out, "") << "the library wrote to the application's stdout";
    // The core's lines and a plugin's line through the host services.
    EXPECT_NE(err.find("dwell: info: backend cpu/cpu0 selected"), std::string::npos) << err;
    EXPECT_NE(err.find("dwell: info: [cpu] cpu0: 2 threads"), std::string::npos) << err;
}

TEST_F(CApiApp, LogCallbackGetsEveryLineAndNothingElseIsWritten) {
    LogLines lines;
    dwell_set_log_callback(collect_log, &lines);
    StdCapture capture(dir_);
    const dwell_status s = run_app();
    const auto [out, err] = capture.finish();
    ASSERT_EQ(s, DWELL_OK) << err_.message;
    EXPECT_EQ(out, "");
    EXPECT_EQ(err, "");
    EXPECT_TRUE(lines.has(DWELL_CAPI_LOG_INFO, "backend cpu/cpu0 selected"));
    EXPECT_TRUE(lines.has(DWELL_CAPI_LOG_INFO, "[cpu] cpu0: 2 threads"));
    for (const LogLine& l : lines.lines) {
        EXPECT_GE(l.level, DWELL_CAPI_LOG_ERROR);
        EXPECT_LE(l.level, DWELL_CAPI_LOG_DEBUG);
        EXPECT_EQ(l.text.find('\n'), std::string::npos) << l.text;
    }

    // The level filters: at warnings the same run has no info line.
    LogLines quiet;
    dwell_set_log_callback(collect_log, &quiet);
    ASSERT_EQ(run_app(DWELL_CAPI_LOG_WARNING), DWELL_OK) << err_.message;
    EXPECT_FALSE(quiet.has(DWELL_CAPI_LOG_INFO, "backend cpu/cpu0 selected"));
    // The level may also be set apart from a runtime, and UNCHANGED keeps it.
    ASSERT_EQ(dwell_set_log_level(DWELL_CAPI_LOG_INFO, &err_), DWELL_OK);
    ASSERT_EQ(run_app(DWELL_CAPI_LOG_UNCHANGED), DWELL_OK) << err_.message;
    EXPECT_TRUE(quiet.has(DWELL_CAPI_LOG_INFO, "backend cpu/cpu0 selected"));
    EXPECT_EQ(dwell_set_log_level(3, &err_), DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(err_.message).find("level 3"), std::string::npos) << err_.message;

    // Once replaced, the earlier callback hears nothing more.
    const size_t before = lines.count();
    ASSERT_EQ(run_app(), DWELL_OK);
    EXPECT_EQ(lines.count(), before);
}

TEST_F(CApiApp, AThrowingLogCallbackLosesTheLineNotTheCall) {
    static std::atomic<int> calls{0};
    dwell_set_log_callback(
        [](void*, int32_t, const char*, size_t) {
            ++calls;
            throw 42;  // not even a std::exception
        },
        nullptr);
    EXPECT_EQ(run_app(), DWELL_OK) << err_.message;
    EXPECT_GT(calls.load(), 0);
}

TEST_F(CApi, AThrowingTokenCallbackIsAStatus) {
    dwell_session* s = new_session();
    const auto throwing = [](void*, int32_t, const char*, size_t) -> int { throw 7; };
    EXPECT_EQ(
        dwell_session_generate(s, "Once upon a time", nullptr, throwing, nullptr, nullptr, &err_),
        DWELL_ERR_INTERNAL);
    EXPECT_FALSE(std::string(err_.message).empty());
    dwell_session_free(s);
}

TEST_F(CApi, NullOptionsAreTheDefaults) {
    DefaultLogging restore;
    LogLines lines;
    dwell_set_log_callback(collect_log, &lines);
    ASSERT_EQ(dwell_set_log_level(DWELL_CAPI_LOG_WARNING, &err_), DWELL_OK);
    // The runtime: device detection picks a manifest, the log level stays.
    dwell_runtime* rt = nullptr;
    ASSERT_EQ(dwell_runtime_open(nullptr, &rt, &err_), DWELL_OK) << err_.message;
    EXPECT_FALSE(lines.has(DWELL_CAPI_LOG_INFO, "selected")) << "NULL options raised the level";
    dwell_runtime_stats rs;
    rs.struct_size = sizeof rs;
    ASSERT_EQ(dwell_runtime_stats_get(rt, &rs, &err_), DWELL_OK);
    EXPECT_NE(std::string(rs.manifest), "");
    EXPECT_GE(rs.n_backends, 1u);
    dwell_runtime_close(rt);

    // The session and the reply: NULL equals what the *_init calls set.
    dwell_session_options so;
    dwell_session_options_init(&so);
    dwell_session* by_init = nullptr;
    ASSERT_EQ(dwell_session_create(model_h_, &so, &by_init, &err_), DWELL_OK) << err_.message;
    dwell_session* by_null = new_session();
    dwell_session_stats a{}, b{};
    a.struct_size = b.struct_size = sizeof a;
    ASSERT_EQ(dwell_session_stats_get(by_init, &a, &err_), DWELL_OK);
    ASSERT_EQ(dwell_session_stats_get(by_null, &b, &err_), DWELL_OK);
    dwell_llm_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(dwell_llm_info_get(model_h_, &info, &err_), DWELL_OK);
    EXPECT_EQ(b.n_ctx, std::min(info.n_ctx_train, 4096));
    EXPECT_EQ(a.n_ctx, b.n_ctx);

    dwell_generate_options g;
    dwell_generate_options_init(&g);
    Collected with_init, with_null;
    dwell_generation_stats st{};
    st.struct_size = sizeof st;
    ASSERT_EQ(dwell_session_generate(by_init, "Once upon a time", &g, collect, &with_init, nullptr,
                                     &err_),
              DWELL_OK);
    ASSERT_EQ(dwell_session_generate(by_null, "Once upon a time", nullptr, collect, &with_null, &st,
                                     &err_),
              DWELL_OK)
        << err_.message;
    EXPECT_EQ(with_null.ids, with_init.ids);
    // 128 tokens unless the story ended; a BOS went before the text.
    EXPECT_TRUE(st.n_generated == 128 || st.stopped_at_eos) << st.n_generated;
    EXPECT_EQ(static_cast<size_t>(st.n_prompt), prompt_ids("Once upon a time").size());
    dwell_session_free(by_init);
    dwell_session_free(by_null);
}

TEST_F(CApi, AFullContextIsItsOwnStatusInTheApisTerms) {
    dwell_session_options so;
    dwell_session_options_init(&so);
    so.n_ctx = 16;
    dwell_session* s = nullptr;
    ASSERT_EQ(dwell_session_create(model_h_, &so, &s, &err_), DWELL_OK) << err_.message;
    dwell_generate_options g;
    dwell_generate_options_init(&g);
    const std::string long_text =
        "Once upon a time there was a little girl who lived in a village near the forest and "
        "loved to play outside";
    ASSERT_GT(prompt_ids(long_text).size(), 16u);
    EXPECT_EQ(dwell_session_generate(s, long_text.c_str(), &g, nullptr, nullptr, nullptr, &err_),
              DWELL_ERR_CONTEXT_FULL);
    EXPECT_EQ(err_.code, DWELL_ERR_CONTEXT_FULL);
    std::string m = err_.message;
    EXPECT_NE(m.find("n_ctx of 16"), std::string::npos) << m;
    EXPECT_EQ(m.find("--"), std::string::npos) << m;
    EXPECT_STREQ(dwell_capi_status_name(DWELL_ERR_CONTEXT_FULL), "context full");
    EXPECT_STREQ(dwell_capi_status_name(DWELL_ERR_IO), "I/O error");

    // The session is as it was; a reply then fills the context and stops.
    g.max_tokens = 0;  // until end of text or context
    dwell_generation_stats st{};
    st.struct_size = sizeof st;
    ASSERT_EQ(dwell_session_generate(s, "Once upon a time", &g, nullptr, nullptr, &st, &err_),
              DWELL_OK)
        << err_.message;
    ASSERT_TRUE(st.stopped_at_context);
    EXPECT_EQ(dwell_session_generate(s, " and", &g, nullptr, nullptr, nullptr, &err_),
              DWELL_ERR_CONTEXT_FULL);
    m = err_.message;
    EXPECT_NE(m.find("16 tokens in the context"), std::string::npos) << m;
    EXPECT_NE(m.find("shift_context"), std::string::npos) << m;
    EXPECT_NE(m.find("dwell_session_reset"), std::string::npos) << m;
    EXPECT_EQ(m.find("--"), std::string::npos) << m;
    // A full conversation is saved as it is and loads back.
    const auto file = dir_.path() / "full.dwell-session";
    ASSERT_EQ(dwell_session_save(s, file.c_str(), &err_), DWELL_OK) << err_.message;
    dwell_session* back = nullptr;
    ASSERT_EQ(dwell_session_create(model_h_, &so, &back, &err_), DWELL_OK);
    ASSERT_EQ(dwell_session_load(back, file.c_str(), &err_), DWELL_OK) << err_.message;
    dwell_session_stats ss{};
    ss.struct_size = sizeof ss;
    ASSERT_EQ(dwell_session_stats_get(back, &ss, &err_), DWELL_OK);
    EXPECT_EQ(ss.n_past, 16);
    dwell_session_free(back);
    dwell_session_free(s);

    // Shifting cannot help text longer than the whole context.
    so.shift_context = 1;
    ASSERT_EQ(dwell_session_create(model_h_, &so, &s, &err_), DWELL_OK);
    EXPECT_EQ(dwell_session_generate(s, long_text.c_str(), &g, nullptr, nullptr, nullptr, &err_),
              DWELL_ERR_CONTEXT_FULL);
    m = err_.message;
    EXPECT_NE(m.find("pass less text"), std::string::npos) << m;
    EXPECT_EQ(m.find("--"), std::string::npos) << m;
    dwell_session_free(s);
}

TEST_F(CApi, MessagesNameFieldsNotCommandLineFlags) {
    const auto no_flag = [](const std::string& m) {
        EXPECT_EQ(m.find("--"), std::string::npos) << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    };
    dwell_runtime_stats rs{};
    rs.struct_size = sizeof rs;
    ASSERT_EQ(dwell_runtime_stats_get(rt_, &rs, &err_), DWELL_OK);
    dwell_runtime_options o;
    dwell_runtime_options_init(&o);
    o.manifest_path = manifest_text_.c_str();

    // Weights over the budget.
    o.memory_budget_mb = 1;
    dwell_runtime* tight = nullptr;
    ASSERT_EQ(dwell_runtime_open(&o, &tight, &err_), DWELL_OK) << err_.message;
    dwell_llm* m = nullptr;
    dwell_llm_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(dwell_llm_info_get(model_h_, &info, &err_), DWELL_OK);
    if (info.weight_bytes > (1u << 20)) {
        EXPECT_EQ(dwell_llm_load(tight, model_.c_str(), &m, &err_), DWELL_ERR_OUT_OF_MEMORY);
        EXPECT_NE(std::string(err_.message).find("memory_budget_mb"), std::string::npos)
            << err_.message;
        no_flag(err_.message);
    }
    dwell_llm_free(m);
    dwell_runtime_close(tight);

    // A KV cache that cannot fit the budget at all.
    o.memory_budget_mb = 64;
    ASSERT_EQ(dwell_runtime_open(&o, &tight, &err_), DWELL_OK) << err_.message;
    ASSERT_EQ(dwell_llm_load(tight, model_.c_str(), &m, &err_), DWELL_OK) << err_.message;
    dwell_session_options so;
    dwell_session_options_init(&so);
    so.n_ctx = 1 << 24;
    dwell_session* s = nullptr;
    EXPECT_EQ(dwell_session_create(m, &so, &s, &err_), DWELL_ERR_OUT_OF_MEMORY);
    EXPECT_NE(std::string(err_.message).find("n_ctx"), std::string::npos) << err_.message;
    no_flag(err_.message);
    dwell_llm_free(m);
    dwell_runtime_close(tight);

    // KV pages that the budget, partly taken by the weights, cannot hold:
    // an F32 cache of the whole context fits the budget alone, not beside
    // the weights, and a long text fills it.
    const uint64_t budget_mb = ((info.weight_bytes + (1u << 20) - 1) >> 20) + 1;
    const uint64_t per_token =
        static_cast<uint64_t>(info.n_layer) * 2 * static_cast<uint64_t>(info.kv_width) * 4;
    so.n_ctx = static_cast<int32_t>((budget_mb << 20) / per_token);
    so.kv_type = DWELL_F32;
    std::string text;
    while (prompt_ids(text).size() < static_cast<size_t>(so.n_ctx) * 9 / 10)
        text += "Once upon a time there was a cat who liked to sing. ";
    o.memory_budget_mb = static_cast<int64_t>(budget_mb);
    ASSERT_EQ(dwell_runtime_open(&o, &tight, &err_), DWELL_OK) << err_.message;
    ASSERT_EQ(dwell_llm_load(tight, model_.c_str(), &m, &err_), DWELL_OK) << err_.message;
    dwell_status status = dwell_session_create(m, &so, &s, &err_);
    if (status == DWELL_OK)
        status = dwell_session_generate(s, text.c_str(), nullptr, nullptr, nullptr, nullptr, &err_);
    EXPECT_EQ(status, DWELL_ERR_OUT_OF_MEMORY) << err_.message;
    EXPECT_NE(std::string(err_.message).find("memory_budget_mb"), std::string::npos)
        << err_.message;
    EXPECT_NE(std::string(err_.message).find("kv_type DWELL_Q8_0"), std::string::npos)
        << err_.message;
    no_flag(err_.message);
    dwell_session_free(s);
    s = nullptr;
    dwell_llm_free(m);
    dwell_runtime_close(tight);

    // A conversation loaded into a session of another context size.
    s = new_session();
    dwell_generate_options g;
    dwell_generate_options_init(&g);
    g.max_tokens = 2;
    ASSERT_EQ(dwell_session_generate(s, "Once", &g, nullptr, nullptr, nullptr, &err_), DWELL_OK);
    const auto file = dir_.path() / "c.dwell-session";
    ASSERT_EQ(dwell_session_save(s, file.c_str(), &err_), DWELL_OK) << err_.message;
    dwell_session_free(s);
    so.n_ctx = 32;
    ASSERT_EQ(dwell_session_create(model_h_, &so, &s, &err_), DWELL_OK);
    EXPECT_EQ(dwell_session_load(s, file.c_str(), &err_), DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(err_.message).find("n_ctx 0"), std::string::npos) << err_.message;
    no_flag(err_.message);
    dwell_session_free(s);
}

TEST_F(CApi, NumericOptionsOutOfRangeAreRefusedNamingTheField) {
    struct RuntimeCase {
        int32_t threads;
        int64_t budget;
        int32_t log_level;
        const char* field;
    };
    const RuntimeCase runtime_cases[] = {
        {0, -2, DWELL_CAPI_LOG_UNCHANGED, "options.memory_budget_mb is -2"},
        {0, (int64_t{1} << 30) + 1, DWELL_CAPI_LOG_UNCHANGED, "options.memory_budget_mb"},
        {0, std::numeric_limits<int64_t>::max(), DWELL_CAPI_LOG_UNCHANGED,
         "options.memory_budget_mb"},
        {-1, -1, DWELL_CAPI_LOG_UNCHANGED, "options.threads is -1"},
        {1025, -1, DWELL_CAPI_LOG_UNCHANGED, "options.threads is 1025"},
        {0, -1, 3, "options.log_level is 3"},
        {0, -1, -3, "options.log_level is -3"},
    };
    for (const RuntimeCase& c : runtime_cases) {
        SCOPED_TRACE(c.field);
        dwell_runtime_options o;
        dwell_runtime_options_init(&o);
        o.manifest_path = manifest_text_.c_str();
        o.threads = c.threads;
        o.memory_budget_mb = c.budget;
        o.log_level = c.log_level;
        dwell_runtime* rt = nullptr;
        EXPECT_EQ(dwell_runtime_open(&o, &rt, &err_), DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(rt, nullptr);
        EXPECT_NE(std::string(err_.message).find(c.field), std::string::npos) << err_.message;
        dwell_runtime_close(rt);
    }
    // The ends of the ranges are accepted: no budget, the manifest's.
    for (const int64_t budget : {int64_t{0}, int64_t{-1}}) {
        dwell_runtime_options o;
        dwell_runtime_options_init(&o);
        o.manifest_path = manifest_text_.c_str();
        o.memory_budget_mb = budget;
        dwell_runtime* rt = nullptr;
        EXPECT_EQ(dwell_runtime_open(&o, &rt, &err_), DWELL_OK) << err_.message;
        dwell_runtime_close(rt);
    }

    struct SessionCase {
        int32_t n_ctx, kv_type;
        const char* field;
    };
    const SessionCase session_cases[] = {
        {-1, -1, "options.n_ctx is -1"},         {(1 << 24) + 1, -1, "options.n_ctx is 16777217"},
        {0, DWELL_BF16, "options.kv_type is 2"}, {0, 999, "options.kv_type is 999"},
        {0, -2, "options.kv_type is -2"},
    };
    for (const SessionCase& c : session_cases) {
        SCOPED_TRACE(c.field);
        dwell_session_options so;
        dwell_session_options_init(&so);
        so.n_ctx = c.n_ctx;
        so.kv_type = c.kv_type;
        dwell_session* s = nullptr;
        EXPECT_EQ(dwell_session_create(model_h_, &so, &s, &err_), DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(s, nullptr);
        EXPECT_NE(std::string(err_.message).find(c.field), std::string::npos) << err_.message;
        EXPECT_EQ(std::string(err_.message).find("--"), std::string::npos) << err_.message;
    }

    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    struct GenerateCase {
        float dwell_generate_options::*field;
        float value;
        const char* name;
    };
    const GenerateCase generate_cases[] = {
        {&dwell_generate_options::temperature, nan, "options.temperature is nan"},
        {&dwell_generate_options::temperature, inf, "options.temperature is inf"},
        {&dwell_generate_options::top_p, nan, "options.top_p is nan"},
        {&dwell_generate_options::top_p, 0.0f, "options.top_p is 0"},
        {&dwell_generate_options::min_p, 1.0f, "options.min_p is 1"},
        {&dwell_generate_options::min_p, -inf, "options.min_p is -inf"},
        {&dwell_generate_options::repeat_penalty, 0.0f, "options.repeat_penalty is 0"},
        {&dwell_generate_options::repeat_penalty, inf, "options.repeat_penalty is inf"},
    };
    dwell_session* s = new_session();
    for (const GenerateCase& c : generate_cases) {
        SCOPED_TRACE(c.name);
        dwell_generate_options g;
        dwell_generate_options_init(&g);
        g.*c.field = c.value;
        EXPECT_EQ(dwell_session_generate(s, "Once", &g, nullptr, nullptr, nullptr, &err_),
                  DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(err_.message).find(c.name), std::string::npos) << err_.message;
    }
    dwell_session_stats ss{};
    ss.struct_size = sizeof ss;
    ASSERT_EQ(dwell_session_stats_get(s, &ss, &err_), DWELL_OK);
    EXPECT_EQ(ss.n_past, 0) << "a refused call fed the text";
    dwell_session_free(s);

    // The header's "off" values outside the sampler's own ranges: a
    // negative temperature is greedy, top_p above 1 and min_p below 0 off.
    const auto reply = [&](float temperature, float top_p, float min_p) {
        dwell_session* r = new_session();
        dwell_generate_options g;
        dwell_generate_options_init(&g);
        g.max_tokens = 8;
        g.temperature = temperature;
        g.top_p = top_p;
        g.min_p = min_p;
        Collected got;
        EXPECT_EQ(dwell_session_generate(r, "Once upon a time", &g, collect, &got, nullptr, &err_),
                  DWELL_OK)
            << err_.message;
        dwell_session_free(r);
        return got.ids;
    };
    const auto greedy = reply(0.0f, 1.0f, 0.0f);
    EXPECT_EQ(greedy.size(), 8u);
    EXPECT_EQ(reply(-1.0f, 1.0f, 0.0f), greedy);
    EXPECT_EQ(reply(0.8f, 2.0f, -1.0f).size(), 8u);
}

}  // namespace
}  // namespace dwell::test
