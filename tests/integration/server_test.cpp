// The OpenAI-compatible server in-process on a free loopback port, driven by
// an HTTP client: llama.cpp's greedy continuation through /v1/completions,
// streaming equal to the whole reply, stop sequences, usage, the errors
// (400 naming the field, 401, 404, 413, 503 with Retry-After) and a client
// that goes away cancelling its generation.
#ifdef DWELL_TEST_HAVE_SERVER  // built without cpp-httplib: no server to test
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "dwell/core/model.hpp"
#include "dwell/core/runtime.hpp"
#include "integration_support.hpp"
#include "openai_server.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

using nlohmann::json;

struct Continuation {
    std::string prompt, text;
    int n_predict = 0;
};

// The first case of the llama.cpp greedy reference (F32 KV caches).
Continuation first_reference() {
    std::ifstream in(std::filesystem::path(DWELL_TEST_SOURCE_DIR) /
                     "tests/integration/data/stories260k_llamacpp_greedy.jsonl");
    std::string line;
    std::getline(in, line);
    const json j = json::parse(line);
    return {j["prompt"], j["continuation"], j["n_predict"]};
}

// SSE "data: ..." payloads of a streamed body.
std::vector<std::string> events(const std::string& body) {
    std::vector<std::string> out;
    size_t at = 0;
    while ((at = body.find("data: ", at)) != std::string::npos) {
        const size_t end = body.find("\n\n", at);
        out.push_back(body.substr(at + 6, end - at - 6));
        at = end;
    }
    return out;
}

class Server : public ::testing::Test {
protected:
    void start(server::ServerOptions o = {}) {
        DWELL_REQUIRE_MODEL(path, "stories260K.gguf");
        RuntimeOptions ro;
        ro.manifest = dir_.write(
            "f32kv.toml",
            "[[backend]]\nplugin = \"cpu\"\n[cpu]\nthreads = 2\n[kv]\ndtype = \"f32\"\n");
        runtime_ = std::make_unique<Runtime>(ro);
        model_ = Model::load(*runtime_, path);
        o.port = 0;
        o.chat_template = o.chat_template.empty() ? "chatml" : o.chat_template;
        server_ = std::make_unique<server::OpenAiServer>(*runtime_, model_, o);
        port_ = server_->bind();
        thread_ = std::thread([this] { server_->serve(); });
    }
    void TearDown() override {
        if (server_) server_->stop();
        if (thread_.joinable()) thread_.join();
        server_.reset();
    }
    httplib::Client client() {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(60);
        return c;
    }
    httplib::Result post(const std::string& path, const json& body,
                         const httplib::Headers& headers = {}) {
        return client().Post(path.c_str(), headers, body.dump(), "application/json");
    }

    TempDir dir_;
    std::unique_ptr<Runtime> runtime_;
    std::shared_ptr<Model> model_;
    std::unique_ptr<server::OpenAiServer> server_;
    std::thread thread_;
    int port_ = 0;
};

