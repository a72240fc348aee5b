// `dwell serve` against hostile clients on raw loopback sockets: bytes that
// are not UTF-8 (in the path, the body, the model's file name) get a
// well-formed reply, never a crash; the body limit holds for chunked bodies
// too; trickling clients are cut at a deadline for the whole request, a
// peer's connections are capped, and /health answers while 100 sockets
// trickle.
#ifdef DWELL_TEST_HAVE_SERVER  // built without cpp-httplib: no server to test
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "http_front.hpp"
#include "integration_support.hpp"
#include "openai_server.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// One raw TCP connection to the server, from `source` (any 127.x address
// is loopback on Linux: distinct ones act as distinct peers).
class Raw {
public:
    // `rcvbuf`: a small receive window (0: the default), set before the
    // connection so that the window is small from the start.
    explicit Raw(int port, const std::string& source = "", bool wait = true, int rcvbuf = 0) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) return;
        if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        if (!source.empty()) {
            sockaddr_in from{};
            from.sin_family = AF_INET;
            inet_pton(AF_INET, source.c_str(), &from.sin_addr);
            bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0;
        }
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(static_cast<uint16_t>(port));
        inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
        if (!wait) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
        connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
    }
    ~Raw() {
        if (fd_ >= 0) ::close(fd_);
    }
    Raw(const Raw&) = delete;
    Raw& operator=(const Raw&) = delete;

    bool connected() const { return connected_; }
    bool bound() const { return bound_; }
    // The server has answered or closed the connection (within `wait`).
    bool readable(std::chrono::milliseconds wait = 0ms) const {
        pollfd p{fd_, POLLIN, 0};
        return ::poll(&p, 1, static_cast<int>(wait.count())) > 0;
    }
    // False once the server has closed the connection.
    bool send(std::string_view bytes) {
        while (!bytes.empty()) {
            const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            if (n <= 0) return false;
            bytes.remove_prefix(static_cast<size_t>(n));
        }
        return true;
    }
    // The client sends no more (as `nc -N` does after its request).
    void shut_write() { ::shutdown(fd_, SHUT_WR); }
    int fd() const { return fd_; }
    void send_nowait(std::string_view bytes) {
        (void)!::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    // Everything until the server closes the connection, `limit` passes or
    // `enough` bytes came.
    std::string read_until_closed(std::chrono::milliseconds limit, bool* closed = nullptr,
                                  size_t enough = SIZE_MAX) {
        std::string out;
        const auto end = Clock::now() + limit;
        while (out.size() < enough) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
            pollfd p{fd_, POLLIN, 0};
            if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) {
                if (closed) *closed = true;
                return out;
            }
            out.append(buf, static_cast<size_t>(n));
        }
        if (closed) *closed = false;
        return out;
    }

private:
    int fd_ = -1;
    bool connected_ = false;
    bool bound_ = false;
};

struct Reply {
    int status = 0;
    std::string head, body;
};

// A response read to the server's close (the requests send Connection: close).
Reply parse_reply(const std::string& raw) {
    Reply r;
    const size_t end = raw.find("\r\n\r\n");
    if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return r;
    r.status = std::atoi(raw.c_str() + 9);
    r.head = raw.substr(0, end);
    r.body = raw.substr(end + 4);
    if (r.head.find("Transfer-Encoding: chunked") != std::string::npos) {
        std::string plain;
        size_t at = 0;
        while (at < r.body.size()) {
            const size_t eol = r.body.find("\r\n", at);
            if (eol == std::string::npos) break;
            const size_t n = std::stoul(r.body.substr(at, eol - at), nullptr, 16);
            if (n == 0) break;
            plain += r.body.substr(eol + 2, n);
            at = eol + 2 + n + 2;
        }
        r.body = plain;
    }
    return r;
}

bool is_json(const std::string& s) {
    return json::accept(s);
}

