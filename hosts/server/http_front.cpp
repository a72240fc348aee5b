#include "http_front.hpp"

#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dwell/core/base/error.hpp"

namespace dwell::server {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A refused connection is read (and its bytes dropped) this long after its
// reply, so that closing it does not reset the reply away before the
// client has read it.
constexpr milliseconds kLinger{1000};
constexpr size_t kMaxLingerBytes = 1 << 20;
constexpr size_t kReadChunk = 64 * 1024;

const char* reason_phrase(int status) {
    switch (status) {
        case 400:
            return "Bad Request";
        case 408:
            return "Request Timeout";
        case 413:
            return "Payload Too Large";
        case 414:
            return "URI Too Long";
        case 415:
            return "Unsupported Media Type";
        case 417:
            return "Expectation Failed";
        case 431:
            return "Request Header Fields Too Large";
        case 501:
            return "Not Implemented";
        case 503:
            return "Service Unavailable";
        case 505:
            return "HTTP Version Not Supported";
        default:
            return "Error";
    }
}

// The numeric address and port of a socket's peer (or, local, its own end).
std::pair<std::string, int> address_of(int fd, bool local) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    if ((local ? getsockname(fd, sa, &len) : getpeername(fd, sa, &len)) != 0) return {"", 0};
    char host[NI_MAXHOST];
    char port[NI_MAXSERV];
    if (getnameinfo(sa, len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return {"", 0};
    return {host, std::atoi(port)};
}

// httplib reads the buffered request from here and writes its reply to
// the socket (non-blocking: every write waits for room, at most
// write_timeout each time).
class RequestStream final : public httplib::Stream {
public:
    RequestStream(int fd, std::string_view request, milliseconds write_timeout)
        : fd_(fd), request_(request), write_timeout_(write_timeout) {}

    bool is_readable() const override { return at_ < request_.size(); }

    // Room to write within write_timeout, and the client has not gone.
    // End of input is not "gone": a client may half-close after its
    // request (RFC 9112 9.6) and still read the reply; one that closed
    // for good resets the connection at our next send, and POLLERR/POLLHUP
    // or the failed send tell us then.
    bool is_writable() const override {
        pollfd p{fd_, POLLOUT, 0};
        const int n = poll(&p, 1, static_cast<int>(write_timeout_.count()));
        return n > 0 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL)) && (p.revents & POLLOUT);
    }

    ssize_t read(char* ptr, size_t size) override {
        const size_t n = std::min(size, request_.size() - at_);
        std::memcpy(ptr, request_.data() + at_, n);
        at_ += n;
        return static_cast<ssize_t>(n);
    }

    // All of it or -1, as a blocking send: httplib writes headers with one
    // call and does not retry a short one.
    ssize_t write(const char* ptr, size_t size) override {
        size_t done = 0;
        while (done < size) {
            if (!is_writable()) return -1;
            const ssize_t n = send(fd_, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
            if (n > 0) done += static_cast<size_t>(n);
        }
        return static_cast<ssize_t>(size);
    }

    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        std::tie(ip, port) = address_of(fd_, false);
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        std::tie(ip, port) = address_of(fd_, true);
    }
    socket_t socket() const override { return fd_; }

private:
    int fd_;
    std::string_view request_;
    size_t at_ = 0;
    milliseconds write_timeout_;
};

}  // namespace

struct HttpFront::Impl {
    // Waiting: a complete request that waits for one of its peer's
    // workers to free (a peer may hold at most half of them).
    // Draining: a pipelined request waits until the socket takes more of
    // the replies before it (a client that never reads gets no worker).
    enum class State { Idle, Reading, Lingering, Waiting, Draining };

    struct Connection {
        Connection(int f, std::string p, const FramerLimits& limits)
            : fd(f), peer(std::move(p)), framer(limits) {}
        int fd;
        std::string peer;
        std::string in;       // received and not yet a request
        std::string request;  // the complete request a worker answers
        RequestFramer framer;
        State state = State::Idle;
        Clock::time_point deadline;
        int served = 0;
        size_t lingered = 0;
        Clock::time_point accepted;
        uint64_t order = 0;  // of its accept: which is the oldest
        bool eof = false;    // the client sends no more (it may still read)
    };
    using Owned = std::unique_ptr<Connection>;

