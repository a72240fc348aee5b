#include "openai_server.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "admission.hpp"
#include "dwell/core/error.hpp"
#include "dwell/core/model.hpp"
#include "dwell/core/runtime.hpp"
#include "dwell/core/session.hpp"
#include "dwell/core/text_generation.hpp"
#include "dwell/core/tokenizer.hpp"
#include "http_front.hpp"
#include "json_text.hpp"
#include "openai_request.hpp"
#include "server_metrics.hpp"

namespace dwell::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Metric labels come from this fixed set, never from what a client sent.
std::string known_route(std::string_view path) {
    path = path.substr(0, path.find('?'));
    for (const char* r :
         {"/v1/completions", "/v1/chat/completions", "/v1/models", "/metrics", "/health"})
        if (path == r) return r;
    return "other";
}

// httplib's request handling (routing, handlers, replies) without its
// listener: HttpFront hands it whole requests (http_front.hpp).
class HttpCore : public httplib::Server {
public:
    using httplib::Server::process_request;
    // httplib stops writing replies while its listening socket is unset.
    void serving(int listener) { svr_sock_ = listener; }
};

// httplib calls its error and exception handlers outside any try of its
// own: an exception out of them would end the process. What they cannot
// build becomes a plain 500.
template <typename Handler>
auto never_throws(Handler handler) {
    return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                          auto&&... rest) {
        try {
            handler(req, res, std::forward<decltype(rest)>(rest)...);
        } catch (...) {
            res.status = 500;
            res.set_content(
                R"({"error":{"message":"internal error","type":"server_error","param":null,"code":null}})",
                "application/json");
        }
    };
}

int64_t unix_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(json_text(body), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& type, const std::string& param = "") {
    send_json(res, status, error_body(message, type, param));
}

int status_of(const Error& e) {
    switch (e.status()) {
        case DWELL_ERR_INVALID_ARGUMENT:
            return 400;
        case DWELL_ERR_OUT_OF_MEMORY:
            return 503;
        default:
            return 500;
    }
}

// Runs a reply's writer; false (httplib closes the connection) when it
// throws, which must not reach httplib's writer loop.
template <typename Write>
bool guarded_write(const std::string& id, Write&& write) {
    try {
        write();
        return true;
    } catch (const std::exception& e) {
        spdlog::error("{}: the reply failed: {}", id, e.what());
    } catch (...) {
        spdlog::error("{}: the reply failed", id);
    }
    return false;
}

// "data: {...}\n\n"
bool send_event(httplib::DataSink& sink, const std::string& data) {
    const std::string event = "data: " + data + "\n\n";
    return sink.write(event.data(), event.size());
}

// The sessions generating now, so that stop() can cancel them.
class LiveSessions {
public:
    void add(Session* s) {
        std::lock_guard lock(mutex_);
        live_.insert(s);
    }
    void remove(Session* s) {
        std::lock_guard lock(mutex_);
        live_.erase(s);
    }
    void cancel_all() {
        std::lock_guard lock(mutex_);
        for (Session* s : live_) s->cancel();
    }

private:
    std::mutex mutex_;
    std::set<Session*> live_;
};

// Registered while its session lives (declared after the session: goes first).
struct LiveRegistration {
    LiveRegistration(LiveSessions& l, Session* s) : live(l), session(s) { live.add(s); }
    ~LiveRegistration() { live.remove(session); }
    LiveRegistration(const LiveRegistration&) = delete;
    LiveRegistration& operator=(const LiveRegistration&) = delete;
    LiveSessions& live;
    Session* session;
};

// What one request needs once it is admitted, kept alive by the response's
// content provider until the reply is written.
struct Job {
    CompletionRequest request;
    TextRequest text;
    std::unique_ptr<Session> session;
    std::unique_ptr<LiveRegistration> registration;
    std::optional<Admission::Slot> slot;
    std::string id;
    int32_t prompt_tokens = 0;
    double prompt_seconds = 0;
};

}  // namespace