class ServerTransport : public ::testing::Test {
protected:
    void start(server::ServerOptions o = {}, std::filesystem::path model = {}) {
        DWELL_REQUIRE_MODEL(path, "stories260K.gguf");
        if (model.empty()) model = path;
        RuntimeOptions ro;
        ro.manifest = dir_.write("cpu.toml", "[[backend]]\nplugin = \"cpu\"\n[cpu]\nthreads = 1\n");
        runtime_ = std::make_unique<Runtime>(ro);
        model_ = Model::load(*runtime_, model);
        o.port = 0;
        o.chat_template = "chatml";
        server_ = std::make_unique<server::OpenAiServer>(*runtime_, model_, o);
        port_ = server_->bind();
        thread_ = std::thread([this] { server_->serve(); });
    }
    void TearDown() override {
        if (server_) server_->stop();
        if (thread_.joinable()) thread_.join();
        server_.reset();
    }
    // One request on a fresh connection, its reply read to the close.
    Reply exchange(const std::string& request, std::chrono::milliseconds limit = 20s) {
        Raw c(port_);
        EXPECT_TRUE(c.connected());
        c.send(request);
        return parse_reply(c.read_until_closed(limit));
    }
    // GET /health on a fresh client; its status (0: no answer within
    // `limit`) and how long it took.
    std::pair<int, double> health(std::chrono::seconds limit = 3s) {
        httplib::Client c("127.0.0.1", port_);
        c.set_connection_timeout(limit);
        c.set_read_timeout(limit);
        const auto t0 = Clock::now();
        const auto r = c.Get("/health");
        return {r ? r->status : 0, std::chrono::duration<double>(Clock::now() - t0).count()};
    }

