// Chat templates: how a conversation becomes the prompt text of an
// instruction-tuned model, for `dwell chat` and the OpenAI-compatible server.
//
// dwell runs the Jinja template a model file carries in
// tokenizer.chat_template with its own Jinja engine (jinja.hpp), as
// transformers renders it (from_jinja()). It also knows well-known families'
// documented prompt formats in C++ ("by pattern"): detect() recognises the
// family of a template, whose stop strings and control texts the Jinja
// rendering uses too, and which renders in its place when the engine
// refuses the template (one warning line); `--chat-template NAME` picks a
// family by name instead (named()). Known families: llama2, llama3, chatml, mistral (Mistral's
// tokenizer V1: Mistral 7B Instruct v0.1/v0.2, Mixtral 8x7B), mistral-v3
// (tokenizer V3: Mistral 7B Instruct v0.3, Mixtral 8x22B), gemma, phi3 (Phi-3,
// Phi-3.5, Phi-4-mini) and
// zephyr (TinyLlama-Chat; turns end with the sentencepiece EOS "</s>").
//
// The rendered text, and how to tokenize it:
//  - It never starts with the BOS token: the caller puts the BOS id first,
//    as for any prompt, the way llama.cpp's llama_chat_apply_template
//    leaves BOS to the tokenizer. Tokens that open or close turns later in the conversation
//    (Llama 2's "</s><s>", Mistral's "</s>") ARE in the text.
//  - Special tokens appear as their text ("<|im_start|>", "</s>", ...).
//    sentencepiece never matches control tokens inside text, so the caller
//    cuts the text at each string of special_tokens() that is a single token
//    of the vocabulary, maps it to that id, and encodes each piece of text
//    between them on its own with Tokenizer::encode(piece, false). That
//    gives every piece sentencepiece's leading-space prefix when the
//    vocabulary asks for one (tokenizer.ggml.add_space_prefix), as
//    llama.cpp's tokenizer does after a special token; the texts are
//    written for that rule, so where a family's documentation shows a space
//    that this prefix supplies (Mistral's "</s> [INST]"), the space is not
//    in the text.
//  - add_generation_prompt appends what opens the assistant's turn
//    ("<|im_start|>assistant\n", ...) so that generation continues as the
//    assistant. Llama 2 and Mistral have no such header: their user turn
//    ends with "[/INST]", after which the assistant speaks anyway.
//
// Thread-safety: a ChatTemplate is an immutable value; every member is const
// and safe to call from many threads. Ownership: it owns its strings;
// render() returns a new string and keeps no reference to the messages.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/model.h"

namespace dwell {

namespace jinja {
class Template;
}

// A function call the assistant made, as OpenAI's API carries it.
struct ChatToolCall {
    std::string id;  // the call's id ("call_0"); empty: none given
    std::string name;
    // JSON text of the arguments, as the API's `function.arguments`
    // carries them; templates see the parsed value (an object), as
    // Python's json.loads() gives it, so that `tojson` renders it as
    // Jinja2 renders a dict.
    std::string arguments{"{}"};
};

// One turn. Only role and content are needed; the other fields reach the
// model's Jinja template as the message's keys of the same names when set
// (reasoning_content when it has a value, tool_calls when non-empty), as
// transformers passes them to Jinja2.
struct ChatMessage {
    // "system", "user" or "assistant"; for a Jinja template also "tool" (a
    // tool's result) and "ipython" (Llama 3.x's name for it).
    std::string role;
    std::string content;
    std::optional<std::string> reasoning_content{};  // the assistant's thinking
    std::vector<ChatToolCall> tool_calls{};          // the assistant's calls
    std::optional<std::string> tool_call_id{};       // role "tool": the call it answers
    std::optional<std::string> name{};               // role "tool": the function's name
};

class DWELL_CORE_API ChatTemplate {
public:
    // The family called `name` (a known name or an alias such as "llama-3",
    // "qwen2", "gemma3", "mistral-v1", "tinyllama"; case-insensitive).
    // Throws dwell::Error (DWELL_ERR_INVALID_ARGUMENT) with one line listing
    // the known names when there is no such family.
    static ChatTemplate named(std::string_view name);

    // The family of a Jinja template text as found in GGUF metadata
    // tokenizer.chat_template, recognised by the tokens and phrases that set
    // each family apart. Throws dwell::Error (DWELL_ERR_UNSUPPORTED) when the
    // text is empty or matches no family, quoting its start and naming the
    // --chat-template override.
    static ChatTemplate detect(std::string_view jinja_text);