struct OpenAiServer::Impl {
    Impl(Runtime& rt, std::shared_ptr<const Model> m, ServerOptions opts)
        : runtime(rt), model(std::move(m)), o(std::move(opts)), admission(o.parallel, o.max_queue) {
        if (o.model_name.empty()) o.model_name = model->path().filename().string();
        try {
            chat.emplace(model->tokenizer(),
                         ChatTemplate::choose(o.chat_template,
                                              chat_template_text(model->source().metadata())));
        } catch (const Error& e) {
            chat_unavailable = e.what();
            spdlog::warn("/v1/chat/completions unavailable: {}", chat_unavailable);
        }
        routes();
        FrontOptions f;
        f.limits.max_body_bytes = o.max_body_bytes;
        f.request_deadline = std::chrono::seconds(std::max(1, o.request_read_seconds));
        f.max_connections = std::max(1, o.max_connections);
        f.max_connections_per_peer = std::max(1, o.max_connections_per_peer);
        // Every admitted and every waiting request has a worker, and more
        // answer /health, /metrics and refusals meanwhile.
        f.workers = o.parallel + o.max_queue + 16;
        front = std::make_unique<HttpFront>(f, request_handler(), refusal());
    }

    void routes();
    void completion(const httplib::Request& req, httplib::Response& res, bool chat_api);
    HttpFront::Handler request_handler();
    HttpFront::Refusal refusal();
    json final_body(const Job& job, const TextResult& r) const;
    void write_stream(Job& job, httplib::DataSink& sink);
    void write_whole(Job& job, httplib::DataSink& sink);
    bool finished(const Job& job, const TextResult& r);

    Runtime& runtime;
    std::shared_ptr<const Model> model;
    ServerOptions o;
    HttpCore http;
    std::unique_ptr<HttpFront> front;
    Admission admission;
    ServerMetrics metrics;
    std::optional<ChatPrompt> chat;
    std::string chat_unavailable;
    std::atomic<uint64_t> next_id{0};
    LiveSessions live;
    int port = -1;
};

HttpFront::Handler OpenAiServer::Impl::request_handler() {
    return [this](httplib::Stream& stream, bool close) {
        bool closed = false;
        const bool ok = http.process_request(stream, close, closed, nullptr);
        return ok && !closed;
    };
}

HttpFront::Refusal OpenAiServer::Impl::refusal() {
    return [this](int status, const std::string& message, const std::string& target) {
        metrics.request(known_route(target), status);
        return json_text(
            error_body(message, status == 503 ? "server_busy" : "invalid_request_error"));
    };
}

void OpenAiServer::Impl::routes() {
    // HttpFront reads requests and owns the connections; these hold for
    // what it hands over, and for the Keep-Alive header.
    http.set_payload_max_length(o.max_body_bytes);
    http.set_keep_alive_timeout(5);
    http.set_keep_alive_max_count(1000);

    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (o.api_key.empty() || req.path == "/health")
            return httplib::Server::HandlerResponse::Unhandled;
        if (req.get_header_value("Authorization") == "Bearer " + o.api_key)
            return httplib::Server::HandlerResponse::Unhandled;
        send_error(res, 401, "a valid API key is required (Authorization: Bearer KEY)",
                   "invalid_request_error");
        metrics.request(known_route(req.path), 401);
        return httplib::Server::HandlerResponse::Handled;
    });
    http.set_error_handler(never_throws([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        const std::string what = res.status == 404
                                     ? "no such endpoint: " + req.method + " " + req.path
                                 : res.status == 413 ? "the request body is too large"
                                                     : "the request failed";
        send_error(res, res.status, what, "invalid_request_error");
    }));
    http.set_exception_handler(
        never_throws([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "internal error";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            send_error(res, 500, what, "server_error");
        }));

    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, {{"status", "ok"}});
        metrics.request("/health", 200);
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        ServerMetrics::Gauges g;
        g.running = admission.running();
        g.waiting = admission.waiting();
        g.kv_pages_in_use = runtime.kv_pages().pages_in_use();
        g.kv_page_bytes = static_cast<int64_t>(runtime.kv_pages().page_bytes());
        const PoolStats pool = runtime.pool().stats();
        g.memory_used_bytes = pool.used_bytes;
        g.memory_budget_bytes = pool.budget_bytes;
        g.thermal = runtime.thermal_state();
        for (const auto& b : runtime.backends())
            g.backends.emplace_back(b->label(), b->health().report());
        res.set_content(metrics.render(g), "text/plain; version=0.0.4");
        metrics.request("/metrics", 200);
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200,
                  {{"object", "list"},
                   {"data", json::array({{{"id", o.model_name},
                                          {"object", "model"},
                                          {"created", 0},
                                          {"owned_by", "dwell"}}})}});
        metrics.request("/v1/models", 200);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
        completion(req, res, false);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        completion(req, res, true);
    });
}

