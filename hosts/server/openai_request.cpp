#include "openai_request.hpp"

#include <bitset>

#include "dwell/core/text/tokenizer.hpp"

namespace dwell::server {

// Read with each object's keys in the client's order: tools and tool-call
// arguments reach the chat template, which prints them as written.
using json = nlohmann::ordered_json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& what) {
    throw RequestError(400, "'" + param + "' " + what, param);
}

// JSON text read under the body's bounds, refused while parsing so that a
// text of nested brackets never becomes a deep tree; a RequestError whose
// message continues "the body ..." or "'param' ...": "is not valid JSON: ...".
json parse_bounded(std::string_view text) {
    std::vector<size_t> keys;  // keys so far of each open object
    const json::parser_callback_t bounds = [&keys](int depth, json::parse_event_t event, json&) {
        if (depth >= kMaxJsonDepth && (event == json::parse_event_t::object_start ||
                                       event == json::parse_event_t::array_start))
            throw RequestError(400, "nests arrays and objects deeper than " +
                                        std::to_string(kMaxJsonDepth) + " levels");
        if (event == json::parse_event_t::object_start) keys.push_back(0);
        if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
        if (event == json::parse_event_t::key && !keys.empty() && ++keys.back() > kMaxObjectKeys)
            throw RequestError(
                400, "has an object of more than " + std::to_string(kMaxObjectKeys) + " keys");
        return true;
    };
    try {
        return json::parse(text, bounds);
    } catch (const json::exception& e) {
        // parse_error, and out_of_range for a number no double holds (1e400).
        // Without the parser's "[json.exception.parse_error.101] " tag.
        std::string what = e.what();
        if (what.starts_with("[json.exception.")) {
            const size_t end = what.find("] ");
            if (end != std::string::npos) what.erase(0, end + 2);
        }
        throw RequestError(400, "is not valid JSON: " + what);
    }
}

float number_in(const json& body, const char* key, float lo, float hi, float fallback) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) return fallback;
    if (!it->is_number()) bad(key, "must be a number");
    const double v = it->get<double>();
    if (v < lo || v > hi)
        bad(key, "must be between " + json(lo).dump() + " and " + json(hi).dump());
    return static_cast<float>(v);
}

std::string text_content(const json& content, const std::string& param) {
    if (content.is_string()) return content.get<std::string>();
    // [{"type": "text", "text": "..."}]
    if (content.is_array()) {
        std::string out;
        for (const json& part : content) {
            if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
                !part.contains("text") || !part["text"].is_string())
                bad(param,
                    "parts must be {\"type\": \"text\", \"text\": \"...\"} (only text is "
                    "supported)");
            out += part["text"].get<std::string>();
        }
        return out;
    }
    bad(param, "must be a string or an array of text parts");
}

// Fields of OpenAI's API that dwell does not implement yet: a request that
// uses one is refused naming it rather than answered as if it were not
// there. A field at its neutral value (null, false, 0, [], {}, "none",
// {"type": "text"}) asks for nothing and passes.
void refuse_unsupported(const json& body) {
    const auto neutral = [](const char* key, const json& v) {
        const std::string k = key;
        if (v.is_null()) return true;
        if (v.is_boolean()) return !v.get<bool>();
        if (k == "best_of") return v.is_number_integer() && v.get<int64_t>() == 1;
        if (v.is_number()) return v.get<double>() == 0.0;
        if (v.is_array() || v.is_object()) {
            if (k == "response_format") return v.is_object() && v.value("type", json()) == "text";
            if (k == "modalities") return v == json::array({"text"});
            return v.empty();
        }
        if (v.is_string()) {
            if (k == "tool_choice" || k == "function_call") return v.get<std::string>() == "none";
            if (k == "suffix") return v.get<std::string>().empty();
        }
        return false;
    };
    for (const char* key :
         {"response_format", "tool_choice", "functions", "function_call", "logprobs",
          "top_logprobs", "logit_bias", "presence_penalty", "frequency_penalty", "suffix",
          "best_of", "echo", "audio", "modalities", "prediction"}) {
        const auto it = body.find(key);
        if (it != body.end() && !neutral(key, *it))
            throw RequestError(400, std::string("'") + key + "' is not supported by dwell yet", key,
                               "invalid_request_error", "unsupported_parameter");
    }
}

const json* field(const json& object, const char* key) {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::optional<std::string> optional_string(const json& m, const char* key, const std::string& p) {
    const json* v = field(m, key);
    if (!v) return std::nullopt;
    if (!v->is_string()) bad(p + "." + key, "must be a string");
    return v->get<std::string>();
}

// A JSON object given as its text (OpenAI's function.arguments), read with
// the body's bounds; "" is a call without arguments.
std::string arguments_text(const json& arguments, const std::string& param) {
    if (arguments.is_object()) return arguments.dump();  // some clients send the object itself
    if (!arguments.is_string()) bad(param, "must be a string holding a JSON object");
    const std::string text = arguments.get<std::string>();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) return "{}";
    json parsed;
    try {
        parsed = parse_bounded(text);
    } catch (const RequestError& e) {
        bad(param, std::string("must hold a JSON object: its text ") + e.what());
    }
    if (!parsed.is_object())
        bad(param, "must hold a JSON object, not " + std::string(parsed.type_name()));
    return text;
}