    // The model's own template, run by the Jinja engine: messages, bos_token,
    // eos_token, add_generation_prompt and, when render() is given tools,
    // tools are its variables (ChatPrompt supplies the vocabulary's BOS and
    // EOS texts). Stop strings and control
    // texts are those of the family detect() recognises, if any. Throws
    // dwell::Error (DWELL_ERR_UNSUPPORTED) naming the template position when
    // the engine cannot parse it or render a one-message conversation with it.
    static ChatTemplate from_jinja(std::string_view jinja_text);

    // The template a host should use: named(override_name) when the user gave
    // one (non-empty); otherwise from_jinja(jinja_text), and when the engine
    // refuses it, one warning line and detect(jinja_text). The override wins
    // even when the model's template renders.
    static ChatTemplate choose(std::string_view override_name, std::string_view jinja_text);

    // Whether render() runs the model's Jinja template.
    bool runs_jinja() const { return jinja_ != nullptr; }

    // Canonical names of the known families, in the order error messages
    // list them.
    static const std::vector<std::string>& known_names();

    // Canonical family name, e.g. "llama3" (also for ChatTemplate::named("llama-3")),
    // or "jinja" (with the recognised family: "jinja (chatml)") for from_jinja().
    const std::string& name() const { return name_; }

    // The prompt text for `messages` (see the file comment for BOS and special
    // tokens). Roles other than system/user/assistant (and tool/ipython for a
    // Jinja template) throw dwell::Error (DWELL_ERR_INVALID_ARGUMENT) naming
    // the role. Families without a system turn (llama2, mistral, mistral-v3,
    // gemma) put system text at the start of the next user message, as their
    // official templates do. A Jinja template's errors (raise_exception(), a
    // bound exceeded) throw dwell::Error naming the template position, unless
    // a recognised family can render instead (then one warning line per
    // template, the first time) and the conversation has no tool parts.
    //
    // `tools` is the JSON text of the tool definitions (OpenAI's `tools`: an
    // array of {"type": "function", "function": {name, description,
    // parameters}}), or empty for none; a Jinja template sees the parsed
    // list as its `tools` variable, and a leading system message also gets
    // a `tools` key, the JSON text of the functions (each tool's
    // `function`), which is where Phi-4-mini's template reads them. The
    // by-pattern families have no format for tools, tool calls or tool
    // results and refuse them in one line naming the message; they leave
    // reasoning_content out, as the official templates leave out the
    // thinking of earlier turns. A tools text or arguments text that is not
    // JSON throws (DWELL_ERR_INVALID_ARGUMENT) naming it.
    std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                       std::string_view tools = {}) const;

    // Texts of tokens that end the assistant's turn, e.g. "<|eot_id|>". The
    // generation loop stops when the sampled token's piece
    // (Tokenizer::piece) equals one of them; control tokens decode to no
    // text, so comparing decoded text is not enough. The vocabulary's EOS id
    // ends generation as well.
    const std::vector<std::string>& stop_strings() const { return stop_strings_; }

    // Texts of the special tokens render() may emit (see the file comment).
    const std::vector<std::string>& special_tokens() const { return special_tokens_; }

    // Every text that has a meaning in the family's prompt format (turn
    // markers, the BOS and EOS texts), whether or not a model's vocabulary
    // has it as one token: where it is plain text the model was still
    // trained to read it as a turn, so a message holding one could forge
    // turns. A superset of special_tokens().
    const std::vector<std::string>& control_texts() const { return control_texts_; }

private:
    friend class ChatPrompt;  // binds the vocabulary's BOS and EOS texts
    enum class Family { Llama2, Llama3, ChatML, Mistral, MistralV3, Gemma, Phi3, Zephyr };
    explicit ChatTemplate(Family family);
    std::string render_family(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                              std::string_view tools) const;
    std::string render_jinja(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                             std::string_view tools) const;
    void bind_vocabulary(std::string bos_text, std::string eos_text, bool strip_leading_bos);

    Family family_;
    // from_jinja(): the parsed template, whether a family was recognised
    // (family_ is then the fallback), and the vocabulary's texts.
    std::shared_ptr<const jinja::Template> jinja_;
    bool has_family_ = true;
    std::string bos_text_, eos_text_;
    bool strip_leading_bos_ = false;
    struct Warned;
    std::shared_ptr<Warned> warned_;  // one fallback warning per template
    std::string name_;
    std::vector<std::string> stop_strings_;
    std::vector<std::string> special_tokens_;
    std::vector<std::string> control_texts_;
};

// The model's tokenizer.chat_template metadata string (for GGUF files and
// dwell packs alike: pass Model::source().metadata()); empty when the key is
// absent or not a string.
DWELL_CORE_API std::string chat_template_text(const dwell_metadata& metadata);

}  // namespace dwell
