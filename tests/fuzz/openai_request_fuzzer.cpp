// libFuzzer target: a request body of POST /v1/completions and
// /v1/chat/completions, parsed as the server does (JSON with the nesting
// limit, then every field's checks). The first byte picks the endpoint;
// the rest is the body. RequestError (a 400 for the client) is the expected
// outcome for a bad body; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "openai_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const bool chat = (data[0] & 1) != 0;
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        const dwell::server::CompletionRequest r =
            dwell::server::parse_completion_body(body, chat, 4096);
        // What the checks promise the server.
        if (r.max_tokens < 0 || r.max_tokens > 4096) __builtin_trap();
        if (r.stop.size() > dwell::server::kMaxStopStrings) __builtin_trap();
        if (r.messages.size() > dwell::server::kMaxMessages) __builtin_trap();
        if (chat && r.messages.empty()) __builtin_trap();
        if (!(r.temperature >= 0 && r.temperature <= 2) || !(r.top_p >= 0 && r.top_p <= 1))
            __builtin_trap();
    } catch (const dwell::server::RequestError& e) {
        if (e.status() != 400) __builtin_trap();
    }
    return 0;
}