std::vector<ChatToolCall> tool_calls(const json& calls, const std::string& p) {
    if (!calls.is_array()) bad(p, "must be an array");
    if (calls.size() > kMaxToolCalls)
        bad(p, "holds " + std::to_string(calls.size()) + " tool calls, more than the " +
                   std::to_string(kMaxToolCalls) + " a message may hold");
    std::vector<ChatToolCall> out;
    for (size_t k = 0; k < calls.size(); ++k) {
        const json& c = calls[k];
        const std::string q = p + "[" + std::to_string(k) + "]";
        if (!c.is_object()) bad(q, "must be an object");
        if (const json* type = field(c, "type"); type && *type != "function")
            bad(q + ".type", "must be \"function\"");
        ChatToolCall call;
        call.id = optional_string(c, "id", q).value_or("");
        const json* f = field(c, "function");
        if (!f || !f->is_object())
            bad(q + ".function", "must be an object with name and arguments");
        const auto name = optional_string(*f, "name", q + ".function");
        if (!name || name->empty()) bad(q + ".function.name", "must be a non-empty string");
        call.name = *name;
        const json* args = field(*f, "arguments");
        call.arguments = args ? arguments_text(*args, q + ".function.arguments") : "{}";
        out.push_back(std::move(call));
    }
    return out;
}

ChatMessage chat_message(const json& m, const std::string& p) {
    if (!m.is_object()) bad(p, "must be an object");
    if (!m.contains("role") || !m["role"].is_string()) bad(p + ".role", "must be a string");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "developer" &&
        role != "tool")
        bad(p + ".role", "must be system, developer, user, assistant or tool, not '" + role + "'");
    ChatMessage out{role == "developer" ? "system" : role, ""};
    const json* calls = field(m, "tool_calls");
    if (calls && role != "assistant") bad(p + ".tool_calls", "is for assistant messages only");
    if (calls) out.tool_calls = tool_calls(*calls, p + ".tool_calls");
    // An assistant's message that calls tools may have no text.
    if (!m.contains("content")) {
        if (out.tool_calls.empty()) bad(p + ".content", "is required");
    } else if (!(m["content"].is_null() && !out.tool_calls.empty())) {
        out.content = text_content(m["content"], p + ".content");
    }
    out.reasoning_content = optional_string(m, "reasoning_content", p);
    if (out.reasoning_content && role != "assistant")
        bad(p + ".reasoning_content", "is for assistant messages only");
    out.tool_call_id = optional_string(m, "tool_call_id", p);
    if (out.tool_call_id && role != "tool") bad(p + ".tool_call_id", "is for tool messages only");
    out.name = optional_string(m, "name", p);
    return out;
}

// OpenAI's tools: [{"type": "function", "function": {"name", ...}}], as
// JSON text for the chat template ("" for none; [] asks for none).
std::string tools_text(const json& body) {
    const json* tools = field(body, "tools");
    if (!tools) return "";
    if (!tools->is_array()) bad("tools", "must be an array");
    if (tools->size() > kMaxTools)
        bad("tools", "holds " + std::to_string(tools->size()) + " tools, more than the " +
                         std::to_string(kMaxTools) + " a request may hold");
    for (size_t k = 0; k < tools->size(); ++k) {
        const json& t = (*tools)[k];
        const std::string q = "tools[" + std::to_string(k) + "]";
        if (!t.is_object() || t.value("type", json()) != "function")
            bad(q, "must be {\"type\": \"function\", \"function\": {...}}");
        const json* f = field(t, "function");
        if (!f || !f->is_object()) bad(q + ".function", "must be an object");
        const auto name = optional_string(*f, "name", q + ".function");
        if (!name || name->empty()) bad(q + ".function.name", "must be a non-empty string");
    }
    return tools->empty() ? "" : tools->dump();
}

}  // namespace

nlohmann::json error_body(const std::string& message, const std::string& type,
                          const std::string& param, const std::string& code) {
    using plain = nlohmann::json;
    return plain{{"error",
                  {{"message", message},
                   {"type", type},
                   {"param", param.empty() ? plain(nullptr) : plain(param)},
                   {"code", code.empty() ? plain(nullptr) : plain(code)}}}};
}