    Impl(FrontOptions o, Handler h, Refusal r)
        : opts(std::move(o)), handler(std::move(h)), refusal(std::move(r)) {}

    // serve()'s thread only.
    void loop();
    void accept_all(Clock::time_point now);
    void on_readable(Connection& c, Clock::time_point now);
    // False when the connection went to a worker (no longer this thread's).
    bool frame(Connection& c, Clock::time_point now);
    bool dispatch(Connection& c);
    bool submit(Connection& c);
    bool evict_silent();
    void refuse(Connection& c, int status, const std::string& message, Clock::time_point now);
    void finish(Connection& c);
    void take_returned(Clock::time_point now);
    std::string reply(int status, const std::string& message, const std::string& target) const;
    Owned detach(Connection& c);

    // Workers.
    void work();

    FrontOptions opts;
    Handler handler;
    Refusal refusal;
    int listener = -1;
    int wake = -1;
    std::atomic<bool> stopping{false};

    // The polling thread's own.
    std::unordered_map<int, Owned> polled;
    std::unordered_map<std::string, int> per_peer;  // open, not lingering
    // Requests each peer has with the workers (pending or being answered),
    // and its connections whose next request waits for one of them.
    std::unordered_map<std::string, int> busy_per_peer;
    std::unordered_map<std::string, std::deque<int>> waiting;
    int open = 0;  // every connection it accepted and holds
    uint64_t accepted_count = 0;
    Clock::time_point accept_paused_until{};

    // Request bytes read and not yet answered (workers give theirs back).
    std::atomic<size_t> buffered{0};

    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Owned> pending;                     // for the workers
    bool closing = false;                          // the workers end
    std::vector<std::pair<Owned, bool>> returned;  // from the workers: keep-alive?
    std::vector<std::thread> workers;
};

HttpFront::HttpFront(FrontOptions options, Handler handler, Refusal refusal)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), std::move(refusal))) {
    impl_->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (impl_->wake < 0)
        throw Error(
            DWELL_ERR_UNAVAILABLE,
            std::string("cannot create the server's wake-up event: ") + std::strerror(errno));
}

HttpFront::~HttpFront() {
    stop();
    if (impl_->listener >= 0) close(impl_->listener);
    close(impl_->wake);
}

int HttpFront::bind(const std::string& host, int port) {
    Impl& s = *impl_;
    const std::string where = host + ":" + std::to_string(port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
        rc != 0)
        throw Error(DWELL_ERR_UNAVAILABLE, "cannot listen on " + where + " (" + gai_strerror(rc) +
                                               "); choose another with --host/--port");
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, freeaddrinfo);
    std::string why = "no address";
    for (addrinfo* a = found; a; a = a->ai_next) {
        const int fd =
            socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
            s.listener = fd;
            break;
        }
        why = std::strerror(errno);
        close(fd);
    }
    if (s.listener < 0)
        throw Error(DWELL_ERR_UNAVAILABLE, "cannot listen on " + where + " (" + why +
                                               "); choose another with --host/--port");
    return address_of(s.listener, true).second;
}

int HttpFront::listening_socket() const {
    return impl_->listener;
}

void HttpFront::serve() {
    Impl& s = *impl_;
    if (s.listener < 0 || s.stopping) return;
    for (int i = 0; i < s.opts.workers; ++i) s.workers.emplace_back([&s] { s.work(); });
    s.loop();
    // Stopping: nothing new is read; requests not yet begun are dropped,
    // those being answered finish (their generations are cancelled).
    std::deque<Impl::Owned> dropped;
    {
        std::lock_guard lock(s.mutex);
        s.closing = true;
        dropped.swap(s.pending);
    }
    s.cv.notify_all();
    for (auto& w : s.workers) w.join();
    s.workers.clear();
    for (auto& c : dropped) close(c->fd);
    for (auto& [c, keep] : s.returned) close(c->fd);
    s.returned.clear();
    for (auto& [fd, c] : s.polled) close(fd);
    s.polled.clear();
}

void HttpFront::stop() {
    impl_->stopping = true;
    const uint64_t one = 1;
    (void)!::write(impl_->wake, &one, sizeof one);
}

