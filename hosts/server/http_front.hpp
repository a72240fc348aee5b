// The server's listening socket and every connection's reading, in front
// of cpp-httplib, so that slow or hostile clients cannot take it offline.
//
// Debian 12's cpp-httplib (0.11.4, a shared library) has its listen backlog
// (5), its accept loop and its timeouts compiled in: a read timeout holds
// per recv(), so a client sending a byte every few seconds keeps a pool
// thread forever, and a hundred such clients leave none for /health; a
// chunked body has no size limit at all. It cannot be configured into
// shape, so it no longer sees a socket before a whole request is in:
//
//  - One thread (serve()) owns the listening socket (backlog SOMAXCONN) and
//    polls every connection that is not being answered. It reads each
//    request's head and body (RequestFramer: limits as bytes arrive,
//    chunked bodies decoded) under one deadline for the whole request,
//    caps connections per peer address and in all (a full table drops its
//    oldest connection that holds nothing rather than refuse a newcomer; a
//    connection silent past idle_timeout is closed), and bounds the bytes
//    it holds. What fails gets its 4xx/503 from this thread and the
//    connection is closed; a trickling client costs a file descriptor,
//    never a thread.
//  - A complete request goes to a worker (a fixed pool, a bounded queue;
//    full: 503), which runs it through httplib's own request handling
//    (Server::process_request, protected, reached from a subclass) on a
//    Stream that reads the buffered request and writes to the socket. One
//    peer address holds at most half of the workers (its further requests
//    wait in their connections), and a reply that makes no progress for
//    write_timeout ends its connection.
//  - Then the connection comes back to the polling thread for its next
//    request (keep-alive), or is closed. A pipelined next request waits
//    there until the socket takes more of the earlier replies, so a client
//    that never reads does not park a worker per request. A client that
//    half-closes after its requests still gets their replies.
//
// Thread-safety: bind() and serve() from one thread; stop() from any.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "request_framer.hpp"

namespace httplib {
class Stream;
}

namespace dwell::server {

struct FrontOptions {
    FramerLimits limits;
    // From a connection's first byte (its accept for a new one) to the
    // request's last: head and body together.
    std::chrono::milliseconds request_deadline{std::chrono::seconds(20)};
    // An idle keep-alive connection, or a new one that has sent nothing,
    // is closed after this.
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(5)};
    // A reply that makes no progress this long ends its connection: a
    // client that does not read must not hold a worker for long.
    std::chrono::milliseconds write_timeout{std::chrono::seconds(10)};
    int max_connections = 512;
    int max_connections_per_peer = 64;
    size_t max_buffered_bytes = size_t{128} << 20;  // requests read and not yet answered
    int workers = 16;
    size_t max_pending = 64;  // complete requests waiting for a worker
    int max_requests_per_connection = 1000;
};

class HttpFront {
public:
    // Answers one complete request on a worker thread; `close` asks for
    // "Connection: close". Returns whether the connection may carry
    // another request. May throw (the connection is closed then).
    using Handler = std::function<bool(httplib::Stream& stream, bool close)>;
    // The JSON body of a refusal this layer answers itself; `target` is
    // the request's target when its head was read, else "".
    using Refusal = std::function<std::string(int status, const std::string& message,
                                              const std::string& target)>;

    HttpFront(FrontOptions options, Handler handler, Refusal refusal);
    ~HttpFront();
    HttpFront(const HttpFront&) = delete;
    HttpFront& operator=(const HttpFront&) = delete;

    // Listens on host:port (0: any free port) and returns the port. Throws
    // dwell::Error naming the address when it cannot.
    int bind(const std::string& host, int port);
    int listening_socket() const;
    // Serves until stop(); returns once every worker has finished.
    void serve();
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dwell::server
