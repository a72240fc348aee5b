// A bounded load client for `dwell serve`: C clients, each sending R
// requests one after another to /v1/completions (or /v1/chat/completions),
// over loopback. Prints one JSON object: how many succeeded, how many got
// 503, any other outcome (which should be none), and latency percentiles.
//
//   dwell-serve-load --port P [--clients 16] [--requests 20] [--max-tokens 32] [--chat]
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Totals {
    std::mutex mutex;
    std::vector<double> latency_ms;  // successful requests
    int ok = 0, busy = 0, other = 0;
    std::vector<std::string> other_samples;
};

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t i =
        std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
    return v[i];
}

}  // namespace

int main(int argc, char** argv) {
    int port = 8080, clients = 16, requests = 20, max_tokens = 32;
    bool chat = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
        if (a == "--port")
            port = next();
        else if (a == "--clients")
            clients = next();
        else if (a == "--requests")
            requests = next();
        else if (a == "--max-tokens")
            max_tokens = next();
        else if (a == "--chat")
            chat = true;
        else {
            std::fprintf(stderr, "dwell-serve-load: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    Totals t;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&, c] {
            httplib::Client client("127.0.0.1", port);
            client.set_read_timeout(300);
            for (int r = 0; r < requests; ++r) {
                // Shared openings: later requests adopt the cached prefix pages.
                const std::string text = "Once upon a time, in a village by the sea, child " +
                                         std::to_string(c) + " asked question " + std::to_string(r);
                nlohmann::json body = {
                    {"max_tokens", max_tokens}, {"temperature", 0.7}, {"seed", c * 1000 + r}};
                if (chat) {
                    body["messages"] = {{{"role", "user"}, {"content", text}}};
                } else {
                    body["prompt"] = text;
                }
                const auto start = std::chrono::steady_clock::now();
                const auto res = client.Post(chat ? "/v1/chat/completions" : "/v1/completions",
                                             body.dump(), "application/json");
                const double ms = std::chrono::duration<double, std::milli>(
                                      std::chrono::steady_clock::now() - start)
                                      .count();
                std::lock_guard lock(t.mutex);
                if (res && res->status == 200) {
                    ++t.ok;
                    t.latency_ms.push_back(ms);
                } else if (res && res->status == 503) {
                    ++t.busy;
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                } else {
                    ++t.other;
                    if (t.other_samples.size() < 5)
                        t.other_samples.push_back(res ? std::to_string(res->status) + " " +
                                                            res->body
                                                      : httplib::to_string(res.error()));
                }
            }
        });
    }
    for (auto& th : threads) th.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const nlohmann::json out = {{"clients", clients},
                                {"requests_per_client", requests},
                                {"max_tokens", max_tokens},
                                {"ok", t.ok},
                                {"busy_503", t.busy},
                                {"other", t.other},
                                {"other_samples", t.other_samples},
                                {"seconds", seconds},
                                {"latency_ms_p50", percentile(t.latency_ms, 0.50)},
                                {"latency_ms_p95", percentile(t.latency_ms, 0.95)},
                                {"latency_ms_max", percentile(t.latency_ms, 1.0)}};
    std::printf("%s\n", out.dump().c_str());
    return t.other == 0 ? 0 : 1;
}
