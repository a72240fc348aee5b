// Each family's prompt format, written from its documentation (the sources
// are cited in tests/core/text/chat_template_test.cpp next to the expected
// renderings), and the markers that tell the families' Jinja templates apart.
#include "dwell/core/text/chat_template.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <string>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/text/jinja.hpp"
#include "dwell/core/text/jinja_json.hpp"

namespace dwell {
namespace {

// Each family's canonical name and its aliases (compared in lower case),
// indexed by the family's position in ChatTemplate::Family.
struct FamilyNames {
    std::string_view canonical;
    std::string_view aliases[6];  // unused entries are empty
};
constexpr FamilyNames kNames[] = {
    {"llama2", {"llama-2", "llama2-chat"}},
    {"llama3", {"llama-3", "llama3.1", "llama-3.1", "llama3.2", "llama-3.2"}},
    {"chatml", {"im_start", "qwen", "qwen2"}},
    {"mistral", {"mistral-v1", "mistral-v2", "mixtral"}},
    {"mistral-v3", {"mistral-v0.3"}},
    {"gemma", {"gemma2", "gemma-2", "gemma3", "gemma-3"}},
    {"phi3", {"phi-3", "phi3.5", "phi-3.5", "phi4-mini", "phi-4-mini"}},
    {"zephyr", {"tinyllama"}},
};
constexpr size_t kFamilies = std::size(kNames);

std::string lowercase(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string joined_known_names() {
    std::string out;
    for (size_t i = 0; i < kFamilies; ++i) {
        if (i) out += ", ";
        out += kNames[i].canonical;
    }
    return out;
}

// The start of a Jinja text for an error message: one line, quotes kept
// (templates are full of them; printable_name would escape every one), cut
// at a UTF-8 character boundary.
std::string excerpt(std::string_view s, size_t max_bytes = 48) {
    size_t n = std::min(s.size(), max_bytes);
    while (n < s.size() && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    std::string out;
    for (char c : s.substr(0, n)) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '\n') {
            out += "\\n";
        } else if (u < 0x20 || u == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out += c;
        }
    }
    if (n < s.size()) out += "...";
    return out;
}

bool contains(std::string_view text, std::string_view marker) {
    return text.find(marker) != std::string_view::npos;
}

// The official Llama 2, Llama 3 and Gemma templates strip each message;
// ChatML, Phi-3 and Mistral V1 keep it as written.
std::string_view trimmed(std::string_view s) {
    constexpr std::string_view kSpace = " \t\n\r\f\v";
    const size_t first = s.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return {};
    return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

enum class Role { System, User, Assistant };

Role role_of(const ChatMessage& m) {
    if (m.role == "system") return Role::System;
    if (m.role == "user") return Role::User;
    if (m.role == "assistant") return Role::Assistant;
    throw Error(DWELL_ERR_INVALID_ARGUMENT, "chat message role '" + printable_name(m.role) +
                                                "' is not one of system, user, assistant");
}

// A model's own template may also know tool results: "tool", as OpenAI's
// API and most templates name them, and "ipython", Llama 3.x's name.
void check_jinja_role(const ChatMessage& m) {
    if (m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool" ||
        m.role == "ipython")
        return;
    throw Error(DWELL_ERR_INVALID_ARGUMENT,
                "chat message role '" + printable_name(m.role) +
                    "' is not one of system, user, assistant, tool, ipython");
}

bool has_tool_parts(const std::vector<ChatMessage>& messages, std::string_view tools) {
    if (!trimmed(tools).empty()) return true;
    return std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) {
        return !m.tool_calls.empty() || m.role == "tool" || m.role == "ipython";
    });
}

// The message as the template sees it: the keys a client's message has,
// in the order OpenAI's API writes them.
jinja::Value message_value(const ChatMessage& m, size_t index) {
    jinja::Object o{{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}};
    if (m.reasoning_content)
        o.emplace_back("reasoning_content", jinja::Value(*m.reasoning_content));
    if (!m.tool_calls.empty()) {
        jinja::Array calls;
        for (size_t i = 0; i < m.tool_calls.size(); ++i) {
            const ChatToolCall& c = m.tool_calls[i];
            jinja::Object call;
            call.reserve(3);
            call.emplace_back("type", jinja::Value("function"));
            if (!c.id.empty()) call.emplace_back("id", jinja::Value(c.id));
            const std::string what = "message " + std::to_string(index) + " tool call " +
                                     std::to_string(i) + " arguments";
            call.emplace_back(
                "function",
                jinja::Value(jinja::Object{{"name", jinja::Value(c.name)},
                                           {"arguments", jinja::parse_json(c.arguments, what)}}));
            calls.emplace_back(std::move(call));
        }
        o.emplace_back("tool_calls", jinja::Value(std::move(calls)));
    }
    if (m.tool_call_id) o.emplace_back("tool_call_id", jinja::Value(*m.tool_call_id));
    if (m.name) o.emplace_back("name", jinja::Value(*m.name));
    return jinja::Value(std::move(o));
}

// The by-pattern families' formats have no place for tools: refused, not
// silently dropped, so that a client never believes the model saw them.
void refuse_tool_parts(const std::vector<ChatMessage>& messages, std::string_view tools,
                       std::string_view family) {
    const std::string what_to_do =
        "; only a model's own Jinja template (tokenizer.chat_template, without "
        "--chat-template) renders them";
    if (!trimmed(tools).empty())
        throw Error(
            DWELL_ERR_INVALID_ARGUMENT,
            "the '" + std::string(family) + "' chat format has no place for tools" + what_to_do);
    for (size_t i = 0; i < messages.size(); ++i) {
        if (!messages[i].tool_calls.empty())
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        "message " + std::to_string(i) + " (" + printable_name(messages[i].role) +
                            ") has tool calls, which the '" + std::string(family) +
                            "' chat format has no place for" + what_to_do);
    }
}

