#include "openai_server.hpp"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "admission.hpp"
#include "api_keys.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/llm/text_generation.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"
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
    if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
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

bool method_in(const std::string& allow, const std::string& method) {
    size_t at = 0;
    while (at < allow.size()) {
        size_t end = allow.find(", ", at);
        if (end == std::string::npos) end = allow.size();
        if (allow.compare(at, end - at, method) == 0) return true;
        at = end + 2;
    }
    return false;
}

// The methods a route answers ("" for no route), for 405 and OPTIONS.
std::string allowed_methods(const std::string& route) {
    if (route == "/v1/completions" || route == "/v1/chat/completions") return "POST, OPTIONS";
    if (route == "other") return "";
    return "GET, HEAD, OPTIONS";
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
                const std::string& type, const std::string& param = "",
                const std::string& code = "") {
    send_json(res, status, error_body(message, type, param, code));
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

// Runs a reply's writer: its result, or false (httplib closes the connection)
// when it throws, which must not reach httplib's writer loop.
template <typename Write>
bool guarded_write(const std::string& id, Write&& write) {
    try {
        return write();
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
    int32_t cached_tokens = 0;  // of the prompt's, taken from the prefix cache
    double prompt_seconds = 0;
};

}  // namespace

struct OpenAiServer::Impl {
    Impl(Runtime& rt, std::shared_ptr<const Model> m, ServerOptions opts)
        : runtime(rt),
          model(std::move(m)),
          o(std::move(opts)),
          admission(o.parallel, o.max_queue),
          keys(o.api_keys),
          prefix_mode(o.prefix_cache.value_or(o.api_keys.empty() ? PrefixCacheMode::Shared
                                                                 : PrefixCacheMode::PerKey)),
          n_ctx(session_context_size(model->info(), o.n_ctx)),
          max_bytes_per_token(max_text_bytes_per_token(model->tokenizer())) {
        if (o.model_name.empty()) o.model_name = model->path().filename().string();
        const std::string jinja = chat_template_text(model->source().metadata());
        try {
            if (o.chat_template.empty() &&
                jinja.find_first_not_of(" \t\r\n") == std::string::npos) {
                spdlog::warn(
                    "the model has no chat template (tokenizer.chat_template): "
                    "/v1/chat/completions formats conversations as chatml; choose another with "
                    "--chat-template");
                chat.emplace(model->tokenizer(), ChatTemplate::named("chatml"));
            } else {
                chat.emplace(model->tokenizer(), ChatTemplate::choose(o.chat_template, jinja));
            }
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
    bool write_stream(Job& job, httplib::DataSink& sink);
    bool write_whole(Job& job, httplib::DataSink& sink);
    bool finished(const Job& job, const TextResult& r);
    // CORS headers and OPTIONS, 405, then the API key; true when answered.
    bool pre_route(const httplib::Request& req, httplib::Response& res);
    SessionOptions session_options(const httplib::Request& req) const;

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
    ApiKeys keys;
    PrefixCacheMode prefix_mode;
    int32_t n_ctx;               // every request's session
    size_t max_bytes_per_token;  // 0: prompts are not refused by length before tokenizing
    int port = -1;
};

bool OpenAiServer::Impl::pre_route(const httplib::Request& req, httplib::Response& res) {
    const std::string route = known_route(req.path);
    const std::string origin = req.get_header_value("Origin");
    bool cors = false;
    for (const std::string& allowed : o.cors_origins)
        cors = cors || (!origin.empty() && (allowed == "*" || allowed == origin));
    if (cors) {
        const bool any =
            std::find(o.cors_origins.begin(), o.cors_origins.end(), "*") != o.cors_origins.end();
        res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
        if (!any) res.set_header("Vary", "Origin");
        res.set_header("Access-Control-Expose-Headers", "Retry-After");
    }
    const std::string allow = allowed_methods(route);
    if (req.method == "OPTIONS" && !allow.empty()) {
        // A preflight carries no credentials: answered before the key check.
        res.status = 204;
        res.set_header("Allow", allow);
        if (cors) {
            res.set_header("Access-Control-Allow-Methods", allow);
            res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
            res.set_header("Access-Control-Max-Age", "600");
        }
        metrics.request(route, 204);
        return true;
    }
    if (!allow.empty() && !method_in(allow, req.method)) {
        res.set_header("Allow", allow);
        send_error(res, 405,
                   // The route's name, not the path: the path may be any bytes.
                   req.method + " is not allowed on " + route + " (allowed: " + allow + ")",
                   "invalid_request_error", "", "method_not_allowed");
        metrics.request(route, 405);
        return true;
    }
    if (keys.empty() || req.path == "/health") return false;
    if (keys.match_authorization(req.get_header_value("Authorization"))) return false;
    res.set_header("WWW-Authenticate", "Bearer realm=\"dwell\"");
    send_error(res, 401, "a valid API key is required (Authorization: Bearer KEY)",
               "invalid_request_error", "", "invalid_api_key");
    metrics.request(route, 401);
    return true;
}

SessionOptions OpenAiServer::Impl::session_options(const httplib::Request& req) const {
    SessionOptions so;
    so.n_ctx = n_ctx;
    switch (prefix_mode) {
        case PrefixCacheMode::Shared:
            break;
        case PrefixCacheMode::PerKey:
            // The key's index (pre_route let only known keys in): one scope
            // per key, none derived from the key itself.
            if (const auto k = keys.match_authorization(req.get_header_value("Authorization")))
                so.prefix_scope = *k + 1;
            break;
        case PrefixCacheMode::Off:
            so.prefix_cache = false;
            break;
    }
    return so;
}

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
        return pre_route(req, res) ? httplib::Server::HandlerResponse::Handled
                                   : httplib::Server::HandlerResponse::Unhandled;
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
    const json model_object = {
        {"id", o.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "dwell"}};
    http.Get("/v1/models", [this, model_object](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, {{"object", "list"}, {"data", json::array({model_object})}});
        metrics.request("/v1/models", 200);
    });
    http.Get(R"(/v1/models/(.+))", [this, model_object](const httplib::Request& req,
                                                        httplib::Response& res) {
        if (req.matches[1] == o.model_name) {
            send_json(res, 200, model_object);
            metrics.request("/v1/models/{id}", 200);
            return;
        }
        // The id asked for is not echoed: it may be any bytes.
        send_error(res, 404, "no model of that id: this server has '" + o.model_name + "' only",
                   "invalid_request_error", "model", "model_not_found");
        metrics.request("/v1/models/{id}", 404);
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
    const std::string prompt_param = chat_api ? "messages" : "prompt";
    const auto too_long = [&](const std::string& what) {
        return RequestError(400,
                            what + "; the context holds " + std::to_string(n_ctx) +
                                " tokens, one of them for the reply (shorten the " + prompt_param +
                                ")",
                            prompt_param, "invalid_request_error", "context_length_exceeded");
    };
    auto job = std::make_shared<Job>();
    try {
        job->request = parse_completion_body(req.body, chat_api, o.max_tokens_limit);
        if (chat_api && !chat) throw RequestError(400, chat_unavailable, "messages");
        // What is refused by the request alone is refused before it waits
        // for a place: control texts, and a prompt too long by its bytes.
        std::string text;
        if (chat_api) {
            const CompletionRequest& r = job->request;
            if (const auto hit = chat->find_control_text(r.messages, r.tools)) {
                const bool in_tools = hit->message == ChatPrompt::ControlText::kTools;
                const std::string p =
                    in_tools ? "tools"
                             : "messages[" + std::to_string(hit->message) + "]." + hit->field;
                throw RequestError(400,
                                   "'" + p + "' contains the chat template's control text '" +
                                       hit->text + "', which may not appear in " +
                                       (in_tools ? "the tools" : "a message"),
                                   p);
            }
            try {
                text = chat->chat_template().render(r.messages, true, r.tools);
            } catch (const Error& e) {
                if (e.status() != DWELL_ERR_INVALID_ARGUMENT) throw;
                // The template's refusal, named by the field the client can
                // change: the tools where a by-pattern format has no place
                // for them.
                const bool tools = !r.tools.empty() && !chat->chat_template().runs_jinja();
                throw RequestError(400, e.what(), tools ? "tools" : "messages");
            }
        } else {
            text = std::move(job->request.prompt);
        }
        const Tokenizer& tok = model->tokenizer();
        if (const int64_t at_least =
                min_prompt_tokens(text.size(), max_bytes_per_token, tok.wants_bos());
            at_least >= n_ctx)
            throw too_long("the prompt is " + std::to_string(text.size()) + " bytes, at least " +
                           std::to_string(at_least) + " tokens");
        if (chat_api) job->text.stop_tokens = chat->stop_tokens();
        job->text.stop = job->request.stop;
        SamplerParams& sp = job->text.sampling;
        sp.temperature = job->request.temperature;
        sp.top_p = job->request.top_p;
        sp.top_k = 0;
        sp.min_p = 0;
        sp.seed = job->request.seed ? *job->request.seed : std::random_device{}();
        (void)Sampler(sp);  // its checks, before the 200

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

        // Tokenized only once admitted: at most `parallel` prompts' tokens
        // are in memory at once.
        job->text.prompt = chat_api ? chat->encode(job->request.messages, true, job->request.tools)
                                    : tok.encode(text, true);
        text = {};
        const auto prompt_size = static_cast<int32_t>(job->text.prompt.size());
        if (prompt_size >= n_ctx)
            throw too_long("the prompt is " + std::to_string(prompt_size) + " tokens");
        job->session = std::make_unique<Session>(runtime, model, session_options(req));
        job->registration = std::make_unique<LiveRegistration>(live, job->session.get());
        const int32_t room = job->session->n_ctx() - prompt_size;
        job->text.max_tokens = std::min(
            job->request.max_tokens > 0 ? job->request.max_tokens : o.default_max_tokens, room);
        // The prompt runs, and the KV pages of the whole reply are taken,
        // before the reply starts: running out of memory is a 503 then, not
        // a reply broken off.
        const auto t0 = Clock::now();
        job->session->decode(job->text.prompt);
        job->session->reserve(job->text.max_tokens);
        job->prompt_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        job->prompt_tokens = prompt_size;
        job->cached_tokens = static_cast<int32_t>(job->session->n_cached_tokens());
        job->text.prompt.clear();
        job->text.deadline = Clock::now() + std::chrono::seconds(o.request_seconds);
    } catch (const RequestError& e) {
        send_error(res, e.status(), e.what(), e.type(), e.param(), e.code());
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
    // A provider returning false closes the connection without the last
    // chunk: what the client has is no complete reply.
    if (job->request.stream) {
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream", [this, job](size_t, httplib::DataSink& sink) {
                return guarded_write(job->id, [&] { return write_stream(*job, sink); });
            });
    } else {
        // With a charset the type is not on httplib's compressible list: the
        // reply (and the probe spaces) reach the socket as written.
        res.set_chunked_content_provider(
            "application/json; charset=utf-8", [this, job](size_t, httplib::DataSink& sink) {
                return guarded_write(job->id, [&] { return write_whole(*job, sink); });
            });
    }
}

json usage(const Job& job, const TextResult& r) {
    return {{"prompt_tokens", job.prompt_tokens},
            {"completion_tokens", r.completion_tokens},
            {"total_tokens", job.prompt_tokens + r.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", job.cached_tokens}}}};
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
            {"usage", usage(job, r)}};
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

bool OpenAiServer::Impl::write_whole(Job& job, httplib::DataSink& sink) {
    // A space now and then (JSON allows leading whitespace) finds out
    // whether the client is still there while a long reply is generated.
    int deltas = 0;
    TextResult r;
    try {
        r = generate_text(*job.session, job.text, [&](std::string_view) {
            return ++deltas % 64 != 0 || sink.write(" ", 1);
        });
    } catch (const std::exception& e) {
        // The 200 is out: an error body would read as a reply. The
        // connection closes without the last chunk instead, which every
        // HTTP client reports as a failed request. (An exception out of a
        // content provider would end the process.)
        spdlog::error("{}: the reply failed after its 200 was sent, connection closed: {}", job.id,
                      e.what());
        return false;
    }
    if (!finished(job, r)) return false;
    const std::string body = json_text(final_body(job, r)) + "\n";
    sink.write(body.data(), body.size());
    sink.done();
    return true;
}

bool OpenAiServer::Impl::write_stream(Job& job, httplib::DataSink& sink) {
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
        return false;
    TextResult r;
    try {
        r = generate_text(*job.session, job.text, [&](std::string_view delta) {
            const json d =
                chat_api ? json{{"content", std::string(delta)}} : json(std::string(delta));
            return send_event(sink, json_text(chunk(d, nullptr)));
        });
    } catch (const std::exception& e) {
        // An error event and no [DONE]: OpenAI's clients raise on an event
        // holding "error", and a stream without [DONE] did not complete.
        spdlog::error("{}: the streamed reply failed: {}", job.id, e.what());
        send_event(sink, json_text(error_body(e.what(), "server_error")));
        sink.done();
        return true;
    }
    if (!finished(job, r)) return false;
    const char* finish = r.finish == FinishReason::Stop ? "stop" : "length";
    send_event(sink, json_text(chunk(chat_api ? json::object() : json(""), finish)));
    if (job.request.include_usage) {
        json usage = chunk(json::object(), nullptr);
        usage["choices"] = json::array();
        usage["usage"] = dwell::server::usage(job, r);
        send_event(sink, json_text(usage));
    }
    const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    sink.done();
    return true;
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
