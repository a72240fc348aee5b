// `dwell serve`: the OpenAI-compatible HTTP server (hosts/server) over one
// model, until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "cli_common.hpp"
#include "dwell/core/model.hpp"
#include "openai_server.hpp"

namespace dwell::cli {

int serve_command(const std::vector<std::string>& args) {
    CommonArgs common;
    std::string model_path;
    server::ServerOptions so;
    po::options_description desc("dwell serve");
    // clang-format off
    desc.add_options()
        ("model,m", po::value(&model_path)->required(), "model file (GGUF or dwell pack)")
        ("host", po::value(&so.host)->default_value(so.host), "address to listen on (0.0.0.0: every interface)")
        ("port", po::value(&so.port)->default_value(so.port), "TCP port (0: any free one, printed)")
        ("api-key", po::value(&so.api_key), "require 'Authorization: Bearer KEY' (also $DWELL_API_KEY)")
        ("parallel", po::value(&so.parallel)->default_value(so.parallel), "requests generating at once")
        ("max-queue", po::value(&so.max_queue)->default_value(so.max_queue), "requests waiting beyond those; more get 503")
        ("max-tokens-limit", po::value(&so.max_tokens_limit)->default_value(so.max_tokens_limit), "the largest max_tokens a request may ask")
        ("default-max-tokens", po::value(&so.default_max_tokens)->default_value(so.default_max_tokens), "max_tokens when a request gives none")
        ("request-seconds", po::value(&so.request_seconds)->default_value(so.request_seconds), "a reply generating longer ends with finish_reason length")
        ("max-body-kb", po::value<size_t>()->default_value(1024), "largest request body in KiB (larger: 413)")
        ("ctx,c", po::value(&so.n_ctx)->default_value(0), "context size of each request's session (0: the model's)")
        ("chat-template", po::value(&so.chat_template), "chat template family instead of the model's (llama2, llama3, chatml, mistral, mistral-v3, gemma, phi3, zephyr)")
        ("model-name", po::value(&so.model_name), "model id in /v1/models (default: the file name)");
    // clang-format on
    add_runtime_options(desc, common);
    po::variables_map vm;
    if (!parse("serve", "-m MODEL [--host H] [--port P] [--api-key KEY] [options]", desc, args, vm))
        return 0;
    set_verbosity(common.verbosity);
    so.max_body_bytes = vm["max-body-kb"].as<size_t>() * 1024;
    if (so.api_key.empty())
        if (const char* env = std::getenv("DWELL_API_KEY")) so.api_key = env;
    if (so.parallel < 1 || so.parallel > 256)
        throw po::error("--parallel " + std::to_string(so.parallel) + " is out of range (1..256)");
    if (so.max_queue < 0 || so.max_queue > 4096)
        throw po::error("--max-queue " + std::to_string(so.max_queue) +
                        " is out of range (0..4096)");
    if (so.max_tokens_limit < 1 || so.default_max_tokens < 1 || so.request_seconds < 1)
        throw po::error(
            "--max-tokens-limit, --default-max-tokens and --request-seconds must be >= 1");

    // SIGINT/SIGTERM go to one thread that stops the server; blocked here
    // first so that no server thread receives them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    Runtime runtime(runtime_options(common));
    auto model = Model::load(runtime, model_path);
    server::OpenAiServer server(runtime, model, so);
    const int port = server.bind();
    std::cerr << "dwell serve: " << so.host << ":" << port << " (model "
              << model->path().filename().string() << ", " << so.parallel << " at once, "
              << so.max_queue << " queued" << (so.api_key.empty() ? "" : ", API key required")
              << ")\n";
    if (!server.chat_unavailable_reason().empty())
        std::cerr << "dwell serve: /v1/chat/completions disabled: "
                  << server.chat_unavailable_reason() << "\n";
    std::cerr.flush();
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
    return 0;
}

}  // namespace dwell::cli