// Families whose messages each get a turn of their own: header, content,
// terminator. The generation prompt is the assistant's header.
struct TurnFormat {
    std::string_view before_role;
    std::string_view after_role;
    std::string_view end_of_turn;
    bool trim;
};

std::string render_turns(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const TurnFormat& f) {
    std::string out;
    for (const ChatMessage& m : messages) {
        role_of(m);  // validates
        out.append(f.before_role).append(m.role).append(f.after_role);
        out.append(f.trim ? trimmed(m.content) : std::string_view(m.content));
        out.append(f.end_of_turn);
    }
    if (add_generation_prompt) out.append(f.before_role).append("assistant").append(f.after_role);
    return out;
}

// Families without a system turn keep system text until the next user
// message opens. A conversation that ends with system text and no user
// message after it still shows that text, in a user turn of its own.
class PendingSystem {
public:
    void add(std::string_view text) {
        if (!text_.empty()) text_ += "\n\n";
        text_ += text;
    }
    bool empty() const { return text_.empty(); }
    std::string take() { return std::exchange(text_, {}); }

private:
    std::string text_;
};

// Llama 2: "[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST] A </s><s>[INST] U2 [/INST]".
std::string render_llama2(const std::vector<ChatMessage>& messages) {
    std::string out;
    PendingSystem system;
    bool after_assistant = false;
    auto user = [&](std::string_view content) {
        if (after_assistant) out += "<s>";  // the first BOS is the tokenizer's
        out += "[INST] ";
        if (!system.empty()) out += "<<SYS>>\n" + system.take() + "\n<</SYS>>\n\n";
        out.append(trimmed(content)).append(" [/INST]");
        after_assistant = false;
    };
    for (const ChatMessage& m : messages) {
        switch (role_of(m)) {
            case Role::System:
                system.add(trimmed(m.content));
                break;
            case Role::User:
                user(m.content);
                break;
            case Role::Assistant:
                out.append(" ").append(trimmed(m.content)).append(" </s>");
                after_assistant = true;
                break;
        }
    }
    if (!system.empty()) user({});
    return out;
}

// Mistral's guide writes V1 as "<s> [INST] U [/INST] A</s> [INST] U2 [/INST]"
// and V3 as "<s>[INST] U[/INST] A</s>[INST] U2[/INST]"; the spaces after
// <s>, </s> and V3's control tokens [INST] and [/INST] are the leading-space
// prefix sentencepiece gives each separately encoded piece, which the
// tokenization rule in chat_template.hpp adds again, so they are not in the
// text: V1 "[INST] S\n\nU [/INST] A</s>[INST] U2 [/INST]", V3
// "[INST]S\n\nU[/INST]A</s>[INST]U2[/INST]". (V1's [INST] and [/INST] are
// plain text, so the space before A is in the same piece and stays.)
// mistral-common puts the system prompt before the first user message for V1
// and before the last for V3; dwell uses the first for both, so that a
// conversation's earlier turns render the same each time and their KV cache
// can be reused.
std::string render_mistral(const std::vector<ChatMessage>& messages, bool v3) {
    std::string out;
    PendingSystem system;
    auto user = [&](std::string_view content) {
        out += v3 ? "[INST]" : "[INST] ";
        if (!system.empty()) out += system.take() + "\n\n";
        out.append(content).append(v3 ? "[/INST]" : " [/INST]");
    };
    for (const ChatMessage& m : messages) {
        switch (role_of(m)) {
            case Role::System:
                system.add(m.content);
                break;
            case Role::User:
                user(m.content);
                break;
            case Role::Assistant:
                // V3's official template strips the answer; V1 keeps it.
                if (v3) {
                    out.append(trimmed(m.content)).append("</s>");
                } else {
                    out.append(" ").append(m.content).append("</s>");
                }
                break;
        }
    }
    if (!system.empty()) user({});
    return out;
}