void OpenAiServer::Impl::completion(const httplib::Request& req, httplib::Response& res,
                                    bool chat_api) {
    const std::string endpoint = chat_api ? "/v1/chat/completions" : "/v1/completions";
    auto job = std::make_shared<Job>();
    try {
        job->request = parse_completion_body(req.body, chat_api, o.max_tokens_limit);
        if (chat_api && !chat) throw RequestError(400, chat_unavailable, "messages");
        const Tokenizer& tok = model->tokenizer();
        job->text.prompt = chat_api ? chat->encode(job->request.messages, true)
                                    : tok.encode(job->request.prompt, true);
        if (chat_api) job->text.stop_tokens = chat->stop_tokens();
        job->text.stop = job->request.stop;
        SamplerParams& sp = job->text.sampling;
        sp.temperature = job->request.temperature;
        sp.top_p = job->request.top_p;
        sp.top_k = 0;
        sp.min_p = 0;
        sp.seed = job->request.seed ? *job->request.seed : std::random_device{}();

        auto slot = admission.enter();
        if (!slot && admission.closed())
            throw RequestError(503, "the server is stopping", "", "server_busy");
        if (!slot) {
            res.set_header("Retry-After", "1");
            throw RequestError(503,
                               "the server is busy (" + std::to_string(o.parallel) +
                                   " generating, " + std::to_string(o.max_queue) +
                                   " waiting); retry shortly",
                               "", "server_busy");
        }
        job->slot.emplace(std::move(*slot));

        SessionOptions so;
        so.n_ctx = o.n_ctx;
        job->session = std::make_unique<Session>(runtime, model, so);
        job->registration = std::make_unique<LiveRegistration>(live, job->session.get());
        const auto room = job->session->n_ctx() - static_cast<int32_t>(job->text.prompt.size());
        if (room < 1)
            throw RequestError(400,
                               "the prompt is " + std::to_string(job->text.prompt.size()) +
                                   " tokens; the context holds " +
                                   std::to_string(job->session->n_ctx()),
                               chat_api ? "messages" : "prompt");
        job->text.max_tokens = std::min(
            job->request.max_tokens > 0 ? job->request.max_tokens : o.default_max_tokens, room);
        // The prompt runs before the reply starts, so that its failures
        // (budget, context) still get their own status code.
        const auto t0 = Clock::now();
        job->session->decode(job->text.prompt);
        job->prompt_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        job->prompt_tokens = static_cast<int32_t>(job->text.prompt.size());
        job->text.prompt.clear();
        job->text.deadline = Clock::now() + std::chrono::seconds(o.request_seconds);
    } catch (const RequestError& e) {
        send_error(res, e.status(), e.what(), e.type(), e.param());
        metrics.request(endpoint, e.status());
        return;
    } catch (const Error& e) {
        const int status = status_of(e);
        if (status == 503) res.set_header("Retry-After", "5");
        send_error(res, status, e.what(), status == 500 ? "server_error" : "invalid_request_error");
        metrics.request(endpoint, status);
        return;
    }
    job->id = (chat_api ? "chatcmpl-" : "cmpl-") + std::to_string(++next_id);
    metrics.request(endpoint, 200);
    if (job->request.stream) {
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream", [this, job](size_t, httplib::DataSink& sink) {
                return guarded_write(job->id, [&] { write_stream(*job, sink); });
            });
    } else {
        // With a charset the type is not on httplib's compressible list: the
        // reply (and the probe spaces) reach the socket as written.
        res.set_chunked_content_provider(
            "application/json; charset=utf-8", [this, job](size_t, httplib::DataSink& sink) {
                return guarded_write(job->id, [&] { write_whole(*job, sink); });
            });
    }
}

json OpenAiServer::Impl::final_body(const Job& job, const TextResult& r) const {
    const char* finish = r.finish == FinishReason::Stop ? "stop" : "length";
    json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (job.request.chat) {
        choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    } else {
        choice["text"] = r.text;
    }
    return {{"id", job.id},
            {"object", job.request.chat ? "chat.completion" : "text_completion"},
            {"created", unix_seconds()},
            {"model", o.model_name},
            {"choices", json::array({choice})},
            {"usage",
             {{"prompt_tokens", job.prompt_tokens},
              {"completion_tokens", r.completion_tokens},
              {"total_tokens", job.prompt_tokens + r.completion_tokens}}}};
}

