// `dwell serve`: the OpenAI-compatible HTTP server (hosts/server) over one
// model, until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "api_keys.hpp"
#include "cli_common.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/session/session_file.hpp"
#include "dwell/core/text/chat_template.hpp"
#include "dwell/tools/progress_bar.hpp"
#include "openai_server.hpp"

namespace dwell::cli {
namespace {

constexpr int64_t kMaxBodyKb = int64_t{1} << 20;  // 1 GiB

// Every request's full context must fit what the KV page space and the
// memory budget leave once the model is loaded; otherwise the longest
// requests would all fail.
void check_context_fits(Runtime& runtime, const std::shared_ptr<Model>& model, int32_t n_ctx) {
    SessionOptions so;
    so.n_ctx = n_ctx;
    std::optional<Session> probe_session;
    try {
        probe_session.emplace(runtime, model, so);  // pages are taken on first use only
    } catch (const Error& e) {
        throw po::error("--ctx " + std::to_string(n_ctx) + ": " + e.what());
    }
    const Session& probe = *probe_session;
    const KvCache& kv = probe.kv_cache();
    const int64_t rpp = kv.rows_per_page();
    const int64_t pages = (probe.n_ctx() + rpp - 1) / rpp * kv.n_layer() * 2;
    const KvPagePool& space = runtime.kv_pages();
    const uint64_t bytes = static_cast<uint64_t>(pages) * space.page_bytes();
    const PoolStats st = runtime.pool().stats();
    const auto mib = [](uint64_t b) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(b) / (1 << 20));
        return std::string(buf);
    };
    const std::string what = "--ctx " + std::to_string(probe.n_ctx()) +
                             ": one request's KV cache at full context takes " + mib(bytes) +
                             " MiB, more than ";
    if (pages > int64_t{space.capacity()} - space.pages_in_use())
        throw po::error(what + "the KV page space holds (" +
                        mib(uint64_t(space.capacity()) * space.page_bytes()) +
                        " MiB); lower --ctx");
    if (st.budget_bytes != 0 && st.used_bytes + bytes > st.budget_bytes)
        throw po::error(what + "the memory budget leaves after the model (" +
                        mib(st.budget_bytes - std::min(st.budget_bytes, st.used_bytes)) + " of " +
                        mib(st.budget_bytes) + " MiB); lower --ctx or raise --memory-budget");
}

// The options of `dwell serve`.
struct ServeArgs {
    CommonArgs common;
    std::string model_path;
    server::ServerOptions so;
};

// --port and --ctx in range, --chat-template a family there is.
void check_port_ctx_and_template(const server::ServerOptions& so) {
    if (so.port < 0 || so.port > 65535)
        throw po::error("--port " + std::to_string(so.port) + " is out of range (0..65535)");
    if (so.n_ctx < 0 || so.n_ctx > kSessionMaxContext)
        throw po::error("--ctx " + std::to_string(so.n_ctx) + " is out of range (1.." +
                        std::to_string(kSessionMaxContext) + ", or 0 for the model's)");
    if (!so.chat_template.empty()) {
        try {
            (void)ChatTemplate::named(so.chat_template);
        } catch (const Error& e) {
            throw po::error(std::string("--chat-template: ") + e.what());
        }
    }
}

size_t max_body_bytes(const po::variables_map& vm) {
    const int64_t body_kb = vm["max-body-kb"].as<int64_t>();
    if (body_kb < 1 || body_kb > kMaxBodyKb)
        throw po::error("--max-body-kb " + std::to_string(body_kb) + " is out of range (1.." +
                        std::to_string(kMaxBodyKb) + ")");
    return static_cast<size_t>(body_kb) * 1024;
}

// The API keys: --api-key, then --api-key-file; $DWELL_API_KEY when
// neither gives one. Each must be a well-formed key.
std::vector<std::string> api_keys(const po::variables_map& vm) {
    std::vector<std::string> key_values;
    if (vm.count("api-key")) key_values = vm["api-key"].as<std::vector<std::string>>();
    std::vector<std::string> keys = server::split_keys(key_values);
    if (vm.count("api-key") && keys.empty()) throw po::error("--api-key is empty");
    if (vm.count("api-key-file")) {
        const std::string path = vm["api-key-file"].as<std::string>();
        try {
            for (std::string& k : server::read_key_file(path)) keys.push_back(std::move(k));
        } catch (const std::runtime_error& e) {
            throw po::error(std::string("--api-key-file ") + e.what());
        }
    }
    if (keys.empty())
        if (const char* env = std::getenv("DWELL_API_KEY")) keys = server::split_keys({env});
    for (const std::string& k : keys) {
        try {
            server::check_key(k);
        } catch (const std::invalid_argument& e) {
            throw po::error(std::string("--api-key (or $DWELL_API_KEY): ") + e.what());
        }
    }
    return keys;
}

