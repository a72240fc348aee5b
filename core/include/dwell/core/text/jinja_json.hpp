// JSON text as Jinja values: how the tools and the tool-call arguments of a
// chat request (JSON texts, as OpenAI's API carries them) reach a chat
// template, as Python's json.loads() would give them to Jinja2: objects keep
// their keys in the order written (a repeated key keeps its first place and
// takes the last value), integers stay integers and other numbers are floats.
//
// The text is outside input: nesting deeper than kMaxJsonDepth, an integer
// no int64_t holds, a number no double holds and invalid JSON are each one
// dwell::Error line (DWELL_ERR_INVALID_ARGUMENT) naming `what` and the place.
//
// Thread-safety: pure function.
#pragma once

#include <string_view>

#include "dwell/core/text/jinja.hpp"

namespace dwell::jinja {

inline constexpr int kMaxJsonDepth = 64;

// `what` names the text in errors, e.g. "message 2 tool call 0 arguments".
Value parse_json(std::string_view text, std::string_view what);

}  // namespace dwell::jinja
