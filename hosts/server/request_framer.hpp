// Where one HTTP/1.1 request ends in the bytes a connection sent, found
// before any thread works on it (http_front.hpp): the head up to its empty
// line, then a body of Content-Length bytes or a chunked body, decoded.
// The limits hold as bytes arrive: a head past max_head_bytes, a body
// (chunked or not) past max_body_bytes, is refused without reading on.
//
// It is strict where httplib is lenient, so that the two never disagree on
// where a request ends: every line ends with CRLF, no folded header lines,
// one Content-Length of digits only, Transfer-Encoding only "chunked" and
// never beside Content-Length, no compressed bodies (a small gzip body
// would grow past any limit while httplib inflates it).
//
// Thread-safety: one object per connection, used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dwell::server {

struct FramerLimits {
    size_t max_head_bytes = 16 * 1024;  // request line, headers, chunked trailers
    size_t max_line_bytes = 8 * 1024;   // any one line of them
    size_t max_body_bytes = 1 << 20;    // after chunked decoding
};

struct Framing {
    enum class State { NeedMore, Complete, Refused };
    State state = State::NeedMore;
    int status = 0;       // Refused: the status to answer
    std::string message;  // Refused: what is wrong, one line
    // NeedMore: the client waits for "100 Continue" before its body; true
    // once per request.
    bool send_continue = false;
};

class RequestFramer {
public:
    explicit RequestFramer(FramerLimits limits) : limits_(limits) {}

    // `received`: every byte since the request began; it only grows
    // between calls (the same prefix each time).
    Framing advance(std::string_view received);

    // After Complete: the request as httplib is to read it (Content-Length
    // for the decoded body; no Transfer-Encoding, no Expect), and how many
    // bytes of `received` it took (what follows is the next request).
    std::string take_request();
    size_t consumed() const { return consumed_; }

    bool started() const { return started_; }
    // The request target once the head is in, else "".
    const std::string& target() const { return target_; }

    // Ready for the next request on the connection.
    void reset() { *this = RequestFramer(limits_); }

private:
    enum class Phase { RequestLine, Headers, Body, ChunkSize, ChunkData, ChunkEnd, Trailers, Done };

    Framing refuse(int status, std::string message);
    bool request_line(std::string_view line, Framing& f);
    bool header_line(std::string_view line, Framing& f);
    bool head_done(Framing& f);
    bool chunk_size(std::string_view line, Framing& f);
    std::string too_large() const;

    FramerLimits limits_;
    Phase phase_ = Phase::RequestLine;
    size_t pos_ = 0;  // next byte of `received` to look at
    bool started_ = false;
    bool failed_ = false;
    Framing failure_;
    std::string target_;
    bool http10_ = false;
    std::string head_;  // forwarded lines, CRLF-terminated
    std::string body_;
    std::string content_length_;  // as sent, "" when none
    bool chunked_ = false;
    bool expect_continue_ = false;
    bool continue_signalled_ = false;
    uint64_t body_length_ = 0;  // Content-Length's value
    uint64_t chunk_left_ = 0;
    size_t head_bytes_ = 0;  // head plus trailers so far
    size_t body_start_ = 0;
    size_t consumed_ = 0;
};

}  // namespace dwell::server