// Counts the reply's tokens; false when its client went away (nothing more
// to write).
bool OpenAiServer::Impl::finished(const Job& job, const TextResult& r) {
    metrics.tokens(job.prompt_tokens, r.completion_tokens, r.stats.generation_seconds);
    if (r.finish != FinishReason::Disconnected) return true;
    spdlog::info("{}: the client went away; generation cancelled after {} tokens", job.id,
                 r.completion_tokens);
    return false;
}

void OpenAiServer::Impl::write_whole(Job& job, httplib::DataSink& sink) {
    // A space now and then (JSON allows leading whitespace) finds out
    // whether the client is still there while a long reply is generated.
    int deltas = 0;
    TextResult r;
    try {
        r = generate_text(*job.session, job.text, [&](std::string_view) {
            return ++deltas % 64 != 0 || sink.write(" ", 1);
        });
    } catch (const std::exception& e) {
        // An exception out of a content provider would end the process.
        const std::string body = json_text(error_body(e.what(), "server_error"));
        sink.write(body.data(), body.size());
        sink.done();
        return;
    }
    if (!finished(job, r)) return;
    const std::string body = json_text(final_body(job, r)) + "\n";
    sink.write(body.data(), body.size());
    sink.done();
}

void OpenAiServer::Impl::write_stream(Job& job, httplib::DataSink& sink) {
    const bool chat_api = job.request.chat;
    const int64_t created = unix_seconds();
    const auto chunk = [&](json delta_or_text, const json& finish) {
        json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
        if (chat_api) {
            choice["delta"] = std::move(delta_or_text);
        } else {
            choice["text"] = std::move(delta_or_text);
        }
        return json{{"id", job.id},
                    {"object", chat_api ? "chat.completion.chunk" : "text_completion"},
                    {"created", created},
                    {"model", o.model_name},
                    {"choices", json::array({choice})}};
    };
    if (chat_api &&
        !send_event(sink, json_text(chunk({{"role", "assistant"}, {"content", ""}}, nullptr))))
        return;
    TextResult r;
    try {
        r = generate_text(*job.session, job.text, [&](std::string_view delta) {
            const json d =
                chat_api ? json{{"content", std::string(delta)}} : json(std::string(delta));
            return send_event(sink, json_text(chunk(d, nullptr)));
        });
    } catch (const std::exception& e) {
        send_event(sink, json_text(error_body(e.what(), "server_error")));
        sink.done();
        return;
    }
    if (!finished(job, r)) return;
    const char* finish = r.finish == FinishReason::Stop ? "stop" : "length";
    send_event(sink, json_text(chunk(chat_api ? json::object() : json(""), finish)));
    if (job.request.include_usage) {
        json usage = chunk(json::object(), nullptr);
        usage["choices"] = json::array();
        usage["usage"] = {{"prompt_tokens", job.prompt_tokens},
                          {"completion_tokens", r.completion_tokens},
                          {"total_tokens", job.prompt_tokens + r.completion_tokens}};
        send_event(sink, json_text(usage));
    }
    const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    sink.done();
}

OpenAiServer::OpenAiServer(Runtime& runtime, std::shared_ptr<const Model> model,
                           ServerOptions options)
    : impl_(std::make_unique<Impl>(runtime, std::move(model), std::move(options))) {}

OpenAiServer::~OpenAiServer() {
    stop();
}

int OpenAiServer::bind() {
    Impl& s = *impl_;
    s.port = s.front->bind(s.o.host, s.o.port);
    return s.port;
}

void OpenAiServer::serve() {
    impl_->http.serving(impl_->front->listening_socket());
    impl_->front->serve();
}

void OpenAiServer::start() {
    bind();
    serve();
}

void OpenAiServer::stop() {
    if (!impl_) return;
    // No new work, the waiting requests refused, the running ones cancelled
    // (their replies end with an error), then the listener closed.
    impl_->admission.close();
    impl_->live.cancel_all();
    impl_->front->stop();
}

int OpenAiServer::bound_port() const {
    return impl_->port;
}

const std::string& OpenAiServer::chat_unavailable_reason() const {
    return impl_->chat_unavailable;
}

}  // namespace dwell::server