// Gemma: no system role; the model's role is "model".
// "<start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n..."
std::string render_gemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
    std::string out;
    PendingSystem system;
    auto user = [&](std::string_view content) {
        out += "<start_of_turn>user\n";
        if (!system.empty()) out += system.take() + "\n\n";
        out.append(trimmed(content)).append("<end_of_turn>\n");
    };
    for (const ChatMessage& m : messages) {
        switch (role_of(m)) {
            case Role::System:
                system.add(m.content);
                break;
            case Role::User:
                user(m.content);
                break;
            case Role::Assistant:
                out.append("<start_of_turn>model\n")
                    .append(trimmed(m.content))
                    .append("<end_of_turn>\n");
                break;
        }
    }
    if (!system.empty()) user({});
    if (add_generation_prompt) out += "<start_of_turn>model\n";
    return out;
}

}  // namespace

ChatTemplate::ChatTemplate(Family family) : family_(family) {
    static_assert(static_cast<size_t>(Family::Zephyr) + 1 == kFamilies,
                  "kNames lists the families' canonical names in enum order");
    name_ = std::string(kNames[static_cast<size_t>(family)].canonical);
    switch (family) {
        case Family::Llama2:
            stop_strings_ = {"</s>"};
            special_tokens_ = {"<s>", "</s>"};
            control_texts_ = {"[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "<s>", "</s>"};
            break;
        case Family::Mistral:
            stop_strings_ = {"</s>"};
            special_tokens_ = {"</s>"};  // V1's [INST] and [/INST] are plain text
            control_texts_ = {"[INST]", "[/INST]", "<s>", "</s>"};
            break;
        case Family::MistralV3:
            stop_strings_ = {"</s>"};
            special_tokens_ = {"[INST]", "[/INST]", "</s>"};
            control_texts_ = {"[INST]", "[/INST]", "<s>", "</s>"};
            break;
        case Family::Llama3:
            stop_strings_ = {"<|eot_id|>", "<|end_of_text|>"};
            special_tokens_ = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
            control_texts_ = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                              "<|eot_id|>",        "<|eom_id|>",          "<|end_of_text|>"};
            break;
        case Family::ChatML:
            stop_strings_ = {"<|im_end|>"};
            special_tokens_ = {"<|im_start|>", "<|im_end|>"};
            control_texts_ = {"<|im_start|>", "<|im_end|>", "<|endoftext|>"};
            break;
        case Family::Gemma:
            stop_strings_ = {"<end_of_turn>"};
            special_tokens_ = {"<start_of_turn>", "<end_of_turn>"};
            control_texts_ = {"<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>"};
            break;
        case Family::Phi3:
            stop_strings_ = {"<|end|>", "<|endoftext|>"};
            // Phi-4-mini's template wraps the system message's tools in
            // <|tool|> ... <|/tool|> (and renders a tool's result as a
            // <|tool|> turn): forged in a message, they would open either.
            // The by-pattern rendering emits neither, so they are control
            // texts only, not special tokens.
            special_tokens_ = {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"};
            control_texts_ = {"<|system|>",    "<|user|>", "<|assistant|>", "<|end|>",
                              "<|endoftext|>", "<|tool|>", "<|/tool|>"};
            break;
        case Family::Zephyr:
            stop_strings_ = {"</s>"};
            // TinyLlama's <|user|> etc. are ordinary text; listing them is
            // harmless since only single tokens of the vocabulary are cut out.
            special_tokens_ = {"<|system|>", "<|user|>", "<|assistant|>", "</s>"};
            control_texts_ = {"<|system|>", "<|user|>", "<|assistant|>", "<s>", "</s>"};
            break;
    }
}

const std::vector<std::string>& ChatTemplate::known_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (size_t i = 0; i < kFamilies; ++i) v.emplace_back(kNames[i].canonical);
        return v;
    }();
    return names;
}