// --cors and --prefix-cache (per-key needs the API keys, read before).
void apply_cors_and_prefix_cache(const po::variables_map& vm, server::ServerOptions& so) {
    if (vm.count("cors")) {
        so.cors_origins = server::split_keys(vm["cors"].as<std::vector<std::string>>());
        if (so.cors_origins.empty()) throw po::error("--cors is empty (ORIGIN[,ORIGIN] or *)");
    }
    if (vm.count("prefix-cache")) {
        const std::string mode = vm["prefix-cache"].as<std::string>();
        if (mode == "shared") {
            so.prefix_cache = server::PrefixCacheMode::Shared;
        } else if (mode == "per-key") {
            if (so.api_keys.empty())
                throw po::error("--prefix-cache per-key needs API keys (--api-key)");
            so.prefix_cache = server::PrefixCacheMode::PerKey;
        } else if (mode == "off") {
            so.prefix_cache = server::PrefixCacheMode::Off;
        } else {
            throw po::error("--prefix-cache '" + mode + "' is not shared, per-key or off");
        }
    }
}

// The queue, connection and generation limits in range.
void check_limits(const server::ServerOptions& so) {
    if (so.parallel < 1 || so.parallel > 256)
        throw po::error("--parallel " + std::to_string(so.parallel) + " is out of range (1..256)");
    if (so.max_queue < 0 || so.max_queue > 4096)
        throw po::error("--max-queue " + std::to_string(so.max_queue) +
                        " is out of range (0..4096)");
    if (so.request_read_seconds < 1 || so.request_read_seconds > 3600)
        throw po::error("--read-seconds " + std::to_string(so.request_read_seconds) +
                        " is out of range (1..3600)");
    if (so.max_connections < 1 || so.max_connections > 65536)
        throw po::error("--max-connections " + std::to_string(so.max_connections) +
                        " is out of range (1..65536)");
    if (so.max_connections_per_peer < 1 || so.max_connections_per_peer > so.max_connections)
        throw po::error("--max-connections-per-peer " +
                        std::to_string(so.max_connections_per_peer) + " is out of range (1.." +
                        std::to_string(so.max_connections) + ", --max-connections)");
    if (so.max_tokens_limit < 1 || so.default_max_tokens < 1 || so.request_seconds < 1)
        throw po::error(
            "--max-tokens-limit, --default-max-tokens and --request-seconds must be >= 1");
    if (so.default_max_tokens > so.max_tokens_limit)
        throw po::error("--default-max-tokens " + std::to_string(so.default_max_tokens) +
                        " is above --max-tokens-limit " + std::to_string(so.max_tokens_limit));
}

