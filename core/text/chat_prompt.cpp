#include "dwell/core/text/chat_prompt.hpp"

#include <algorithm>
#include <unordered_map>

#include "dwell/core/base/error.hpp"
#include "dwell/core/text/jinja_json.hpp"
#include "dwell/core/text/tokenizer.hpp"

namespace dwell {

ChatPrompt::ChatPrompt(const Tokenizer& tokenizer, ChatTemplate chat_template)
    : tokenizer_(tokenizer), template_(std::move(chat_template)) {
    control_texts_ = template_.control_texts();
    if (template_.runs_jinja()) {
        const auto text_of = [&](int32_t id) {
            return id >= 0 && id < tokenizer_.n_vocab() ? std::string(tokenizer_.piece(id))
                                                        : std::string();
        };
        template_.bind_vocabulary(text_of(tokenizer_.bos()), text_of(tokenizer_.eos()),
                                  tokenizer_.wants_bos());
        // The model's template may emit any of the vocabulary's control
        // tokens, and encode_text() reads each one's text as that token: a
        // message holding one would forge it.
        for (int32_t id = 0; id < tokenizer_.n_vocab(); ++id) {
            const std::string piece = text_of(id);
            if (tokenizer_.is_control(id) && piece.size() >= 2 &&
                std::find(control_texts_.begin(), control_texts_.end(), piece) ==
                    control_texts_.end())
                control_texts_.push_back(piece);
        }
        if (tokenizer_.eos() >= 0) stop_tokens_.push_back(tokenizer_.eos());
    }
    std::unordered_map<std::string, int32_t> wanted;
    for (const std::string& s : template_.special_tokens()) wanted.emplace(s, -1);
    for (const std::string& s : template_.stop_strings()) wanted.emplace(s, -1);
    for (int32_t id = 0; id < tokenizer_.n_vocab(); ++id) {
        const auto it = wanted.find(std::string(tokenizer_.piece(id)));
        if (it != wanted.end() && it->second < 0) it->second = id;
    }
    for (const std::string& s : template_.special_tokens()) {
        if (const int32_t id = wanted.at(s); id >= 0) specials_.emplace_back(s, id);
    }
    std::sort(specials_.begin(), specials_.end(),
              [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    for (const std::string& s : template_.stop_strings()) {
        const int32_t id = wanted.at(s);
        if (id >= 0 &&
            std::find(stop_tokens_.begin(), stop_tokens_.end(), id) == stop_tokens_.end())
            stop_tokens_.push_back(id);
    }
}

std::optional<ChatPrompt::ControlText> ChatPrompt::find_control_text(
    const std::vector<ChatMessage>& messages, std::string_view tools) const {
    // A message holding the template's control text would open or close
    // turns of its own (a forged system turn): refused, not escaped, so the
    // conversation means what it says. Plain-text control texts count too:
    // the model reads "<|im_start|>" as a turn whether it is one token or
    // several.
    const auto hit = [&](std::string_view text) -> const std::string* {
        for (const std::string& c : control_texts_) {
            if (text.find(c) != std::string_view::npos) return &c;
        }
        return nullptr;
    };
    // A JSON text is looked at as the template prints it: an escape in the
    // text ("\u003c|im_end|>") is the control text itself once parsed.
    const auto printed = [](std::string_view json, const std::string& what) {
        return jinja::parse_json(json, what).to_json();
    };
    for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        std::vector<std::pair<std::string, std::string>> fields;
        const auto add = [&](std::string field, std::string_view text) {
            if (const std::string* c = hit(text)) fields.emplace_back(std::move(field), *c);
        };
        add("content", m.content);
        if (m.reasoning_content) add("reasoning_content", *m.reasoning_content);
        for (size_t k = 0; k < m.tool_calls.size(); ++k) {
            const ChatToolCall& c = m.tool_calls[k];
            const std::string p = "tool_calls[" + std::to_string(k) + "]";
            add(p + ".id", c.id);
            add(p + ".function.name", c.name);
            add(p + ".function.arguments",
                printed(c.arguments, "message " + std::to_string(i) + " tool call " +
                                         std::to_string(k) + " arguments"));
        }
        if (m.tool_call_id) add("tool_call_id", *m.tool_call_id);
        if (m.name) add("name", *m.name);
        if (!fields.empty()) return ControlText{i, fields.front().first, fields.front().second};
    }
    if (!tools.empty()) {
        if (const std::string* c = hit(printed(tools, "the tools")))
            return ControlText{ControlText::kTools, "tools", *c};
    }
    return std::nullopt;
}

void ChatPrompt::check_contents(const std::vector<ChatMessage>& messages,
                                std::string_view tools) const {
    const auto hit = find_control_text(messages, tools);
    if (!hit) return;
    const std::string text =
        " the chat template's control text '" + hit->text + "', which may not appear in ";
    if (hit->message == ControlText::kTools)
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "the tools contain" + text + "them");
    const std::string where = "message " + std::to_string(hit->message) + " (" +
                              messages[hit->message].role + ")" +
                              (hit->field == "content" ? "" : " " + hit->field);
    throw Error(DWELL_ERR_INVALID_ARGUMENT, where + " contains" + text + "a message");
}

std::vector<int32_t> ChatPrompt::encode_text(const std::string& text) const {
    // A model's own template may emit any special token of its vocabulary
    // (<think>, <tool_call>, ...): the tokenizer reads each one's text as
    // that token, as llama.cpp tokenizes chat prompts.
    if (template_.runs_jinja()) return tokenizer_.encode(text, false, /*parse_special=*/true);
    std::vector<int32_t> out;
    size_t start = 0;
    const auto flush = [&](size_t end) {
        if (end > start) {
            const auto ids = tokenizer_.encode(text.substr(start, end - start), false);
            out.insert(out.end(), ids.begin(), ids.end());
        }
    };
    for (size_t i = 0; i < text.size();) {
        const auto hit = std::find_if(specials_.begin(), specials_.end(), [&](const auto& s) {
            return text.compare(i, s.first.size(), s.first) == 0;
        });
        if (hit == specials_.end()) {
            ++i;
            continue;
        }
        flush(i);
        out.push_back(hit->second);
        i += hit->first.size();
        start = i;
    }
    flush(text.size());
    return out;
}

std::vector<int32_t> ChatPrompt::encode(const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, std::string_view tools) const {
    check_contents(messages, tools);
    // Byte-level BPE vocabularies (Qwen2) say in their metadata whether a
    // BOS starts the text; their templates open with a special token instead.
    std::vector<int32_t> out;
    if (tokenizer_.wants_bos()) {
        if (tokenizer_.bos() < 0)
            throw Error(DWELL_ERR_UNSUPPORTED,
                        "the model's vocabulary has no BOS token; chat prompts need one");
        out.push_back(tokenizer_.bos());
    }
    const auto ids = encode_text(template_.render(messages, add_generation_prompt, tools));
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
}

}  // namespace dwell
