// RequestFramer: where a request ends, fed whole and byte by byte; chunked
// bodies decoded; every limit and every ambiguity refused with its status.
#include "request_framer.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dwell::server {
namespace {

struct Outcome {
    Framing framing;
    std::string request;  // Complete: what httplib gets
    size_t consumed = 0;
    int continues = 0;  // "100 Continue" signals seen
};

// Feeds `bytes` `step` at a time (0: whole), as a connection would.
Outcome frame(const std::string& bytes, FramerLimits limits = {}, size_t step = 0) {
    RequestFramer framer(limits);
    Outcome out;
    size_t have = step == 0 ? bytes.size() : 0;
    for (;;) {
        if (step != 0) have = std::min(bytes.size(), have + step);
        out.framing = framer.advance(std::string_view(bytes).substr(0, have));
        out.continues += out.framing.send_continue;
        if (out.framing.state != Framing::State::NeedMore || have == bytes.size()) break;
    }
    if (out.framing.state == Framing::State::Complete) {
        out.request = framer.take_request();
        out.consumed = framer.consumed();
    }
    return out;
}

int status_of(const std::string& bytes, FramerLimits limits = {}) {
    const Outcome o = frame(bytes, limits);
    return o.framing.state == Framing::State::Refused    ? o.framing.status
           : o.framing.state == Framing::State::Complete ? 200
                                                         : 0;
}

const std::string kPost = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";

TEST(RequestFramer, AContentLengthBodyEndsTheRequestWhateverTheFeed) {
    const std::string req = kPost + "Content-Length: 5\r\n\r\nhello";
    for (size_t step : {size_t{0}, size_t{1}, size_t{3}}) {
        const Outcome o = frame(req + "GET /next", {}, step);
        ASSERT_EQ(o.framing.state, Framing::State::Complete) << step;
        EXPECT_EQ(o.request, req);
        EXPECT_EQ(o.consumed, req.size());  // the pipelined GET is the next one's
    }
    const Outcome get = frame("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(get.framing.state, Framing::State::Complete);
    EXPECT_EQ(get.request, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(frame(kPost + "Content-Length: 5\r\n\r\nhel").framing.state,
              Framing::State::NeedMore);
}

TEST(RequestFramer, AChunkedBodyIsDecodedAndForwardedWithItsLength) {
    const std::string req =
        kPost +
        "Transfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: y\r\n\r\n";
    for (size_t step : {size_t{0}, size_t{1}, size_t{7}}) {
        const Outcome o = frame(req + "next", {}, step);
        ASSERT_EQ(o.framing.state, Framing::State::Complete) << step << " " << o.framing.message;
        EXPECT_EQ(o.request, kPost + "Content-Length: 12\r\n\r\nhello world!");
        EXPECT_EQ(o.consumed, req.size());
    }
}

TEST(RequestFramer, TheBodyLimitHoldsChunkedOrNot) {
    FramerLimits l;
    l.max_body_bytes = 10;
    EXPECT_EQ(status_of(kPost + "Content-Length: 10\r\n\r\n0123456789", l), 200);
    EXPECT_EQ(status_of(kPost + "Content-Length: 11\r\n\r\n", l), 413);  // before the body
    EXPECT_EQ(status_of(kPost + "Content-Length: 99999999999999999\r\n\r\n", l), 413);
    const std::string te = kPost + "Transfer-Encoding: chunked\r\n\r\n";
    EXPECT_EQ(status_of(te + "a\r\n0123456789\r\n0\r\n\r\n", l), 200);
    EXPECT_EQ(status_of(te + "6\r\n012345\r\n5\r\n", l), 413);  // at the size line
    EXPECT_EQ(status_of(te + "b\r\n", l), 413);
    EXPECT_EQ(status_of(te + "fffffffffffffffffffff\r\n", l), 413);
    // Framing cannot outgrow the body: empty extensions on and on.
    std::string spam = te;
    for (int i = 0; i < 200; ++i) spam += "1;" + std::string(500, 'e') + "\r\nx\r\n";
    l.max_body_bytes = 1000;
    EXPECT_EQ(status_of(spam, l), 413);
}

TEST(RequestFramer, TheHeadLimitsHoldAsBytesArrive) {
    FramerLimits l;
    l.max_head_bytes = 256;
    l.max_line_bytes = 128;
    EXPECT_EQ(status_of("GET /" + std::string(200, 'a'), l), 414);  // no newline yet
    EXPECT_EQ(status_of("GET / HTTP/1.1\r\nX: " + std::string(200, 'a'), l), 431);
    std::string many = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < 20; ++i) many += "X-" + std::to_string(i) + ": 0123456789\r\n";
    EXPECT_EQ(status_of(many, l), 431);
    // Trailers count as head.
    std::string trailers = kPost + "Transfer-Encoding: chunked\r\n\r\n0\r\n";
    for (int i = 0; i < 20; ++i) trailers += "T: 0123456789\r\n";
    EXPECT_EQ(status_of(trailers, l), 431);
}

TEST(RequestFramer, AmbiguousOrUnsupportedFramingIsRefused) {
    EXPECT_EQ(status_of(kPost + "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    EXPECT_EQ(status_of(kPost + "Content-Length: 1\r\nContent-Length: 1\r\n\r\nx"), 400);
    EXPECT_EQ(status_of(kPost + "Content-Length: +1\r\n\r\nx"), 400);
    EXPECT_EQ(status_of(kPost + "Content-Length: %31\r\n\r\nx"), 400);  // httplib would decode it
    EXPECT_EQ(status_of(kPost + "Content-Length: 1 1\r\n\r\nx"), 400);
    EXPECT_EQ(status_of(kPost + "Transfer-Encoding: gzip, chunked\r\n\r\n"), 501);
    EXPECT_EQ(status_of(kPost + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
              501);
    EXPECT_EQ(status_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
    EXPECT_EQ(status_of(kPost + "Content-Encoding: gzip\r\nContent-Length: 1\r\n\r\nx"), 415);
    EXPECT_EQ(status_of(kPost + "Content-Encoding: identity\r\nContent-Length: 1\r\n\r\nx"), 200);
    EXPECT_EQ(status_of(kPost + "Expect: something\r\n\r\n"), 417);
    EXPECT_EQ(status_of(kPost + "Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n"), 400);
    EXPECT_EQ(status_of(kPost + "Transfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
}

TEST(RequestFramer, MalformedHeadsAreRefused) {
    EXPECT_EQ(status_of("GET / HTTP/1.1\nHost: x\n\n"), 400);      // bare LF
    EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: x\n\r\n"), 400);  // one bare LF
    EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n"), 400);
    EXPECT_EQ(status_of("GET / HTTP/1.1\r\nHost : x\r\n\r\n"), 400);
    EXPECT_EQ(status_of("GET / HTTP/1.1\r\nNo colon\r\n\r\n"), 400);
    EXPECT_EQ(status_of("GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n"), 400);
    EXPECT_EQ(status_of("\r\nGET / HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(status_of("GET  / HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(status_of("GET /\x7f HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(status_of("G(T / HTTP/1.1\r\n\r\n"), 400);
    EXPECT_EQ(status_of("GET / HTTP/2.0\r\n\r\n"), 505);
    EXPECT_EQ(status_of("GET / SPDY\r\n\r\n"), 400);
    // Bytes past ASCII in the target are the handler's to answer (404).
    EXPECT_EQ(status_of("GET /\xff\xfe HTTP/1.1\r\n\r\n"), 200);
    EXPECT_EQ(status_of("GET / HTTP/1.0\r\n\r\n"), 200);
}

TEST(RequestFramer, ExpectContinueIsSignalledOnceAndNotForwarded) {
    const std::string req = kPost + "Expect: 100-continue\r\nContent-Length: 3\r\n\r\n";
    const Outcome waiting = frame(req, {}, 1);
    EXPECT_EQ(waiting.framing.state, Framing::State::NeedMore);
    EXPECT_EQ(waiting.continues, 1);
    const Outcome o = frame(req + "abc", {}, 1);
    ASSERT_EQ(o.framing.state, Framing::State::Complete);
    EXPECT_EQ(o.continues, 1);
    EXPECT_EQ(o.request, kPost + "Content-Length: 3\r\n\r\nabc");
    // No body to wait for: nothing to signal.
    EXPECT_EQ(frame("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").continues, 0);
}

TEST(RequestFramer, ResetFramesTheNextRequest) {
    RequestFramer f({});
    const std::string two = "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
    ASSERT_EQ(f.advance(two).state, Framing::State::Complete);
    EXPECT_EQ(f.target(), "/a");
    const size_t used = f.consumed();
    f.take_request();
    f.reset();
    EXPECT_FALSE(f.started());
    ASSERT_EQ(f.advance(std::string_view(two).substr(used)).state, Framing::State::Complete);
    EXPECT_EQ(f.target(), "/b");
}

}  // namespace
}  // namespace dwell::server