    // /health from 127.0.0.1 while `connections` from `addresses` addresses
    // (127.0.0.2...) pipeline requests whose replies they never read.
    void health_beside_unread_pipelines(int addresses, int connections) {
        server::ServerOptions o;
        o.parallel = 1;
        o.max_queue = 2;  // 19 workers
        start(o);
        if (IsSkipped()) return;
        // Each reply (a 404 that repeats the 7000-byte target) fills the send
        // buffer more: a worker that writes one to a full buffer blocks.
        const std::string request =
            "GET /" + std::string(7000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n";
        std::string pipeline;
        for (int i = 0; i < 1000; ++i) pipeline += request;
        std::vector<std::unique_ptr<Raw>> hogs;
        std::vector<size_t> sent;
        for (int i = 0; i < connections; ++i) {
            hogs.push_back(std::make_unique<Raw>(port_,
                                                 "127.0.0." + std::to_string(2 + i % addresses),
                                                 /*wait=*/true, /*rcvbuf=*/2048));
            ASSERT_TRUE(hogs.back()->connected());
            if (!hogs.back()->bound()) GTEST_SKIP() << "cannot bind 127.0.0.2... on this machine";
            fcntl(hogs.back()->fd(), F_SETFL, fcntl(hogs.back()->fd(), F_GETFL) | O_NONBLOCK);
            sent.push_back(0);
        }
        std::atomic<bool> done{false};
        std::thread feed([&] {
            while (!done) {
                for (size_t i = 0; i < hogs.size(); ++i) {
                    if (sent[i] >= pipeline.size()) continue;
                    const ssize_t n =
                        ::send(hogs[i]->fd(), pipeline.data() + sent[i], pipeline.size() - sent[i],
                               MSG_NOSIGNAL | MSG_DONTWAIT);
                    if (n > 0) sent[i] += static_cast<size_t>(n);
                }
                std::this_thread::sleep_for(10ms);
            }
        });
        std::this_thread::sleep_for(4s);  // every hog's send buffer has filled
        double worst = 0;
        int answered = 0;
        for (int i = 0; i < 3; ++i) {
            const auto [status, seconds] = health(4s);
            answered += status == 200;
            worst = std::max(worst, seconds);
        }
        done = true;
        feed.join();
        EXPECT_EQ(answered, 3)
            << "/health went unanswered while one peer's unread replies piled up";
        EXPECT_LT(worst, 2.0);
    }

    TempDir dir_;
    std::unique_ptr<Runtime> runtime_;
    std::shared_ptr<Model> model_;
    std::unique_ptr<server::OpenAiServer> server_;
    std::thread thread_;
    int port_ = 0;
};

std::string post_request(const std::string& path, const std::string& body) {
    return "POST " + path +
           " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Chunks of `chunk` bytes, then the last chunk.
std::string chunked(const std::string& body, size_t chunk) {
    std::string out;
    for (size_t at = 0; at < body.size(); at += chunk) {
        const std::string piece = body.substr(at, chunk);
        char size[32];
        std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
        out += size + piece + "\r\n";
    }
    return out + "0\r\n\r\n";
}

TEST_F(ServerTransport, PathsThatAreNotUtf8Get404WithAJsonBody) {
    start();
    if (IsSkipped()) return;
    for (const std::string path : {"/%ff", "/\xff\xfe", "/v1/%c3%28", "/%00x"}) {
        const Reply r =
            exchange("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        EXPECT_EQ(r.status, 404) << path;
        EXPECT_TRUE(is_json(r.body)) << path << ": " << r.body;
    }
    EXPECT_EQ(health().first, 200);  // still up
}

TEST_F(ServerTransport, ABodyThatIsNotUtf8Gets400WithAJsonBody) {
    start();
    if (IsSkipped()) return;
    for (const std::string& body :
         {std::string("{\"prompt\": \"\xff\xfe\", \"max_tokens\": 1}"),
          std::string("{\"prompt\": \"ok\", \"\xc3\x28\": 1}"), std::string("\xff\xff\xff")}) {
        const Reply r = exchange(post_request("/v1/completions", body));
        EXPECT_EQ(r.status, 400) << r.body;
        ASSERT_TRUE(is_json(r.body)) << r.body;
        EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request_error");
    }
    const Reply chat =
        exchange(post_request("/v1/chat/completions",
                              "{\"messages\": [{\"role\": \"user\", \"content\": \"\xe2\x82\"}]}"));
    EXPECT_EQ(chat.status, 400) << chat.body;
    EXPECT_TRUE(is_json(chat.body)) << chat.body;
}

TEST_F(ServerTransport, AModelFileNameThatIsNotUtf8IsServedWithReplacementCharacters) {
    DWELL_REQUIRE_MODEL(path, "stories260K.gguf");
    const auto odd = dir_.path() / "stories\xff.gguf";
    std::filesystem::create_symlink(path, odd);
    start({}, odd);
    if (IsSkipped()) return;
    const std::string id = "stories\xef\xbf\xbd.gguf";  // U+FFFD for the 0xff byte
    const Reply models =
        exchange("GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    ASSERT_EQ(models.status, 200) << models.body;
    EXPECT_EQ(json::parse(models.body)["data"][0]["id"], id);
    const Reply whole =
        exchange(post_request("/v1/completions", R"({"prompt": "Once", "max_tokens": 2})"));
    ASSERT_EQ(whole.status, 200) << whole.body;
    EXPECT_EQ(json::parse(whole.body)["model"], id);
    const Reply streamed = exchange(
        post_request("/v1/completions", R"({"prompt": "Once", "max_tokens": 2, "stream": true})"));
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    const size_t at = streamed.body.find("data: ");
    ASSERT_NE(at, std::string::npos) << streamed.body;
    const json first =
        json::parse(streamed.body.substr(at + 6, streamed.body.find("\n\n") - at - 6));
    EXPECT_EQ(first["model"], id);
}

TEST_F(ServerTransport, TheBodyLimitHoldsForChunkedBodies) {
    server::ServerOptions o;
    o.max_body_bytes = 4096;
    start(o);
    if (IsSkipped()) return;
    const std::string head =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    // Under the limit: decoded and served.
    const std::string small = R"({"prompt": "Once upon a time", "max_tokens": 2})";
    const Reply ok = exchange(head + chunked(small, 7));
    EXPECT_EQ(ok.status, 200) << ok.body;
    EXPECT_TRUE(is_json(ok.body)) << ok.body;
    // Over it: 413, whatever the chunks' sizes.
    const std::string big = "{\"prompt\": \"" + std::string(8000, 'a') + "\", \"max_tokens\": 1}";
    for (size_t piece : {size_t{1000}, size_t{8100}}) {
        const Reply r = exchange(head + chunked(big, piece));
        EXPECT_EQ(r.status, 413) << piece << ": " << r.body;
        EXPECT_TRUE(is_json(r.body)) << r.body;
    }
    // An endless chunked body is refused once past the limit, not read to
    // its end.
    Raw endless(port_);
    ASSERT_TRUE(endless.connected());
    endless.send(head);
    const std::string chunk = "1000\r\n" + std::string(4096, 'a') + "\r\n";
    int sent = 0;
    while (sent < 256 && !endless.readable(sent > 1 ? 50ms : 0ms) && endless.send(chunk)) ++sent;
    const Reply r = parse_reply(endless.read_until_closed(10s));
    EXPECT_EQ(r.status, 413);
    EXPECT_LT(sent, 64) << "the server read on past the limit";
    // A Content-Length far past the limit: 413 at once, the body unread.
    Raw huge(port_);
    huge.send(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n{\"p");
    const auto t0 = Clock::now();
    EXPECT_EQ(parse_reply(huge.read_until_closed(10s)).status, 413);
    EXPECT_LT(Clock::now() - t0, 5s);
}

TEST_F(ServerTransport, HealthAnswersWhileAHundredSocketsTrickle) {
    start();  // the default limits
    if (IsSkipped()) return;
    // 100 peers (127.0.0.2...) each send a request head one byte at a time.
    std::vector<std::unique_ptr<Raw>> slow;
    int bound = 0;
    for (int i = 0; i < 100; ++i) {
        slow.push_back(
            std::make_unique<Raw>(port_, "127.0.0." + std::to_string(2 + i % 200), /*wait=*/false));
        bound += slow.back()->bound();
    }
    // From one address the per-peer cap (64) would refuse the rest, and
    // /health from 127.0.0.1 with them.
    if (bound < 100) GTEST_SKIP() << "cannot bind 127.0.0.2..101 on this machine";
    const std::string head =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "X-Padding: ";
    std::atomic<bool> done{false};
    std::thread trickle([&] {
        for (size_t at = 0; !done; at = (at + 1) % head.size()) {
            for (auto& s : slow) s->send_nowait(head.substr(at, 1));
            std::this_thread::sleep_for(100ms);
        }
    });
    std::this_thread::sleep_for(1s);  // every trickler has connected and started
    double worst = 0;
    int answered = 0;
    for (int i = 0; i < 6; ++i) {
        const auto [status, seconds] = health();
        answered += status == 200;
        worst = std::max(worst, seconds);
        std::this_thread::sleep_for(300ms);
    }
    done = true;
    trickle.join();
    // The server held every trickler meanwhile (none answered or closed).
    int held = 0;
    for (auto& s : slow) held += !s->readable();
    EXPECT_EQ(held, 100);
    EXPECT_EQ(answered, 6) << "/health went unanswered while 100 sockets trickled (" << bound
                           << " of them from their own address)";
    EXPECT_LT(worst, 2.0);
}

TEST_F(ServerTransport, APeersConnectionsAreCapped) {
    server::ServerOptions o;
    o.max_connections_per_peer = 4;
    start(o);
    if (IsSkipped()) return;
    std::vector<std::unique_ptr<Raw>> held;
    for (int i = 0; i < 4; ++i) {
        held.push_back(std::make_unique<Raw>(port_, "127.0.0.2"));
        ASSERT_TRUE(held.back()->connected());
        if (!held.back()->bound()) GTEST_SKIP() << "cannot bind 127.0.0.2 on this machine";
    }
    // Connections are counted once the server took them: give it a moment.
    std::this_thread::sleep_for(300ms);
    Raw fifth(port_, "127.0.0.2");
    ASSERT_TRUE(fifth.connected());
    bool closed = false;
    const Reply refused = parse_reply(fifth.read_until_closed(5s, &closed));
    EXPECT_EQ(refused.status, 503) << refused.head;
    EXPECT_TRUE(closed);
    EXPECT_TRUE(is_json(refused.body)) << refused.body;
    // Another peer is not affected.
    EXPECT_EQ(health().first, 200);
    // A held connection serves requests; once one closes, the peer may
    // connect again.
    held[0]->send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(parse_reply(held[0]->read_until_closed(5s)).status, 200);
    held.erase(held.begin());
    int status = 0;
    for (int i = 0; i < 50 && status != 200; ++i) {
        std::this_thread::sleep_for(50ms);
        Raw again(port_, "127.0.0.2");
        again.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        status = parse_reply(again.read_until_closed(5s)).status;
    }
    EXPECT_EQ(status, 200);
}

TEST_F(ServerTransport, ARequestTricklingPastItsDeadlineIsCut) {
    server::ServerOptions o;
    o.request_read_seconds = 2;
    start(o);
    if (IsSkipped()) return;
    // The head, one byte every 250 ms: each byte on time, the whole late.
    {
        Raw c(port_);
        ASSERT_TRUE(c.connected());
        const std::string head =
            "GET /health HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(64, 'a');
        const auto t0 = Clock::now();
        bool closed = false;
        std::string got;
        for (size_t i = 0; i < head.size() && !closed; ++i) {
            c.send_nowait(head.substr(i, 1));
            got += c.read_until_closed(250ms, &closed);
        }
        const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        EXPECT_TRUE(closed) << "still open after " << seconds << " s";
        EXPECT_LT(seconds, 2 + 3.0);
        EXPECT_GT(seconds, 1.5);
        EXPECT_EQ(parse_reply(got).status, 408) << got;
    }
    // The body the same.
    {
        Raw c(port_);
        ASSERT_TRUE(c.connected());
        c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n");
        const auto t0 = Clock::now();
        bool closed = false;
        std::string got;
        for (int i = 0; i < 100 && !closed; ++i) {
            c.send_nowait("a");
            got += c.read_until_closed(250ms, &closed);
        }
        EXPECT_TRUE(closed);
        EXPECT_LT(Clock::now() - t0, 5s);
        EXPECT_EQ(parse_reply(got).status, 408) << got;
    }
    EXPECT_EQ(health().first, 200);
}

TEST_F(ServerTransport, KeepAlivePipeliningAndExpectContinueStillWork) {
    start();
    if (IsSkipped()) return;
    // Two requests in one write, answered in order on the same connection.
    Raw c(port_);
    ASSERT_TRUE(c.connected());
    const std::string body = R"({"prompt": "Once", "max_tokens": 1})";
    c.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post_request("/v1/completions", body));
    const std::string both = c.read_until_closed(20s);
    const size_t second = both.find("HTTP/1.1 ", 1);
    ASSERT_NE(second, std::string::npos) << both;
    EXPECT_EQ(parse_reply(both.substr(0, second)).status, 200);
    const Reply completion = parse_reply(both.substr(second));
    EXPECT_EQ(completion.status, 200) << completion.body;
    EXPECT_TRUE(is_json(completion.body)) << completion.body;
    // A client that waits for 100 Continue gets it, then its reply.
    Raw e(port_);
    e.send(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        "Expect: 100-continue\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n");
    const std::string expected = "HTTP/1.1 100 Continue\r\n\r\n";
    EXPECT_EQ(e.read_until_closed(10s, nullptr, expected.size()), expected);
    e.send(body);
    const Reply r = parse_reply(e.read_until_closed(20s));
    EXPECT_EQ(r.status, 200) << r.body;
    // httplib's own client, keep-alive: many requests, one connection.
    httplib::Client client("127.0.0.1", port_);
    client.set_keep_alive(true);
    for (int i = 0; i < 20; ++i) {
        const auto res = client.Get("/v1/models");
        ASSERT_TRUE(res);
        EXPECT_EQ(res->status, 200);
    }
}

TEST_F(ServerTransport, APeerThatPipelinesAndNeverReadsLeavesWorkersForOthers) {
    // One address, 30 connections: more than the 19 workers.
    health_beside_unread_pipelines(1, 30);
}

TEST_F(ServerTransport, ManyPeersThatPipelineAndNeverReadLeaveWorkersForOthers) {
    // Four addresses, 10 connections each: each under its share of the
    // workers, together more than all of them.
    health_beside_unread_pipelines(4, 40);
}

TEST_F(ServerTransport, SilentConnectionsFillingTheTableMakeRoomForOthers) {
    server::ServerOptions o;
    o.max_connections = 24;
    start(o);
    if (IsSkipped()) return;
    // 30 connections from 127.0.0.10..12 that send nothing: more than the
    // table holds.
    std::vector<std::unique_ptr<Raw>> silent;
    for (int i = 0; i < 30; ++i) {
        silent.push_back(std::make_unique<Raw>(port_, "127.0.0." + std::to_string(10 + i % 3)));
        ASSERT_TRUE(silent.back()->connected());
        if (!silent.back()->bound()) GTEST_SKIP() << "cannot bind 127.0.0.10..12 on this machine";
    }
    std::this_thread::sleep_for(300ms);
    const auto t0 = Clock::now();
    for (int i = 0; i < 3; ++i) {
        const auto [status, seconds] = health();
        EXPECT_EQ(status, 200) << "a table full of silent connections refused /health";
        EXPECT_LT(seconds, 2.0);
    }
    // And a silent connection does not keep its place for the whole request
    // deadline (20 s): the newest is closed after the idle timeout (5 s).
    const auto t1 = Clock::now();
    bool closed = false;
    const std::string got = silent.back()->read_until_closed(
        std::chrono::duration_cast<std::chrono::milliseconds>(8s - (t1 - t0)), &closed);
    EXPECT_TRUE(closed) << "a connection that sent nothing was held for 8 s";
    EXPECT_EQ(got, "");  // closed, not refused
    EXPECT_GT(Clock::now() - t0, 4s);
}

TEST_F(ServerTransport, ARequestFollowedByAHalfCloseIsAnswered) {
    start();
    if (IsSkipped()) return;
    for (int i = 0; i < 10; ++i) {
        Raw c(port_);
        ASSERT_TRUE(c.connected());
        c.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        c.shut_write();
        bool closed = false;
        const Reply r = parse_reply(c.read_until_closed(5s, &closed));
        EXPECT_EQ(r.status, 200) << "try " << i;
        EXPECT_TRUE(closed) << "try " << i;  // no more requests: the server closes
    }
    // Two pipelined requests, then the half-close: both are answered.
    Raw c(port_);
    ASSERT_TRUE(c.connected());
    const std::string body = R"({"prompt": "Once", "max_tokens": 1})";
    c.send(
        "GET /health HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/completions HTTP/1.1\r\nHost: "
        "x\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
    c.shut_write();
    const std::string both = c.read_until_closed(20s);
    const size_t second = both.find("HTTP/1.1 ", 1);
    ASSERT_NE(second, std::string::npos) << both;
    EXPECT_EQ(parse_reply(both.substr(0, second)).status, 200);
    const Reply completion = parse_reply(both.substr(second));
    EXPECT_EQ(completion.status, 200) << completion.body;
    EXPECT_TRUE(is_json(completion.body)) << completion.body;
}

// The front alone, with a handler that is slow for 127.0.0.2: that peer's
// requests may hold at most half of the workers, so another peer's request
// is answered at once.
TEST(ServerTransportFront, APeerHoldsAtMostHalfTheWorkers) {
    server::FrontOptions f;
    f.workers = 4;
    std::atomic<bool> release{false};
    server::HttpFront front(
        f,
        [&](httplib::Stream& stream, bool) {
            std::string ip;
            int port = 0;
            stream.get_remote_ip_and_port(ip, port);
            // Bounded: the test releases it, or 5 s pass.
            for (int i = 0; i < 500 && ip == "127.0.0.2" && !release; ++i)
                std::this_thread::sleep_for(10ms);
            const std::string_view r =
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
            stream.write(r.data(), r.size());
            return false;
        },
        [](int, const std::string& m, const std::string&) { return "{\"m\":\"" + m + "\"}"; });
    const int port = front.bind("127.0.0.1", 0);
    std::thread serving([&] { front.serve(); });
    const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    std::vector<std::unique_ptr<Raw>> slow;
    bool bound = true;
    for (int i = 0; i < 8; ++i) {
        slow.push_back(std::make_unique<Raw>(port, "127.0.0.2"));
        bound = bound && slow.back()->bound();
        slow.back()->send(get);
    }
    std::this_thread::sleep_for(300ms);  // the slow requests have taken what they may
    Raw other(port, "127.0.0.3");
    const bool other_bound = other.bound();
    other.send(get);
    const auto t0 = Clock::now();
    const std::string got = other.read_until_closed(3s);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    release = true;
    // Every slow request is still answered, in turn.
    int answered = 0;
    for (auto& c : slow) answered += parse_reply(c->read_until_closed(5s)).status == 200;
    front.stop();
    serving.join();
    if (!bound || !other_bound) GTEST_SKIP() << "cannot bind 127.0.0.2/3 on this machine";
    EXPECT_EQ(parse_reply(got).status, 200) << got;
    EXPECT_LT(seconds, 1.0) << "another peer waited behind 127.0.0.2's requests";
    EXPECT_EQ(answered, 8);
}

}  // namespace
}  // namespace dwell::test
#endif  // DWELL_TEST_HAVE_SERVER
