// A bounded load client for `dwell serve`: C clients, each sending R
// requests one after another to /v1/completions (or /v1/chat/completions),
// over loopback. Prints one JSON object: how many succeeded, how many got
// 503, any other outcome (which should be none), and latency percentiles.
//
// With --slow N, N more sockets trickle request heads meanwhile, one byte
// per socket every 500 ms, each from its own loopback address (127.0.0.2,
// ...: distinct peers) where the machine allows; one the server cuts (its
// request deadline) is opened again. /health is probed every 100 ms
// throughout; a probe that fails or takes over 5 s counts as a failure.
// The clients start a second after the tricklers, and tricklers and probes
// go on for at least --hold seconds in all.
//
//   dwell-serve-load --port P [--clients 16] [--requests 20] [--max-tokens 32] [--chat]
//                    [--slow N] [--hold SECONDS]
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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

// A socket sending a request head that never ends, a byte at a time.
class Trickler {
public:
    Trickler(int port, int index) : port_(port), index_(index) { open(); }
    ~Trickler() { close_socket(); }
    Trickler(const Trickler&) = delete;
    Trickler& operator=(const Trickler&) = delete;

    bool distinct() const { return distinct_; }
    // One more byte; false when the server had closed the socket (it is
    // opened again).
    bool step() {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) {  // answered (408) or closed: cut
            close_socket();
            open();
            return false;
        }
        static const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ";
        const char byte = at_ < head.size() ? head[at_] : 'a';
        ++at_;
        (void)!::send(fd_, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        return true;
    }

private:
    void open() {
        at_ = 0;
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_in from{};
        from.sin_family = AF_INET;
        from.sin_addr.s_addr = htonl(0x7f000002u + static_cast<uint32_t>(index_ % 250));
        distinct_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0;
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(static_cast<uint16_t>(port_));
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        (void)::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to);
    }
    void close_socket() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

    int port_, index_;
    int fd_ = -1;
    size_t at_ = 0;
    bool distinct_ = false;
};

}  // namespace

int main(int argc, char** argv) {
    int port = 8080, clients = 16, requests = 20, max_tokens = 32, slow = 0, hold = 0;
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
        else if (a == "--slow")
            slow = next();
        else if (a == "--hold")
            hold = next();
        else {
            std::fprintf(stderr, "dwell-serve-load: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    Totals t;
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<bool> done{false};
    // Trickling sockets and /health probes, until the clients are done.
    int slow_distinct = 0, slow_cut = 0, probes = 0, probe_failures = 0;
    std::vector<double> probe_ms;
    std::vector<std::string> probe_samples;
    std::thread slow_thread, probe_thread;
    if (slow > 0) {
        slow_thread = std::thread([&] {
            std::vector<std::unique_ptr<Trickler>> socks;
            for (int i = 0; i < slow; ++i) {
                socks.push_back(std::make_unique<Trickler>(port, i));
                slow_distinct += socks.back()->distinct();
            }
            while (!done) {
                for (auto& s : socks) slow_cut += !s->step();
                for (int i = 0; i < 10 && !done; ++i)
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        });
    }
    probe_thread = std::thread([&] {
        while (!done) {
            httplib::Client c("127.0.0.1", port);
            c.set_connection_timeout(5);
            c.set_read_timeout(5);
            const auto start = std::chrono::steady_clock::now();
            const auto res = c.Get("/health");
            const double ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
            ++probes;
            probe_ms.push_back(ms);
            if (!res || res->status != 200) {
                ++probe_failures;
                if (probe_samples.size() < 5)
                    probe_samples.push_back(res ? std::to_string(res->status)
                                                : httplib::to_string(res.error()));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });
    if (slow > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
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
    std::this_thread::sleep_until(t0 + std::chrono::seconds(hold));
    done = true;
    if (slow_thread.joinable()) slow_thread.join();
    probe_thread.join();
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
                                {"latency_ms_max", percentile(t.latency_ms, 1.0)},
                                {"slow_sockets", slow},
                                {"slow_from_own_address", slow_distinct},
                                {"slow_cut_by_server", slow_cut},
                                {"health_probes", probes},
                                {"health_failures", probe_failures},
                                {"health_failure_samples", probe_samples},
                                {"health_ms_p50", percentile(probe_ms, 0.50)},
                                {"health_ms_max", percentile(probe_ms, 1.0)}};
    std::printf("%s\n", out.dump().c_str());
    return t.other == 0 && probe_failures == 0 ? 0 : 1;
}
