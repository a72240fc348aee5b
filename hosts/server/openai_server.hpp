// `dwell serve`: an OpenAI-compatible HTTP API over one model —
// GET /v1/models and /v1/models/{id}, POST /v1/completions and
// /v1/chat/completions (streamed as server-sent events with stream: true),
// GET /health, GET /metrics; CORS for the origins configured.
//
// Each request gets its own session (prompt prefixes are shared through
// the runtime's paged KV cache, within one API key by default). At most
// `parallel` requests generate at once and `max_queue` more wait; beyond
// that: 503 with Retry-After. A prompt is tokenized only once admitted, and
// one that cannot fit the context by its length alone is refused before.
// Everything that can fail before the first token (the prompt, the KV
// memory of the whole reply) is checked before the 200; a reply that fails
// later ends as an error: a streamed one with an error event and no
// [DONE], a whole one with its connection closed before the body ends. A
// client that goes away cancels its generation. Requests are read whole
// before a thread works on them, under a deadline and per-peer caps
// (http_front.hpp); no byte a client sends can crash it.
//
// Thread-safety: start() blocks serving until stop() (from another thread
// or a signal handler's thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dwell/core/text/chat_prompt.hpp"

namespace dwell {
class Model;
class Runtime;
}  // namespace dwell

namespace dwell::server {

// Who shares the runtime's prefix cache (a prompt whose start another
// request computed answers faster, which a client can time).
enum class PrefixCacheMode {
    Shared,  // every request
    PerKey,  // requests with the same API key
    Off,
};

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                    // 0: any free port (see bound_port())
    std::vector<std::string> api_keys;  // non-empty: requests need "Authorization: Bearer KEY"
    // Origins a browser may call from ("*": any); empty: no CORS headers.
    std::vector<std::string> cors_origins;
    // Default: PerKey with API keys, Shared without.
    std::optional<PrefixCacheMode> prefix_cache;
    int32_t parallel = 2;             // requests generating at once
    int32_t max_queue = 16;           // more requests waiting for a place
    size_t max_body_bytes = 1 << 20;  // larger bodies: 413
    int32_t max_tokens_limit = 4096;  // the largest max_tokens a request may ask
    int32_t default_max_tokens = 256;
    int32_t request_seconds = 300;  // a generation running longer ends ("length")
    int32_t n_ctx = 0;              // sessions' context (0: the model's)
    std::string chat_template;      // override of the model's template
    std::string model_name;         // id in /v1/models (default: the file name)
    // Slow clients (http_front.hpp): a request's head and body must arrive
    // within request_read_seconds (else 408); connections beyond
    // max_connections in all, or max_connections_per_peer from one
    // address, get 503.
    int32_t request_read_seconds = 20;
    int32_t max_connections = 512;
    int32_t max_connections_per_peer = 64;
};

class OpenAiServer {
public:
    OpenAiServer(Runtime& runtime, std::shared_ptr<const Model> model, ServerOptions options);
    ~OpenAiServer();
    OpenAiServer(const OpenAiServer&) = delete;
    OpenAiServer& operator=(const OpenAiServer&) = delete;

    // Binds and serves until stop(). Throws naming the address when it
    // cannot bind.
    void start();
    // Binds only (then serve() runs the loop): for tests that need the port first.
    int bind();
    void serve();
    void stop();
    int bound_port() const;

    // Why /v1/chat/completions is refused (no usable template), or "".
    const std::string& chat_unavailable_reason() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dwell::server