TEST_F(Server, CompletionEqualsLlamaCppsGreedyContinuationWithUsage) {
    start();
    if (IsSkipped()) return;
    const Continuation ref = first_reference();
    const auto r =
        post("/v1/completions",
             {{"prompt", ref.prompt}, {"max_tokens", ref.n_predict}, {"temperature", 0}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["choices"][0]["text"], ref.text);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    const auto prompt_ids = model_->tokenizer().encode(ref.prompt, true);
    EXPECT_EQ(j["usage"]["prompt_tokens"], prompt_ids.size());
    EXPECT_EQ(j["usage"]["completion_tokens"], ref.n_predict);
    EXPECT_EQ(j["usage"]["total_tokens"], prompt_ids.size() + ref.n_predict);
}

TEST_F(Server, StreamedChatEqualsTheWholeReplyAndEndsWithDone) {
    start();
    if (IsSkipped()) return;
    const json req = {{"messages",
                       {{{"role", "system"}, {"content", "Be brief."}},
                        {{"role", "user"}, {"content", "Tell me about a cat."}}}},
                      {"max_tokens", 40},
                      {"temperature", 0}};
    const auto whole = post("/v1/chat/completions", req);
    ASSERT_TRUE(whole);
    ASSERT_EQ(whole->status, 200) << whole->body;
    const json w = json::parse(whole->body);
    EXPECT_EQ(w["choices"][0]["message"]["role"], "assistant");
    json sreq = req;
    sreq["stream"] = true;
    sreq["stream_options"] = {{"include_usage", true}};
    const auto streamed = post("/v1/chat/completions", sreq);
    ASSERT_TRUE(streamed);
    ASSERT_EQ(streamed->status, 200);
    EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
    const auto ev = events(streamed->body);
    ASSERT_GE(ev.size(), 4u);
    EXPECT_EQ(ev.back(), "[DONE]");
    std::string text;
    std::string finish;
    json usage;
    for (size_t i = 0; i + 1 < ev.size(); ++i) {
        const json c = json::parse(ev[i]);
        EXPECT_EQ(c["object"], "chat.completion.chunk");
        if (c.contains("usage")) {
            usage = c["usage"];
            continue;
        }
        const json& ch = c["choices"][0];
        if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
        if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    }
    EXPECT_EQ(text, w["choices"][0]["message"]["content"]);
    EXPECT_EQ(finish, w["choices"][0]["finish_reason"]);
    EXPECT_EQ(usage, w["usage"]);
}

TEST_F(Server, StopSequencesCutTheReplyEvenAcrossTokens) {
    start();
    if (IsSkipped()) return;
    const Continuation ref = first_reference();
    // " a big, red ball. The ball was very happy. ..."
    const std::string stop = "ball was";
    const size_t at = ref.text.find(stop);
    ASSERT_NE(at, std::string::npos);
    for (const bool stream : {false, true}) {
        SCOPED_TRACE(stream ? "stream" : "whole");
        const auto r = post("/v1/completions", {{"prompt", ref.prompt},
                                                {"max_tokens", ref.n_predict},
                                                {"temperature", 0},
                                                {"stop", {"never appears", stop}},
                                                {"stream", stream}});
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200);
        std::string text, finish;
        if (stream) {
            for (const std::string& e : events(r->body)) {
                if (e == "[DONE]") break;
                const json c = json::parse(e);
                text += c["choices"][0]["text"].get<std::string>();
                // no piece of the stop string ever goes out
                EXPECT_EQ(text.find("ball w"), std::string::npos);
                if (!c["choices"][0]["finish_reason"].is_null())
                    finish = c["choices"][0]["finish_reason"];
            }
        } else {
            const json j = json::parse(r->body);
            text = j["choices"][0]["text"];
            finish = j["choices"][0]["finish_reason"];
        }
        EXPECT_EQ(text, ref.text.substr(0, at));
        EXPECT_EQ(finish, "stop");
    }
}