void HttpFront::Impl::loop() {
    std::vector<pollfd> fds;
    while (!stopping) {
        const auto now = Clock::now();
        fds.clear();
        fds.push_back({wake, POLLIN, 0});
        const bool accepting = now >= accept_paused_until;
        if (accepting) fds.push_back({listener, POLLIN, 0});
        auto next = now + milliseconds(1000);
        if (!accepting) next = std::min(next, accept_paused_until);
        const size_t max_in = opts.limits.max_head_bytes + 2 * opts.limits.max_body_bytes + 65536;
        for (auto& [fd, c] : polled) {
            // A connection holding a whole buffer's worth has been framed
            // to a decision already; it is not read further.
            const bool room = c->state == State::Lingering ||
                              (c->state != State::Waiting && !c->eof && c->in.size() < max_in);
            const short events = c->state == State::Draining ? POLLOUT : room ? POLLIN : 0;
            fds.push_back({fd, events, 0});
            next = std::min(next, c->deadline);
        }
        const auto wait = std::chrono::duration_cast<milliseconds>(next - now).count();
        const int n =
            poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait, 0) + 1));
        if (n < 0 && errno != EINTR) {
            spdlog::error("dwell serve: poll failed: {}", std::strerror(errno));
            std::this_thread::sleep_for(milliseconds(10));
            continue;
        }
        const auto after = Clock::now();
        size_t at = 0;
        if (fds[at++].revents) {
            uint64_t count;
            (void)!::read(wake, &count, sizeof count);
            take_returned(after);
        }
        if (stopping) break;
        if (accepting && fds[at++].revents) accept_all(after);
        // By descriptor: one closed here is not reused before the next
        // round (nothing is accepted or handed back in between).
        for (; at < fds.size(); ++at) {
            if (!fds[at].revents) continue;
            const auto it = polled.find(fds[at].fd);
            if (it == polled.end()) continue;
            Connection& c = *it->second;
            if (c.state == State::Draining) {
                if (fds[at].revents & (POLLERR | POLLHUP | POLLNVAL)) {
                    finish(c);
                } else if (fds[at].revents & POLLOUT) {
                    c.state = State::Idle;
                    c.deadline = after + opts.request_deadline;
                    if (frame(c, after) && c.eof &&
                        (c.state == State::Idle || c.state == State::Reading))
                        finish(c);
                }
                continue;
            }
            if (c.state == State::Waiting || (c.eof && c.state != State::Lingering)) {
                if (fds[at].revents & (POLLERR | POLLHUP | POLLNVAL)) finish(c);
                continue;
            }
            on_readable(c, after);
        }
        // Deadlines.
        std::vector<Connection*> late;
        for (auto& [fd, c] : polled)
            if (c->deadline <= after) late.push_back(c.get());
        for (Connection* c : late) {
            if (c->state == State::Reading) {
                refuse(*c, 408,
                       fmt::format("the request did not arrive whole within {:g} s; send it "
                                   "promptly",
                                   static_cast<double>(opts.request_deadline.count()) / 1000),
                       after);
            } else {
                finish(*c);
            }
        }
    }
}

std::string HttpFront::Impl::reply(int status, const std::string& message,
                                   const std::string& target) const {
    std::string body;
    try {
        body = refusal(status, message, target);
    } catch (...) {
        body = R"({"error":{"message":"the request was refused","type":"invalid_request_error"}})";
    }
    std::string out =
        "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nConnection: close\r\n";
    if (status == 503) out += "Retry-After: 1\r\n";
    return out + "\r\n" + body;
}

void HttpFront::Impl::accept_all(Clock::time_point now) {
    for (int i = 0; i < 64; ++i) {
        const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                // Out of descriptors: the listener would stay readable and
                // spin this loop; look again shortly.
                spdlog::warn("dwell serve: cannot accept a connection: {}", std::strerror(errno));
                accept_paused_until = now + milliseconds(100);
            }
            return;
        }
        std::string peer = address_of(fd, false).first;
        const auto refuse_now = [&](const std::string& why) {
            const std::string r = reply(503, why, "");
            (void)!send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            close(fd);
        };
        // httplib (built with select()) answers 500 for a descriptor past
        // FD_SETSIZE; the caps below keep them under it.
        // A full table makes room by dropping its oldest connection that
        // holds nothing (silent, or idle between requests): else a few
        // addresses opening silent connections lock everyone out.
        if (open >= opts.max_connections && fd < FD_SETSIZE) evict_silent();
        if (open >= opts.max_connections || fd >= FD_SETSIZE) {
            refuse_now("the server has too many open connections; retry shortly");
            continue;
        }
        int& count = per_peer[peer];
        if (count >= opts.max_connections_per_peer) {
            refuse_now("too many connections from " + peer + " (at most " +
                       std::to_string(opts.max_connections_per_peer) +
                       " at once); reuse or close some, or retry shortly");
            continue;
        }
        ++count;
        ++open;
        auto c = std::make_unique<Connection>(fd, std::move(peer), opts.limits);
        // Until its first byte a connection has the idle timeout, not the
        // whole request's deadline.
        c->accepted = now;
        c->order = accepted_count++;
        c->deadline = now + std::min(opts.request_deadline, opts.idle_timeout);
        polled.emplace(fd, std::move(c));
    }
}

