// The C API (hosts/capi/include/dwell.h) end to end: stories260K's greedy
// tokens equal llama.cpp's through it, a conversation continues across
// calls and across save/load, cancel from another thread stops a reply and
// leaves the session usable, and every misuse is a code plus one line.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
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

}  // namespace
}  // namespace dwell::test
