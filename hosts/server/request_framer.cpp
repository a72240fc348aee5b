#include "request_framer.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace dwell::server {

namespace {

// A chunk-size line: hex digits, maybe an extension; longer ones are junk.
constexpr size_t kMaxChunkLine = 1024;
// Chunk framing beyond the body's own bytes (1-byte chunks cost 5 more,
// extensions more still): bounded so that framing cannot outgrow the body.
constexpr size_t kMaxChunkOverhead = 64 * 1024;

bool is_tchar(unsigned char c) {
    return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool is_token(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return is_tchar(c); });
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

}  // namespace

Framing RequestFramer::refuse(int status, std::string message) {
    failed_ = true;
    failure_ = Framing{Framing::State::Refused, status, std::move(message), false};
    return failure_;
}

std::string RequestFramer::too_large() const {
    return "the request body is larger than the server's limit of " +
           std::to_string(limits_.max_body_bytes) + " bytes (dwell serve --max-body-kb)";
}

bool RequestFramer::request_line(std::string_view line, Framing& f) {
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
        f = refuse(400, "the request line is not 'METHOD TARGET HTTP/1.1'");
        return false;
    }
    const std::string_view method = line.substr(0, sp1);
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string_view version = line.substr(sp2 + 1);
    // Bytes past ASCII may stay (httplib answers 404); control bytes may not.
    const bool target_ok =
        !target.empty() && std::none_of(target.begin(), target.end(), [](char c) {
            const auto u = static_cast<unsigned char>(c);
            return u < 0x21 || u == 0x7f;
        });
    if (!is_token(method) || !target_ok) {
        f = refuse(400, "the request line is not 'METHOD TARGET HTTP/1.1'");
        return false;
    }
    if (version != "HTTP/1.1" && version != "HTTP/1.0") {
        f = refuse(version.substr(0, 5) == "HTTP/" ? 505 : 400,
                   "only HTTP/1.1 and HTTP/1.0 are served");
        return false;
    }
    http10_ = version == "HTTP/1.0";
    target_ = std::string(target);
    head_.append(line).append("\r\n");
    return true;
}

bool RequestFramer::header_line(std::string_view line, Framing& f) {
    const size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if (colon == std::string_view::npos || !is_token(name)) {
        // Folded lines (leading space) land here too.
        f = refuse(400, "a header line of the request is not 'Name: value'");
        return false;
    }
    const std::string_view value = trim(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char c) {
            const auto u = static_cast<unsigned char>(c);
            return (u < 0x20 && u != '\t') || u == 0x7f;
        })) {
        f = refuse(400, "the header " + std::string(name) + " holds control characters");
        return false;
    }
    if (iequals(name, "Content-Length")) {
        if (!content_length_.empty()) {
            f = refuse(400, "the request has more than one Content-Length");
            return false;
        }
        if (value.empty() || value.size() > 19 ||
            !std::all_of(value.begin(), value.end(),
                         [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
            f = refuse(400, "Content-Length is not a number of bytes");
            return false;
        }
        content_length_ = std::string(value);
        body_length_ = std::stoull(content_length_);
        return true;  // forwarded as the decoded body's length
    }
    if (iequals(name, "Transfer-Encoding")) {
        if (chunked_ || !iequals(value, "chunked")) {
            f = refuse(501, "only 'Transfer-Encoding: chunked' is supported for request bodies");
            return false;
        }
        chunked_ = true;
        return true;  // decoded here: httplib gets a plain body
    }
    if (iequals(name, "Expect")) {
        if (!iequals(value, "100-continue")) {
            f = refuse(417, "only 'Expect: 100-continue' is supported");
            return false;
        }
        expect_continue_ = true;
        return true;  // answered here
    }
    if (iequals(name, "Content-Encoding") && !iequals(value, "identity")) {
        f = refuse(415, "compressed request bodies (Content-Encoding: " + std::string(value) +
                            ") are not accepted; send the body uncompressed");
        return false;
    }
    head_.append(line).append("\r\n");
    return true;
}

bool RequestFramer::head_done(Framing& f) {
    if (chunked_ && !content_length_.empty()) {
        f = refuse(400, "the request has both Content-Length and Transfer-Encoding");
        return false;
    }
    if (chunked_ && http10_) {
        f = refuse(400, "HTTP/1.0 requests cannot have chunked bodies");
        return false;
    }
    if (body_length_ > limits_.max_body_bytes) {
        f = refuse(413, too_large());
        return false;
    }
    body_start_ = pos_;
    phase_ = chunked_ ? Phase::ChunkSize : body_length_ > 0 ? Phase::Body : Phase::Done;
    return true;
}

bool RequestFramer::chunk_size(std::string_view line, Framing& f) {
    size_t digits = 0;
    uint64_t size = 0;
    while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits]))) {
        if (digits == 15) {  // past any limit already
            f = refuse(413, too_large());
            return false;
        }
        const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(line[digits])));
        size = size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
        ++digits;
    }
    const std::string_view rest = trim(line.substr(digits));
    if (digits == 0 || (!rest.empty() && rest.front() != ';')) {
        f = refuse(400, "a chunk of the body does not start with its size in hex");
        return false;
    }
    if (size > limits_.max_body_bytes - body_.size()) {
        f = refuse(413, too_large());
        return false;
    }
    chunk_left_ = size;
    phase_ = size == 0 ? Phase::Trailers : Phase::ChunkData;
    return true;
}