ChatTemplate ChatTemplate::named(std::string_view name) {
    const std::string wanted = lowercase(trimmed(name));
    for (size_t i = 0; i < kFamilies; ++i) {
        const FamilyNames& n = kNames[i];
        const bool alias = !wanted.empty() && std::find(std::begin(n.aliases), std::end(n.aliases),
                                                        wanted) != std::end(n.aliases);
        if (n.canonical == wanted || alias) return ChatTemplate(static_cast<Family>(i));
    }
    throw Error(DWELL_ERR_INVALID_ARGUMENT, "unknown chat template '" + printable_name(name) +
                                                "': known templates are " + joined_known_names());
}

ChatTemplate ChatTemplate::detect(std::string_view jinja) {
    const std::string choose_one =
        "; choose one with --chat-template NAME (" + joined_known_names() + ")";
    if (trimmed(jinja).empty()) {
        throw Error(DWELL_ERR_UNSUPPORTED,
                    "the model has no chat template (tokenizer.chat_template)" + choose_one);
    }
    // Order matters where families share markers: Phi-4 writes ChatML's
    // <|im_start|> with its own <|im_sep|>, Mistral's V7 wraps [INST] turns
    // with [SYSTEM_PROMPT]. Formats dwell does not render are refused rather
    // than rendered wrongly.
    const bool unsupported_kin =
        contains(jinja, "<|im_sep|>") || contains(jinja, "[SYSTEM_PROMPT]");
    if (!unsupported_kin) {
        if (contains(jinja, "<|start_header_id|>")) return ChatTemplate(Family::Llama3);
        if (contains(jinja, "<|im_start|>")) return ChatTemplate(Family::ChatML);
        if (contains(jinja, "<start_of_turn>")) return ChatTemplate(Family::Gemma);
        // Phi-3 ends turns with <|end|>; Zephyr-style templates with
        // eos_token. Phi-4-mini's writes every role's marker as '<|' + role
        // + '|>', so only <|assistant|> (the generation prompt) is literal.
        if (contains(jinja, "<|end|>") &&
            (contains(jinja, "<|user|>") || contains(jinja, "<|assistant|>")))
            return ChatTemplate(Family::Phi3);
        if (contains(jinja, "<|user|>") &&
            (contains(jinja, "eos_token") || contains(jinja, "</s>")))
            return ChatTemplate(Family::Zephyr);
        if (contains(jinja, "[INST]")) {
            if (contains(jinja, "<<SYS>>")) return ChatTemplate(Family::Llama2);
            // V1 templates write ' [/INST]' (space before); V3 '[/INST]'.
            if (contains(jinja, " [/INST]")) return ChatTemplate(Family::Mistral);
            return ChatTemplate(Family::MistralV3);
        }
    }
    throw Error(DWELL_ERR_UNSUPPORTED,
                "the model's chat template is not one dwell knows (starts "
                "with '" +
                    excerpt(trimmed(jinja)) + "')" + choose_one);
}

struct ChatTemplate::Warned {
    std::once_flag once;
};

ChatTemplate ChatTemplate::from_jinja(std::string_view jinja_text) {
    auto parsed = std::make_shared<const jinja::Template>(jinja::Template::parse(jinja_text));
    ChatTemplate t(Family::ChatML);
    try {
        t = detect(jinja_text);
    } catch (const Error&) {
        t.has_family_ = false;
    }
    t.name_ = t.has_family_ ? "jinja (" + t.name_ + ")" : "jinja";
    if (!t.has_family_) {
        t.stop_strings_.clear();
        t.special_tokens_.clear();
        t.control_texts_.clear();
    }
    t.jinja_ = std::move(parsed);
    t.warned_ = std::make_shared<Warned>();
    // A template that cannot render the simplest conversation is refused
    // here, where choose() can still fall back, not at the first message.
    try {
        (void)t.render_jinja({{"user", "Hello"}}, true, {});
    } catch (const Error& e) {
        throw Error(DWELL_ERR_UNSUPPORTED, e.what());
    }
    return t;
}

ChatTemplate ChatTemplate::choose(std::string_view override_name, std::string_view jinja_text) {
    if (!trimmed(override_name).empty()) return named(override_name);
    if (trimmed(jinja_text).empty()) return detect(jinja_text);  // says there is none
    try {
        return from_jinja(jinja_text);
    } catch (const Error& e) {
        ChatTemplate fallback = detect(jinja_text);
        spdlog::warn(
            "the model's chat template does not run here ({}): formatting chats as the '{}' family",
            e.what(), fallback.name());
        return fallback;
    }
}