size_t max_text_bytes_per_token(const Tokenizer& tok) {
    size_t longest = 0;
    std::bitset<256> single_bytes;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
        const std::string bytes = tok.token_bytes(id);
        if (bytes.size() == 1) single_bytes.set(static_cast<unsigned char>(bytes[0]));
        longest = std::max({longest, bytes.size(), tok.piece(id).size()});
    }
    return single_bytes.all() ? std::max<size_t>(longest, 1) : 0;
}

int64_t min_prompt_tokens(size_t bytes, size_t max_bytes_per_token, bool bos) {
    if (max_bytes_per_token == 0) return 0;
    return static_cast<int64_t>((bytes + max_bytes_per_token - 1) / max_bytes_per_token) +
           (bos ? 1 : 0);
}

CompletionRequest parse_completion_request(const json& body, bool chat, int32_t max_tokens_limit) {
    if (!body.is_object()) throw RequestError(400, "the request body must be a JSON object");
    CompletionRequest r;
    r.chat = chat;
    if (chat) {
        const auto it = body.find("messages");
        if (it == body.end() || !it->is_array() || it->empty())
            bad("messages", "must be a non-empty array");
        if (it->size() > kMaxMessages)
            bad("messages", "holds " + std::to_string(it->size()) + " messages, more than the " +
                                std::to_string(kMaxMessages) + " a request may hold");
        for (size_t i = 0; i < it->size(); ++i)
            r.messages.push_back(chat_message((*it)[i], "messages[" + std::to_string(i) + "]"));
        r.tools = tools_text(body);
    } else {
        if (const json* tools = field(body, "tools");
            tools && !(tools->is_array() && tools->empty()))
            bad("tools", "are for chat completions (/v1/chat/completions) only");
        const auto it = body.find("prompt");
        if (it == body.end()) bad("prompt", "is required");
        if (it->is_string()) {
            r.prompt = it->get<std::string>();
        } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
            r.prompt = (*it)[0].get<std::string>();
        } else {
            bad("prompt", "must be a string (or an array of one string)");
        }
    }
    const char* max_key =
        body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (const auto it = body.find(max_key); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer()) bad(max_key, "must be an integer");
        const int64_t v = it->get<int64_t>();
        if (v < 1 || v > max_tokens_limit)
            bad(max_key, "must be between 1 and " + std::to_string(max_tokens_limit));
        r.max_tokens = static_cast<int32_t>(v);
    }
    r.temperature = number_in(body, "temperature", 0.0f, 2.0f, 1.0f);
    r.top_p = number_in(body, "top_p", 0.0f, 1.0f, 1.0f);
    if (r.top_p == 0.0f) {
        // OpenAI accepts 0: the smallest nucleus, the most likely token alone.
        r.temperature = 0.0f;
        r.top_p = 1.0f;
    }
    for (const char* key : {"presence_penalty", "frequency_penalty"})
        (void)number_in(body, key, -2.0f, 2.0f, 0.0f);  // range first, then refuse_unsupported
    refuse_unsupported(body);
    if (const auto it = body.find("seed"); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer()) bad("seed", "must be an integer");
        r.seed = static_cast<uint64_t>(it->get<int64_t>());
    }
    if (const auto it = body.find("n"); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer() || it->get<int64_t>() != 1)
            bad("n", "must be 1 (one choice per request)");
    }
    if (const auto it = body.find("stop"); it != body.end() && !it->is_null()) {
        if (it->is_string()) {
            r.stop.push_back(it->get<std::string>());
        } else if (it->is_array() && it->size() <= kMaxStopStrings) {
            for (const json& s : *it) {
                if (!s.is_string() || s.get<std::string>().empty())
                    bad("stop", "must hold non-empty strings");
                r.stop.push_back(s.get<std::string>());
            }
        } else {
            bad("stop", "must be a string or an array of up to " + std::to_string(kMaxStopStrings) +
                            " strings");
        }
        for (const std::string& s : r.stop) {
            if (s.size() > kMaxStopBytes)
                bad("stop", "strings must be at most " + std::to_string(kMaxStopBytes) +
                                " bytes long, not " + std::to_string(s.size()));
        }
    }
    if (const auto it = body.find("stream"); it != body.end() && !it->is_null()) {
        if (!it->is_boolean()) bad("stream", "must be true or false");
        r.stream = it->get<bool>();
    }
    if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) bad("stream_options", "must be an object");
        if (const auto u = it->find("include_usage"); u != it->end() && !u->is_null()) {
            if (!u->is_boolean()) bad("stream_options.include_usage", "must be true or false");
            r.include_usage = u->get<bool>();
        }
    }
    return r;
}

CompletionRequest parse_completion_body(std::string_view body, bool chat,
                                        int32_t max_tokens_limit) {
    json parsed;
    try {
        parsed = parse_bounded(body);
    } catch (const RequestError& e) {
        throw RequestError(400, std::string("the body ") + e.what());
    }
    return parse_completion_request(parsed, chat, max_tokens_limit);
}

}  // namespace dwell::server