// Parses the options and checks every pure value, before the model loads
// (po::error naming the flag); nullopt when --help was printed.
std::optional<ServeArgs> parse_serve_args(const std::vector<std::string>& args) {
    ServeArgs a;
    server::ServerOptions& so = a.so;
    po::options_description desc("dwell serve");
    // clang-format off
    desc.add_options()
        ("model,m", po::value(&a.model_path)->required(), "model file (GGUF or dwell pack)")
        ("host", po::value(&so.host)->default_value(so.host), "address to listen on (0.0.0.0: every interface)")
        ("port", po::value(&so.port)->default_value(so.port), "TCP port (0: any free one, printed)")
        ("api-key", po::value<std::vector<std::string>>()->composing(), "require 'Authorization: Bearer KEY' with one of these keys (repeat, or KEY,KEY; also $DWELL_API_KEY)")
        ("api-key-file", po::value<std::string>(), "keys, one a line, accepted like --api-key")
        ("prefix-cache", po::value<std::string>(), "who shares cached prompt prefixes: shared, per-key (the default with API keys) or off")
        ("cors", po::value<std::vector<std::string>>()->composing(), "origins browsers may call from (ORIGIN[,ORIGIN], * for any); default: none")
        ("parallel", po::value(&so.parallel)->default_value(so.parallel), "requests generating at once")
        ("max-queue", po::value(&so.max_queue)->default_value(so.max_queue), "requests waiting beyond those; more get 503")
        ("max-tokens-limit", po::value(&so.max_tokens_limit)->default_value(so.max_tokens_limit), "the largest max_tokens a request may ask")
        ("default-max-tokens", po::value(&so.default_max_tokens)->default_value(so.default_max_tokens), "max_tokens when a request gives none")
        ("request-seconds", po::value(&so.request_seconds)->default_value(so.request_seconds), "a reply generating longer ends with finish_reason length")
        ("max-body-kb", po::value<int64_t>()->default_value(1024), "largest request body in KiB (larger: 413)")
        ("read-seconds", po::value(&so.request_read_seconds)->default_value(so.request_read_seconds), "a request's head and body must arrive within this (else 408)")
        ("max-connections", po::value(&so.max_connections)->default_value(so.max_connections), "open connections in all; more get 503")
        ("max-connections-per-peer", po::value(&so.max_connections_per_peer)->default_value(so.max_connections_per_peer), "open connections from one address; more get 503")
        ("ctx,c", po::value(&so.n_ctx)->default_value(0), "context size of each request's session (0: the model's)")
        ("chat-template", po::value(&so.chat_template), "chat template family instead of the model's (llama2, llama3, chatml, mistral, mistral-v3, gemma, phi3, zephyr; a model without one gets chatml)")
        ("model-name", po::value(&so.model_name), "model id in /v1/models (default: the file name)");
    // clang-format on
    add_runtime_options(desc, a.common);
    po::variables_map vm;
    if (!parse("serve", "-m MODEL [--host H] [--port P] [--api-key KEY] [options]", desc, args, vm))
        return std::nullopt;
    set_verbosity(a.common.verbosity);
    check_port_ctx_and_template(so);
    so.max_body_bytes = max_body_bytes(vm);
    so.api_keys = api_keys(vm);
    apply_cors_and_prefix_cache(vm, so);
    check_limits(so);
    return a;
}

// SIGINT and SIGTERM, blocked in the calling thread and so in every thread
// it starts after.
sigset_t block_stop_signals() {
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    return stop_signals;
}

void print_listening(const server::ServerOptions& so, int port, const Model& model,
                     const server::OpenAiServer& server) {
    std::cerr << "dwell serve: " << so.host << ":" << port << " (model "
              << model.path().filename().string() << ", " << so.parallel << " at once, "
              << so.max_queue << " queued"
              << (so.api_keys.empty()
                      ? ""
                      : ", " + std::to_string(so.api_keys.size()) + " API key(s) required")
              << ")\n";
    if (!server.chat_unavailable_reason().empty())
        std::cerr << "dwell serve: /v1/chat/completions disabled: "
                  << server.chat_unavailable_reason() << "\n";
    std::cerr.flush();
}

// Serves until the first stop signal stops the server; a second one quits
// at once.
void serve_until_stopped(server::OpenAiServer& server, const sigset_t& stop_signals) {
    std::atomic<bool> finished{false};
    std::thread stopper([&] {
        int sig = 0;
        sigwait(&stop_signals, &sig);
        if (finished) return;
        std::cerr << "dwell serve: stopping (again to quit at once)\n";
        server.stop();
        sigwait(&stop_signals, &sig);
        if (!finished) std::_Exit(128 + sig);
    });
    server.serve();
    finished = true;
    // Wake the stopper, whether it waits for a first or a second signal.
    pthread_kill(stopper.native_handle(), SIGTERM);
    stopper.join();
}

}  // namespace

int serve_command(const std::vector<std::string>& args) {
    std::optional<ServeArgs> parsed = parse_serve_args(args);
    if (!parsed) return 0;
    const server::ServerOptions& so = parsed->so;
    // SIGINT/SIGTERM go to one thread that stops the server; blocked here
    // first so that no server thread receives them.
    const sigset_t stop_signals = block_stop_signals();

    Runtime runtime(runtime_options(parsed->common));
    auto model = Model::load(runtime, parsed->model_path, terminal_load_progress());
    if (runtime.sparsity_thresholds()) {
        // Sessions check the thresholds against the model when they are
        // made: one small session refuses a wrong file first, in its own
        // words (check_context_fits would blame --ctx).
        SessionOptions probe;
        probe.n_ctx = 8;
        probe.prefix_cache = false;
        Session check(runtime, model, probe);
    }
    check_context_fits(runtime, model, so.n_ctx);
    server::OpenAiServer server(runtime, model, so);
    const int port = server.bind();
    print_listening(so, port, *model, server);
    serve_until_stopped(server, stop_signals);
    return 0;
}

}  // namespace dwell::cli