void ChatTemplate::bind_vocabulary(std::string bos_text, std::string eos_text,
                                   bool strip_leading_bos) {
    bos_text_ = std::move(bos_text);
    eos_text_ = std::move(eos_text);
    strip_leading_bos_ = strip_leading_bos;
}

std::string ChatTemplate::render_jinja(const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt, std::string_view tools) const {
    jinja::Array list;
    for (size_t i = 0; i < messages.size(); ++i) {
        check_jinja_role(messages[i]);
        list.push_back(message_value(messages[i], i));
    }
    jinja::Object context{{"messages", jinja::Value()},
                          {"add_generation_prompt", jinja::Value(add_generation_prompt)},
                          {"bos_token", jinja::Value(bos_text_)},
                          {"eos_token", jinja::Value(eos_text_)}};
    if (!trimmed(tools).empty()) {
        jinja::Value parsed = jinja::parse_json(tools, "the tools");
        if (!parsed.is_array())
            throw Error(DWELL_ERR_INVALID_ARGUMENT,
                        "the tools are not a JSON array of tool definitions");
        // Phi-4-mini's template reads the tools from the system message, as
        // the JSON text of the functions (its model card's format); no
        // other template reads that key.
        if (!list.empty() && messages.front().role == "system") {
            jinja::Array functions;
            for (const jinja::Value& t : parsed.array()) {
                const jinja::Value* f = t.find("function");
                functions.push_back(f && f->is_object() ? *f : t);
            }
            list.front().set("tools", jinja::Value(jinja::Value(std::move(functions)).to_json()));
        }
        context.emplace_back("tools", std::move(parsed));
    }
    context.front().second = jinja::Value(std::move(list));
    std::string text = jinja_->render(context);
    // The caller puts the BOS id first (see the file comment of the header);
    // the template's own "{{ bos_token }}" would be a second one.
    if (strip_leading_bos_ && !bos_text_.empty() &&
        text.compare(0, bos_text_.size(), bos_text_) == 0)
        text.erase(0, bos_text_.size());
    return text;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, std::string_view tools) const {
    if (!jinja_) return render_family(messages, add_generation_prompt, tools);
    try {
        return render_jinja(messages, add_generation_prompt, tools);
    } catch (const Error& e) {
        // A conversation with tools has no by-pattern rendering to fall back to.
        if (!has_family_ || e.status() != DWELL_ERR_INVALID_ARGUMENT ||
            std::string_view(e.what()).find("chat message role") == 0 ||
            has_tool_parts(messages, tools))
            throw;
        std::call_once(warned_->once, [&] {
            spdlog::warn(
                "the model's chat template refused a conversation ({}): formatting it as the '{}' "
                "family",
                e.what(), kNames[static_cast<size_t>(family_)].canonical);
        });
        return render_family(messages, add_generation_prompt, tools);
    }
}

std::string ChatTemplate::render_family(const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt, std::string_view tools) const {
    refuse_tool_parts(messages, tools, kNames[static_cast<size_t>(family_)].canonical);
    switch (family_) {
        case Family::Llama2:
            return render_llama2(messages);
        case Family::Mistral:
            return render_mistral(messages, /*v3=*/false);
        case Family::MistralV3:
            return render_mistral(messages, /*v3=*/true);
        case Family::Gemma:
            return render_gemma(messages, add_generation_prompt);
        case Family::Llama3:
            return render_turns(messages, add_generation_prompt,
                                {"<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
                                 /*trim=*/true});
        case Family::ChatML:
            return render_turns(messages, add_generation_prompt,
                                {"<|im_start|>", "\n", "<|im_end|>\n", /*trim=*/false});
        case Family::Phi3:
            return render_turns(messages, add_generation_prompt,
                                {"<|", "|>\n", "<|end|>\n", /*trim=*/false});
        case Family::Zephyr:
            return render_turns(messages, add_generation_prompt,
                                {"<|", "|>\n", "</s>\n", /*trim=*/false});
    }
    throw Error(DWELL_ERR_INTERNAL, "chat template family out of range");
}

std::string chat_template_text(const dwell_metadata& metadata) {
    const char* text = nullptr;
    size_t len = 0;
    if (metadata.get_string == nullptr ||
        !metadata.get_string(metadata.self, "tokenizer.chat_template", &text, &len) ||
        text == nullptr) {
        return {};
    }
    return std::string(text, len);
}

}  // namespace dwell