TEST_F(Server, BadRequestsGetOpenAiStyleErrors) {
    server::ServerOptions o;
    o.api_key = "sekret";
    o.max_body_bytes = 4096;
    start(o);
    if (IsSkipped()) return;
    const httplib::Headers auth = {{"Authorization", "Bearer sekret"}};
    const auto expect_error = [](const httplib::Result& r, int status, const std::string& param) {
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, status) << r->body;
        const json j = json::parse(r->body);
        EXPECT_TRUE(j["error"]["message"].is_string());
        EXPECT_TRUE(j["error"]["type"].is_string());
        if (!param.empty()) {
            EXPECT_EQ(j["error"]["param"], param) << r->body;
        }
    };
    expect_error(post("/v1/completions", {{"prompt", "x"}}), 401, "");
    expect_error(post("/v1/completions", {{"prompt", "x"}}, {{"Authorization", "Bearer wrong"}}),
                 401, "");
    EXPECT_EQ(client().Get("/health")->status, 200);  // open without the key
    expect_error(client().Post("/v1/completions", auth, "{not json", "application/json"), 400, "");
    expect_error(post("/v1/completions", {{"prompt", 7}}, auth), 400, "prompt");
    expect_error(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 0}}, auth), 400,
                 "max_tokens");
    expect_error(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 100000}}, auth), 400,
                 "max_tokens");
    expect_error(post("/v1/completions", {{"prompt", "x"}, {"temperature", 3}}, auth), 400,
                 "temperature");
    expect_error(post("/v1/completions", {{"prompt", "x"}, {"stop", {1, 2}}}, auth), 400, "stop");
    expect_error(post("/v1/chat/completions", {{"messages", json::array()}}, auth), 400,
                 "messages");
    expect_error(
        post("/v1/chat/completions", {{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, auth),
        400, "messages[0].role");
    expect_error(post("/v1/completions", {{"prompt", std::string(600 * 5, 'a')}}, auth), 400,
                 "prompt");
    expect_error(post("/v1/completions", {{"prompt", std::string(8000, 'a')}}, auth), 413, "");
    const auto nf = client().Get("/v2/nothing", auth);
    expect_error(nf, 404, "");
    const auto ok = post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}}, auth);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200);
}

TEST_F(Server, AFullQueueAnswers503AndAGoneClientCancelsItsGeneration) {
    server::ServerOptions o;
    o.parallel = 1;
    o.max_queue = 0;
    start(o);
    if (IsSkipped()) return;
    // A streamed request whose reader stops after its first event holds the
    // only place until the server notices it has gone.
    std::atomic<bool> got_first{false};
    std::atomic<bool> release{false};
    std::thread holder([&] {
        httplib::Client c = client();
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.set_header("Content-Type", "application/json");
        req.body =
            json{{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"stream", true}}.dump();
        req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
            got_first = true;
            while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
            return false;  // close the connection
        };
        c.send(req);
    });
    while (!got_first) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const auto busy = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
    ASSERT_TRUE(busy);
    EXPECT_EQ(busy->status, 503) << busy->body;
    EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
    EXPECT_EQ(json::parse(busy->body)["error"]["type"], "server_busy");
    release = true;
    holder.join();
    // The place frees up; the abandoned generation stopped well short of 480.
    int status = 0;
    for (int i = 0; i < 200 && status != 200; ++i) {
        const auto next = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
        status = next ? next->status : 0;
        if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(status, 200);
    const auto metrics = client().Get("/metrics");
    ASSERT_TRUE(metrics);
    const std::string m = metrics->body;
    // The value of a sample line, or -1.
    const auto sample = [&](const std::string& name) -> double {
        const auto at = m.find("\n" + name + " ");
        return at == std::string::npos ? -1 : std::stod(m.substr(at + name.size() + 2));
    };
    EXPECT_GE(sample("dwell_requests_total{endpoint=\"/v1/completions\",code=\"503\"}"), 1) << m;
    EXPECT_EQ(sample("dwell_queue_depth"), 0);
    EXPECT_GE(sample("dwell_kv_pages_in_use"), 0);
    const double generated = sample("dwell_generated_tokens_total");
    EXPECT_GT(generated, 0);
    EXPECT_LT(generated, 480 / 2) << "the generation went on after its client left";
    // The backend that served the requests, healthy and with steps run.
    EXPECT_EQ(sample("dwell_backend_healthy{backend=\"cpu/cpu0\"}"), 1) << m;
    EXPECT_GT(sample("dwell_backend_steps_total{backend=\"cpu/cpu0\"}"), 0) << m;
    EXPECT_EQ(
        sample("dwell_backend_failed_steps_total{backend=\"cpu/cpu0\",fault=\"error_status\"}"), 0)
        << m;
}

}  // namespace
}  // namespace dwell::test
#endif  // DWELL_TEST_HAVE_SERVER
