// The body of POST /v1/completions and /v1/chat/completions, read and
// checked: a field of the wrong type or out of range is a RequestError
// naming it, which the server answers with 400 and an OpenAI-style body.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/text/chat_template.hpp"

namespace dwell {
class Tokenizer;
}

namespace dwell::server {

class RequestError : public std::runtime_error {
public:
    RequestError(int status, const std::string& message, std::string param = "",
                 std::string type = "invalid_request_error", std::string code = "")
        : std::runtime_error(message),
          status_(status),
          param_(std::move(param)),
          type_(std::move(type)),
          code_(std::move(code)) {}
    int status() const { return status_; }
    const std::string& param() const { return param_; }
    const std::string& type() const { return type_; }
    const std::string& code() const { return code_; }  // OpenAI's error code, or ""

private:
    int status_;
    std::string param_;
    std::string type_;
    std::string code_;
};

struct CompletionRequest {
    bool chat = false;
    std::string prompt;                 // completions
    std::vector<ChatMessage> messages;  // chat completions
    // The tool definitions as JSON text (keys in the client's order), for
    // the chat template; "" when the request has none.
    std::string tools;
    int32_t max_tokens = 0;  // 0: the server's default
    float temperature = 1.0f;
    float top_p = 1.0f;
    std::optional<uint64_t> seed;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
};

// Limits on what one request may hold, beyond the body size the HTTP
// layer caps (ServerOptions::max_body_bytes); each is a 400 naming it.
inline constexpr int kMaxJsonDepth = 32;      // nesting of arrays and objects
inline constexpr size_t kMaxMessages = 4096;  // messages of a chat request
inline constexpr size_t kMaxStopStrings = 4;  // as OpenAI's API
inline constexpr size_t kMaxStopBytes = 256;  // bytes in one stop string
inline constexpr size_t kMaxTools = 128;      // tool definitions of a request (as OpenAI's API)
inline constexpr size_t kMaxToolCalls = 64;   // tool calls of one message
// Keys of one JSON object: the body is read keeping each object's keys in
// order (the chat template prints tools as the client wrote them), and an
// ordered object finds a key by scanning, so a body of one huge object
// would cost quadratic time.
inline constexpr size_t kMaxObjectKeys = 256;

// Throws RequestError. max_tokens_limit caps max_tokens.
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body, bool chat,
                                           int32_t max_tokens_limit);

// The body as received: parses the JSON (400 when it is not valid JSON,
// nests deeper than kMaxJsonDepth or has an object of more than
// kMaxObjectKeys keys, refused while parsing), then
// parse_completion_request().
CompletionRequest parse_completion_body(std::string_view body, bool chat, int32_t max_tokens_limit);

// {"error": {"message", "type", "param", "code"}} (param and code null when empty)
nlohmann::json error_body(const std::string& message, const std::string& type,
                          const std::string& param = "", const std::string& code = "");

// The most bytes of text one token of `tok` can stand for (its longest
// piece, control and user-defined tokens included), or 0 when there is no
// such bound: a vocabulary without a token for every byte folds a run of
// unknown characters into one token.
size_t max_text_bytes_per_token(const Tokenizer& tok);

// The fewest tokens a text of `bytes` bytes can encode to (plus a BOS when
// `bos`), so that a prompt longer than a context can be refused without
// tokenizing it; 0 when max_bytes_per_token is 0 (no bound).
int64_t min_prompt_tokens(size_t bytes, size_t max_bytes_per_token, bool bos);

}  // namespace dwell::server