void HttpFront::Impl::on_readable(Connection& c, Clock::time_point now) {
    char buf[kReadChunk];
    if (c.state == State::Lingering) {
        for (;;) {
            const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
            if (n > 0) {
                c.lingered += static_cast<size_t>(n);
                if (c.lingered > kMaxLingerBytes) return finish(c);
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (n < 0 && errno == EINTR) continue;
            return finish(c);
        }
    }
    const size_t max_in = opts.limits.max_head_bytes + 2 * opts.limits.max_body_bytes + 65536;
    for (int reads = 0; reads < 4 && c.in.size() < max_in; ++reads) {
        const size_t want = std::min(sizeof buf, max_in - c.in.size());
        const ssize_t n = recv(c.fd, buf, want, 0);
        if (n == 0) {
            // No more requests: answer those in (the client may still read
            // after a half-close); an unfinished one has nobody to answer.
            c.eof = true;
            if (!frame(c, now)) return;
            if (c.state == State::Idle || c.state == State::Reading) finish(c);
            return;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            return finish(c);
        }
        if (buffered + static_cast<size_t>(n) > opts.max_buffered_bytes)
            return refuse(c, 503, "the server holds too many unanswered requests; retry shortly",
                          now);
        if (c.state == State::Idle) {
            c.state = State::Reading;
            c.deadline = (c.served > 0 ? now : c.accepted) + opts.request_deadline;
        }
        c.in.append(buf, static_cast<size_t>(n));
        buffered += static_cast<size_t>(n);
        if (static_cast<size_t>(n) < want) break;
    }
    frame(c, now);
}

bool HttpFront::Impl::frame(Connection& c, Clock::time_point now) {
    if (c.in.empty()) return true;
    c.state = State::Reading;
    const Framing f = c.framer.advance(c.in);
    switch (f.state) {
        case Framing::State::NeedMore:
            if (f.send_continue) {
                static constexpr std::string_view go = "HTTP/1.1 100 Continue\r\n\r\n";
                (void)!send(c.fd, go.data(), go.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            }
            return true;
        case Framing::State::Refused:
            refuse(c, f.status, f.message, now);
            return true;
        case Framing::State::Complete:
            return dispatch(c);
    }
    return true;
}

HttpFront::Impl::Owned HttpFront::Impl::detach(Connection& c) {
    auto it = polled.find(c.fd);
    Owned owned = std::move(it->second);
    polled.erase(it);
    return owned;
}

bool HttpFront::Impl::dispatch(Connection& c) {
    // The next request's bytes (if the client pipelined) stay in `in`.
    c.request = c.framer.take_request();
    const size_t consumed = c.framer.consumed();
    c.in.erase(0, consumed);
    buffered -= consumed;
    buffered += c.request.size();
    c.framer.reset();
    // One peer may hold at most half of the workers: a client pipelining
    // requests whose replies it never reads parks each worker it gets for
    // write_timeout, and must leave the rest to others.
    const int cap = std::max(1, opts.workers / 2);
    if (busy_per_peer[c.peer] >= cap) {
        c.state = State::Waiting;
        c.deadline = Clock::time_point::max();
        waiting[c.peer].push_back(c.fd);
        return true;
    }
    return submit(c);
}

bool HttpFront::Impl::submit(Connection& c) {
    {
        std::lock_guard lock(mutex);
        if (pending.size() < opts.max_pending) {
            ++busy_per_peer[c.peer];
            pending.push_back(detach(c));
            cv.notify_one();
            return false;
        }
    }
    buffered -= c.request.size();
    c.request.clear();
    c.state = State::Reading;
    refuse(c, 503, "the server is busy; retry shortly", Clock::now());
    return true;
}

bool HttpFront::Impl::evict_silent() {
    Connection* oldest = nullptr;
    for (auto& [fd, c] : polled)
        if (c->state == State::Idle && c->in.empty() && (!oldest || c->order < oldest->order))
            oldest = c.get();
    if (!oldest) return false;
    finish(*oldest);
    return true;
}

void HttpFront::Impl::refuse(Connection& c, int status, const std::string& message,
                             Clock::time_point now) {
    const std::string r = reply(status, message, c.framer.target());
    (void)!send(c.fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(c.fd, SHUT_WR);
    if (c.state != State::Lingering) --per_peer[c.peer];
    buffered -= c.in.size();
    c.in.clear();
    c.in.shrink_to_fit();
    c.state = State::Lingering;
    c.deadline = now + kLinger;
}

void HttpFront::Impl::finish(Connection& c) {
    if (c.state == State::Waiting) {
        buffered -= c.request.size();
        if (const auto it = waiting.find(c.peer); it != waiting.end()) {
            std::erase(it->second, c.fd);
            if (it->second.empty()) waiting.erase(it);
        }
    }
    if (c.state != State::Lingering) {
        if (--per_peer[c.peer] <= 0) per_peer.erase(c.peer);
    } else if (const auto it = per_peer.find(c.peer); it != per_peer.end() && it->second <= 0) {
        per_peer.erase(it);
    }
    --open;
    buffered -= c.in.size();
    close(c.fd);
    polled.erase(c.fd);  // destroys c
}

void HttpFront::Impl::take_returned(Clock::time_point now) {
    std::vector<std::pair<Owned, bool>> back;
    {
        std::lock_guard lock(mutex);
        back.swap(returned);
    }
    for (auto& [owned, keep] : back) {
        Connection& c = *owned;
        const int fd = c.fd;
        const std::string peer = c.peer;
        polled.emplace(fd, std::move(owned));
        if (const auto it = busy_per_peer.find(peer);
            it != busy_per_peer.end() && --it->second <= 0)
            busy_per_peer.erase(it);
        if (!keep || (c.eof && c.in.empty())) {
            finish(c);
        } else {
            ++c.served;
            c.state = State::Idle;
            c.deadline = now + opts.idle_timeout;
            pollfd p{c.fd, POLLOUT, 0};
            if (!c.in.empty() && (poll(&p, 1, 0) <= 0 || !(p.revents & POLLOUT))) {
                c.state = State::Draining;
                c.deadline = now + opts.write_timeout;
            } else if (!c.in.empty()) {
                c.deadline = now + opts.request_deadline;
                // A pipelined request.
                if (frame(c, now) && c.eof && (c.state == State::Idle || c.state == State::Reading))
                    finish(c);
            }
        }
        // The peer's worker is free: its next waiting request may go.
        const auto w = waiting.find(peer);
        if (w == waiting.end()) continue;
        const auto b = busy_per_peer.find(peer);
        if (b != busy_per_peer.end() && b->second >= std::max(1, opts.workers / 2)) continue;
        const int wfd = w->second.front();
        w->second.pop_front();
        if (w->second.empty()) waiting.erase(w);
        if (const auto it = polled.find(wfd); it != polled.end()) submit(*it->second);
    }
}

void HttpFront::Impl::work() {
    for (;;) {
        Owned c;
        {
            std::unique_lock lock(mutex);
            cv.wait(lock, [&] { return closing || !pending.empty(); });
            if (closing) return;
            c = std::move(pending.front());
            pending.pop_front();
        }
        bool keep = false;
        const bool last = stopping || c->served + 1 >= opts.max_requests_per_connection;
        try {
            RequestStream stream(c->fd, c->request, opts.write_timeout);
            keep = handler(stream, last) && !last;
        } catch (const std::exception& e) {
            spdlog::error("dwell serve: a request failed: {}", e.what());
        } catch (...) {
            spdlog::error("dwell serve: a request failed");
        }
        buffered -= c->request.size();
        c->request.clear();
        c->request.shrink_to_fit();
        {
            std::lock_guard lock(mutex);
            returned.emplace_back(std::move(c), keep);
        }
        const uint64_t one = 1;
        (void)!::write(wake, &one, sizeof one);
    }
}

}  // namespace dwell::server