Framing RequestFramer::advance(std::string_view in) {
    if (failed_) return failure_;
    Framing f;
    if (!in.empty()) started_ = true;
    const auto need_more = [&] {
        const bool body_to_come = chunked_ || body_length_ > 0;
        if (expect_continue_ && body_to_come && !continue_signalled_ &&
            phase_ != Phase::RequestLine && phase_ != Phase::Headers) {
            continue_signalled_ = true;
            f.send_continue = true;
        }
        return f;
    };
    for (;;) {
        switch (phase_) {
            case Phase::RequestLine:
            case Phase::Headers:
            case Phase::Trailers:
            case Phase::ChunkSize: {
                const bool in_head = phase_ != Phase::ChunkSize;
                const size_t line_cap = in_head ? limits_.max_line_bytes : kMaxChunkLine;
                const size_t nl = in.find('\n', pos_);
                const size_t len = (nl == std::string_view::npos ? in.size() : nl + 1) - pos_;
                if (in_head && head_bytes_ + len > limits_.max_head_bytes)
                    return refuse(431, "the request head is larger than " +
                                           std::to_string(limits_.max_head_bytes) + " bytes");
                if (len > line_cap) {
                    if (phase_ == Phase::RequestLine)
                        return refuse(414, "the request target is longer than " +
                                               std::to_string(line_cap) + " bytes");
                    if (in_head)
                        return refuse(431, "a header line is longer than " +
                                               std::to_string(line_cap) + " bytes");
                    return refuse(400, "a chunk size line of the body is too long");
                }
                if (!in_head && pos_ - body_start_ > limits_.max_body_bytes + kMaxChunkOverhead)
                    return refuse(413, too_large());
                if (nl == std::string_view::npos) return need_more();
                if (len < 2 || in[nl - 1] != '\r')
                    return refuse(400, "a line of the request does not end with CRLF");
                const std::string_view line = in.substr(pos_, len - 2);
                pos_ = nl + 1;
                if (in_head) head_bytes_ += len;
                bool ok = true;
                if (phase_ == Phase::RequestLine) {
                    if (line.empty()) return refuse(400, "the request line is empty");
                    ok = request_line(line, f);
                    phase_ = Phase::Headers;
                } else if (phase_ == Phase::Headers) {
                    ok = line.empty() ? head_done(f) : header_line(line, f);
                } else if (phase_ == Phase::Trailers) {
                    if (line.empty()) phase_ = Phase::Done;  // trailers are dropped
                } else {
                    ok = chunk_size(line, f);
                }
                if (!ok) return f;
                break;
            }
            case Phase::Body:
                if (in.size() - body_start_ < body_length_) return need_more();
                body_.assign(in.substr(body_start_, static_cast<size_t>(body_length_)));
                pos_ = body_start_ + static_cast<size_t>(body_length_);
                phase_ = Phase::Done;
                break;
            case Phase::ChunkData: {
                const size_t n = static_cast<size_t>(
                    std::min<uint64_t>(chunk_left_, static_cast<uint64_t>(in.size() - pos_)));
                body_.append(in.substr(pos_, n));
                pos_ += n;
                chunk_left_ -= n;
                if (chunk_left_ > 0) return need_more();
                phase_ = Phase::ChunkEnd;
                break;
            }
            case Phase::ChunkEnd:
                if (in.size() - pos_ < 2) return need_more();
                if (in.substr(pos_, 2) != "\r\n")
                    return refuse(400, "a chunk of the body does not end with CRLF");
                pos_ += 2;
                phase_ = Phase::ChunkSize;
                break;
            case Phase::Done:
                consumed_ = pos_;
                f.state = Framing::State::Complete;
                return f;
        }
    }
}

std::string RequestFramer::take_request() {
    std::string out = std::move(head_);
    if (chunked_ || !content_length_.empty())
        out += "Content-Length: " + std::to_string(body_.size()) + "\r\n";
    out += "\r\n";
    out += body_;
    body_.clear();
    return out;
}

}  // namespace dwell::server
