// A chat template bound to a model's vocabulary: renders a conversation and
// turns the text into token ids, mapping each special-token text the
// template emits ("<|im_start|>", "</s>", ...) to its id — sentencepiece
// never matches control tokens inside text — and knows which ids end the
// assistant's turn.
//
// Thread-safety: immutable after construction; all members are const.
// Ownership: keeps a reference to the tokenizer (the Model must outlive it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/text/chat_template.hpp"

namespace dwell {

class Tokenizer;

class DWELL_CORE_API ChatPrompt {
public:
    ChatPrompt(const Tokenizer& tokenizer, ChatTemplate chat_template);

    const ChatTemplate& chat_template() const { return template_; }

    // BOS, then the rendered conversation (with `tools`, the JSON text of
    // the tool definitions, as ChatTemplate::render takes it) as ids. Throws
    // (invalid argument) when a message or the tools contain one of the
    // template's control texts (it would forge turns), naming the message,
    // its field and the text.
    std::vector<int32_t> encode(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, std::string_view tools = {}) const;
    // The first text holding one of ChatTemplate::control_texts() (token of
    // the vocabulary or not; for a model's Jinja template also every control
    // token's text of the vocabulary) and that text; check_contents() throws
    // it. Every text a template may print is looked at: each message's
    // content, reasoning_content, tool_call_id, name and tool calls, and the
    // tools; JSON texts (arguments, tools) as the template prints them
    // (parsed, then `tojson`), so an escape such as \u003c hides nothing.
    struct ControlText {
        static constexpr size_t kTools = SIZE_MAX;  // `message` when the tools hold it
        size_t message = 0;
        std::string
            field;  // "content", "reasoning_content", "tool_calls[0].function.arguments", ...
        std::string text;
    };
    std::optional<ControlText> find_control_text(const std::vector<ChatMessage>& messages,
                                                 std::string_view tools = {}) const;
    void check_contents(const std::vector<ChatMessage>& messages,
                        std::string_view tools = {}) const;
    // Text with special-token texts in it -> ids (no BOS).
    std::vector<int32_t> encode_text(const std::string& text) const;

    // Ids that end the assistant's turn (the template's stop strings that are
    // single tokens of the vocabulary, and EOS for a model's Jinja template),
    // for TextRequest::stop_tokens.
    const std::vector<int32_t>& stop_tokens() const { return stop_tokens_; }

private:
    const Tokenizer& tokenizer_;
    ChatTemplate template_;
    std::vector<std::pair<std::string, int32_t>> specials_;  // longest text first
    std::vector<int32_t> stop_tokens_;
    std::vector<std::string> control_texts_;
};

}  // namespace dwell
