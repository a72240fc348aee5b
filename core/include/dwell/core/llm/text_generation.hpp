// Text in, text out, for hosts that speak in strings (the server, chat):
// generation over a session with stop strings, a token limit and a
// deadline, streaming text deltas that never contain any part of a stop
// string (text that might begin one is held back until it cannot).
//
// Thread-safety: as the session's (one thread; Session::cancel() from any).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/llm/generate.hpp"
#include "dwell/core/llm/sampler.hpp"

namespace dwell {

class Session;

struct TextRequest {
    std::vector<int32_t> prompt;  // may be empty to continue from the session's logits
    int32_t max_tokens = 128;
    SamplerParams sampling;
    std::vector<std::string> stop;
    // Token ids that end the reply like EOS (a chat template's end-of-turn
    // tokens, which decode to no text); not part of the text.
    std::vector<int32_t> stop_tokens;
    std::optional<std::chrono::steady_clock::time_point> deadline;
};

enum class FinishReason { Stop, Length, Deadline, Disconnected };

const char* finish_reason_name(FinishReason r);  // "stop", "length", ...

struct TextResult {
    std::string text;  // without the stop string
    int32_t prompt_tokens = 0;
    int32_t completion_tokens = 0;
    FinishReason finish = FinishReason::Stop;
    GenerationStats stats;
    // The last sampled token, not yet in the session's cache (generate()'s
    // contract), or -1 (end of text). Feed it first to continue.
    int32_t pending_token = -1;
};

// on_delta returns false when nobody listens any more (the generation then
// ends with FinishReason::Disconnected). Throws what Session::decode throws
// (DWELL_ERR_CANCELLED after Session::cancel()).
DWELL_CORE_API TextResult
generate_text(Session& session, const TextRequest& request,
              const std::function<bool(std::string_view delta)>& on_delta);

// How many bytes at the end of `text` could be the start of a stop string.
size_t stop_prefix_length(std::string_view text, const std::vector<std::string>& stop);

}  // namespace dwell
