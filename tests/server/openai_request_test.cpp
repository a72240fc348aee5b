// Request bodies of the OpenAI-compatible server: a valid body gives the
// fields it holds, and each limit on what a body may hold (nesting, message
// count, stop strings, max_tokens, n) and each field dwell does not
// implement is a 400 naming the field; the byte bound on prompts against
// the tokenizer; API keys.
#include "openai_request.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "api_keys.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "test_paths.hpp"

namespace {

using dwell::server::CompletionRequest;
using dwell::server::parse_completion_body;
using dwell::server::RequestError;

constexpr int32_t kMaxTokens = 4096;

// Parsing `body` fails with 400, `param` and exactly `message`.
void expect_refused(const std::string& body, bool chat, const std::string& param,
                    const std::string& message) {
    try {
        (void)parse_completion_body(body, chat, kMaxTokens);
        ADD_FAILURE() << "accepted: " << body.substr(0, 200);
    } catch (const RequestError& e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_EQ(e.param(), param);
        EXPECT_EQ(std::string(e.what()), message);
    }
}

std::string messages_body(size_t n) {
    std::string body = R"({"messages": [)";
    for (size_t i = 0; i < n; ++i)
        body += std::string(i ? "," : "") + R"({"role":"user","content":"hi"})";
    return body + "]}";
}

TEST(OpenAiRequest, ValidChatBodyGivesItsFields) {
    const CompletionRequest r = parse_completion_body(
        R"({"messages": [{"role": "developer", "content": "be brief"},
                         {"role": "user", "content": [{"type": "text", "text": "a"},
                                                      {"type": "text", "text": "b"}]}],
            "max_tokens": 7, "temperature": 0.5, "stop": ["\n", "END"], "stream": true,
            "stream_options": {"include_usage": true}, "seed": 42, "n": 1})",
        true, kMaxTokens);
    ASSERT_EQ(r.messages.size(), 2u);
    EXPECT_EQ(r.messages[0].role, "system");
    EXPECT_EQ(r.messages[1].content, "ab");
    EXPECT_EQ(r.max_tokens, 7);
    EXPECT_EQ(r.temperature, 0.5f);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "END"}));
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);
    EXPECT_EQ(r.seed, 42u);
}

TEST(OpenAiRequest, InvalidJsonIsRefused) {
    try {
        (void)parse_completion_body(R"({"prompt": )", false, kMaxTokens);
        FAIL() << "accepted";
    } catch (const RequestError& e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_EQ(std::string(e.what()).rfind("the body is not valid JSON: ", 0), 0u) << e.what();
        // Where, in the client's terms, without the parser library's tag.
        EXPECT_NE(std::string(e.what()).find("line 1, column"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
    }
}

// Found by openai_request_fuzzer: the JSON parser reports a number out of
// double's range as out_of_range, not parse_error, and the server answered
// it with a 500.
TEST(OpenAiRequest, NumberBeyondADoubleIsA400) {
    try {
        (void)parse_completion_body(R"({"prompt": "x", "temperature": 1e400})", false, kMaxTokens);
        FAIL() << "accepted";
    } catch (const RequestError& e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_EQ(std::string(e.what()).rfind("the body is not valid JSON: ", 0), 0u) << e.what();
        EXPECT_NE(std::string(e.what()).find("1e400"), std::string::npos) << e.what();
    }
}

TEST(OpenAiRequest, NestingDeeperThanTheLimitIsRefusedWhileParsing) {
    // 32 levels are allowed (the limit), 33 are not.
    const auto nested = [](int levels) {
        return R"({"prompt": "x", "extra": )" + std::string(levels - 1, '[') +
               std::string(levels - 1, ']') + "}";
    };
    EXPECT_NO_THROW((void)parse_completion_body(nested(32), false, kMaxTokens));
    expect_refused(nested(33), false, "",
                   "the body nests arrays and objects deeper than 32 levels");
    // A body that is nothing but brackets: refused at level 33, not after
    // building a tree a million levels deep.
    expect_refused(std::string(1 << 20, '['), false, "",
                   "the body nests arrays and objects deeper than 32 levels");
}

TEST(OpenAiRequest, MoreMessagesThanTheLimitAreRefused) {
    EXPECT_EQ(parse_completion_body(messages_body(4096), true, kMaxTokens).messages.size(), 4096u);
    expect_refused(messages_body(4097), true, "messages",
                   "'messages' holds 4097 messages, more than the 4096 a request may hold");
}

TEST(OpenAiRequest, LongStopStringsAreRefused) {
    const std::string ok = R"({"prompt": "x", "stop": ")" + std::string(256, 'a') + R"("})";
    EXPECT_EQ(parse_completion_body(ok, false, kMaxTokens).stop.at(0).size(), 256u);
    expect_refused(R"({"prompt": "x", "stop": ")" + std::string(257, 'a') + R"("})", false, "stop",
                   "'stop' strings must be at most 256 bytes long, not 257");
    expect_refused(R"({"prompt": "x", "stop": ["a", ")" + std::string(300, 'b') + R"("]})", false,
                   "stop", "'stop' strings must be at most 256 bytes long, not 300");
}

TEST(OpenAiRequest, MoreThanFourStopStringsAreRefused) {
    expect_refused(R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", false, "stop",
                   "'stop' must be a string or an array of up to 4 strings");
}

TEST(OpenAiRequest, MaxTokensAndNOutOfRangeAreRefused) {
    expect_refused(R"({"prompt": "x", "max_tokens": 4097})", false, "max_tokens",
                   "'max_tokens' must be between 1 and 4096");
    expect_refused(R"({"prompt": "x", "max_completion_tokens": 0})", false, "max_completion_tokens",
                   "'max_completion_tokens' must be between 1 and 4096");
    expect_refused(R"({"prompt": "x", "max_tokens": 18446744073709551615})", false, "max_tokens",
                   "'max_tokens' must be between 1 and 4096");
    expect_refused(R"({"prompt": "x", "n": 2})", false, "n",
                   "'n' must be 1 (one choice per request)");
}

}  // namespace

namespace more {

using dwell::server::ApiKeys;
using dwell::server::max_text_bytes_per_token;
using dwell::server::min_prompt_tokens;
using dwell::server::split_keys;

TEST(OpenAiRequest, TopPZeroMeansGreedy) {
    const CompletionRequest r =
        parse_completion_body(R"({"prompt": "x", "temperature": 1.2, "top_p": 0})", false, 4096);
    EXPECT_EQ(r.temperature, 0.0f);
    EXPECT_EQ(r.top_p, 1.0f);
    EXPECT_EQ(parse_completion_body(R"({"prompt": "x", "top_p": 0.5})", false, 4096).top_p, 0.5f);
}

TEST(OpenAiRequest, UnimplementedFieldsAreRefusedNamingThem) {
    for (const char* field :
         {R"("response_format": {"type": "json_object"})", R"("tool_choice": "auto")",
          R"("functions": [{"name": "f"}])", R"("function_call": "auto")", R"("logprobs": true)",
          R"("logprobs": 3)", R"("top_logprobs": 1)", R"("logit_bias": {"7": 1})",
          R"("presence_penalty": 1)", R"("frequency_penalty": 0.1)", R"("suffix": "x")",
          R"("best_of": 2)", R"("echo": true)"}) {
        const std::string f = field;
        const std::string name = f.substr(1, f.find('"', 1) - 1);
        try {
            (void)parse_completion_body(R"({"prompt": "x", )" + f + "}", false, 4096);
            ADD_FAILURE() << "accepted " << f;
        } catch (const RequestError& e) {
            EXPECT_EQ(e.status(), 400) << f;
            EXPECT_EQ(e.param(), name) << f;
            EXPECT_EQ(e.code(), "unsupported_parameter") << f;
            EXPECT_EQ(std::string(e.what()), "'" + name + "' is not supported by dwell yet");
        }
    }
    // Neutral values ask for nothing.
    EXPECT_NO_THROW((void)parse_completion_body(
        R"({"prompt": "x", "response_format": {"type": "text"}, "tools": [], "tool_choice": "none",
            "logprobs": false, "top_logprobs": null, "logit_bias": {}, "presence_penalty": 0,
            "frequency_penalty": 0.0, "suffix": "", "best_of": 1, "echo": false, "user": "u"})",
        false, 4096));
    expect_refused(R"({"prompt": "x", "presence_penalty": 3})", false, "presence_penalty",
                   "'presence_penalty' must be between -2.0 and 2.0");
}

// Tools and the parts of a tool-using conversation reach the chat
// template: the tools as JSON text with the client's key order, an
// assistant's calls (arguments as the JSON text OpenAI's API carries, or
// the object some clients send), content null beside them, a tool's result
// naming its call, reasoning_content.
TEST(OpenAiRequest, ToolsAndToolMessagesGiveTheirFields) {
    const CompletionRequest r = parse_completion_body(R"({
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
                   "parameters": {"type": "object", "properties": {"z": {}, "a": {}}}}}],
        "messages": [
            {"role": "user", "content": "Weather?", "name": "ann"},
            {"role": "assistant", "content": null, "reasoning_content": "call it",
             "tool_calls": [{"id": "call_0", "type": "function",
                             "function": {"name": "get_weather", "arguments": "{\"city\": \"Z\"}"}},
                            {"function": {"name": "get_weather", "arguments": {"b": 1, "a": 2}}},
                            {"function": {"name": "now", "arguments": ""}}]},
            {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "18"}]})",
                                                      true, kMaxTokens);
    EXPECT_EQ(r.tools, R"([{"type":"function","function":{"name":"get_weather","description":"d",)"
                       R"("parameters":{"type":"object","properties":{"z":{},"a":{}}}}}])");
    ASSERT_EQ(r.messages.size(), 3u);
    EXPECT_EQ(r.messages[0].name, "ann");
    const dwell::ChatMessage& a = r.messages[1];
    EXPECT_EQ(a.content, "");
    EXPECT_EQ(a.reasoning_content, "call it");
    ASSERT_EQ(a.tool_calls.size(), 3u);
    EXPECT_EQ(a.tool_calls[0].id, "call_0");
    EXPECT_EQ(a.tool_calls[0].name, "get_weather");
    EXPECT_EQ(a.tool_calls[0].arguments, R"({"city": "Z"})");
    EXPECT_EQ(a.tool_calls[1].id, "");
    EXPECT_EQ(a.tool_calls[1].arguments, R"({"b":1,"a":2})");
    EXPECT_EQ(a.tool_calls[2].arguments, "{}");
    EXPECT_EQ(r.messages[2].role, "tool");
    EXPECT_EQ(r.messages[2].tool_call_id, "call_0");
    EXPECT_EQ(r.messages[2].name, "get_weather");
    EXPECT_EQ(r.messages[2].content, "18");
    // No tools: none for the template; [] asks for none.
    EXPECT_EQ(parse_completion_body(messages_body(1), true, kMaxTokens).tools, "");
    EXPECT_EQ(
        parse_completion_body(R"({"messages": [{"role": "user", "content": "x"}], "tools": []})",
                              true, kMaxTokens)
            .tools,
        "");
}

// Each malformed part is one 400 naming its field.
TEST(OpenAiRequest, MalformedToolsAndToolCallsAreRefusedNamingTheField) {
    const auto chat = [](const std::string& message) {
        return R"({"messages": [{"role": "user", "content": "x"}, )" + message + "]}";
    };
    const auto call = [&](const std::string& c) {
        return chat(R"({"role": "assistant", "content": null, "tool_calls": [)" + c + "]}");
    };
    const std::string args = "messages[1].tool_calls[0].function.arguments";
    expect_refused(call(R"({"function": {"name": "f", "arguments": "{\"a\": "}})"), true, args,
                   "'" + args +
                       "' must hold a JSON object: its text is not valid JSON: parse error at line "
                       "1, column 7: syntax error while "
                       "parsing value - unexpected end of input; expected '[', '{', or a "
                       "literal");
    expect_refused(call(R"({"function": {"name": "f", "arguments": "[1, 2]"}})"), true, args,
                   "'" + args + "' must hold a JSON object, not array");
    expect_refused(call(R"({"function": {"name": "f", "arguments": 7}})"), true, args,
                   "'" + args + "' must be a string holding a JSON object");
    expect_refused(call(R"({"function": {"arguments": "{}"}})"), true,
                   "messages[1].tool_calls[0].function.name",
                   "'messages[1].tool_calls[0].function.name' must be a non-empty string");
    expect_refused(call(R"({"type": "web", "function": {"name": "f"}})"), true,
                   "messages[1].tool_calls[0].type",
                   "'messages[1].tool_calls[0].type' must be \"function\"");
    expect_refused(call(R"({"id": 3, "function": {"name": "f"}})"), true,
                   "messages[1].tool_calls[0].id",
                   "'messages[1].tool_calls[0].id' must be a string");
    expect_refused(call(R"("f")"), true, "messages[1].tool_calls[0]",
                   "'messages[1].tool_calls[0]' must be an object");
    expect_refused(chat(R"({"role": "assistant", "content": "x", "tool_calls": {"name": "f"}})"),
                   true, "messages[1].tool_calls", "'messages[1].tool_calls' must be an array");
    expect_refused(chat(R"({"role": "user", "content": "x", "tool_calls": []})"), true,
                   "messages[1].tool_calls",
                   "'messages[1].tool_calls' is for assistant messages only");
    expect_refused(chat(R"({"role": "assistant", "content": null})"), true, "messages[1].content",
                   "'messages[1].content' must be a string or an array of text parts");
    expect_refused(chat(R"({"role": "tool", "content": "1", "tool_call_id": ["c"]})"), true,
                   "messages[1].tool_call_id", "'messages[1].tool_call_id' must be a string");
    expect_refused(chat(R"({"role": "user", "content": "1", "tool_call_id": "c"})"), true,
                   "messages[1].tool_call_id",
                   "'messages[1].tool_call_id' is for tool messages only");
    expect_refused(chat(R"({"role": "assistant", "content": "1", "reasoning_content": 5})"), true,
                   "messages[1].reasoning_content",
                   "'messages[1].reasoning_content' must be a string");
    std::string many = "[";
    for (size_t i = 0; i <= dwell::server::kMaxToolCalls; ++i)
        many += std::string(i ? "," : "") + R"({"function": {"name": "f"}})";
    expect_refused(chat(R"({"role": "assistant", "content": "", "tool_calls": )" + many + "]}"),
                   true, "messages[1].tool_calls",
                   "'messages[1].tool_calls' holds 65 tool calls, more than the 64 a message may "
                   "hold");
    const std::string user = R"({"messages": [{"role": "user", "content": "x"}], "tools": )";
    expect_refused(user + R"({"type": "function"}})", true, "tools", "'tools' must be an array");
    expect_refused(user + R"([{"type": "function"}]})", true, "tools[0].function",
                   "'tools[0].function' must be an object");
    expect_refused(user + R"([{"type": "code_interpreter"}]})", true, "tools[0]",
                   "'tools[0]' must be {\"type\": \"function\", \"function\": {...}}");
    expect_refused(user + R"([{"type": "function", "function": {"name": ""}}]})", true,
                   "tools[0].function.name", "'tools[0].function.name' must be a non-empty string");
    expect_refused(R"({"prompt": "x", "tools": [{"type": "function"}]})", false, "tools",
                   "'tools' are for chat completions (/v1/chat/completions) only");
}

// The body keeps each object's keys in order, and an ordered object finds a
// key by scanning: an object of more keys than the bound is refused while
// parsing, before it costs quadratic time.
TEST(OpenAiRequest, AnObjectOfTooManyKeysIsRefusedWhileParsing) {
    const auto object = [](size_t keys) {
        std::string s = "{";
        for (size_t i = 0; i < keys; ++i)
            s += std::string(i ? "," : "") + "\"k" + std::to_string(i) + "\": 1";
        return s + "}";
    };
    const std::string start = R"({"messages": [{"role": "user", "content": "x"}], "metadata": )";
    EXPECT_NO_THROW((void)parse_completion_body(start + object(256) + "}", true, kMaxTokens));
    expect_refused(start + object(257) + "}", true, "",
                   "the body has an object of more than 256 keys");
    const std::string call =
        R"({"messages": [{"role": "assistant", "content": "", "tool_calls": [{"function": )"
        R"({"name": "f", "arguments": )" +
        nlohmann::json(object(257)).dump() + "}}]}]}";
    expect_refused(call, true, "messages[0].tool_calls[0].function.arguments",
                   "'messages[0].tool_calls[0].function.arguments' must hold a JSON object: its "
                   "text has an object of more than 256 keys");
}

// The byte bound the server refuses long prompts by, against what the
// tokenizer really makes of texts built to need few tokens: never more
// tokens than the bound says are the least.
TEST(PromptBound, NoTextEncodesToFewerTokensThanTheBound) {
    DWELL_REQUIRE_MODEL(path, "tok512.model");
    const dwell::Tokenizer tok = dwell::Tokenizer::from_model_file(path);
    const size_t per_token = max_text_bytes_per_token(tok);
    ASSERT_GT(per_token, 0u);
    // The longest piece's bytes, repeated: the fewest tokens per byte.
    std::string longest;
    for (int32_t id = 0; id < tok.n_vocab(); ++id)
        if (tok.token_bytes(id).size() > longest.size()) longest = tok.token_bytes(id);
    std::vector<std::string> texts = {"",
                                      "a",
                                      longest,
                                      "Once upon a time there was a cat.",
                                      std::string(3000, 'a'),
                                      "naïve façade Привет 😀"};
    std::string repeated;
    for (int i = 0; i < 200; ++i) repeated += longest;
    texts.push_back(repeated);
    std::string bytes;
    for (int i = 0; i < 4096; ++i) bytes += static_cast<char>((i * 37 + 11) % 256);
    texts.push_back(bytes);
    for (const std::string& t : texts) {
        const auto ids = tok.encode(t, true);
        EXPECT_GE(static_cast<int64_t>(ids.size()), min_prompt_tokens(t.size(), per_token, true))
            << t.substr(0, 40);
    }
    EXPECT_EQ(min_prompt_tokens(10, 0, true), 0);  // no bound: never refused by bytes
    EXPECT_EQ(min_prompt_tokens(10, 4, true), 4);  // ceil(10 / 4) + BOS
}

TEST(ApiKeys, EachKeyHasItsIndexAndAnythingElseNone) {
    const ApiKeys keys({"alpha", "beta-key"});
    EXPECT_EQ(keys.match("alpha"), 0u);
    EXPECT_EQ(keys.match("beta-key"), 1u);
    EXPECT_FALSE(keys.match("alph"));
    EXPECT_FALSE(keys.match("alphaa"));
    EXPECT_FALSE(keys.match(""));
    EXPECT_EQ(keys.match_authorization("Bearer beta-key"), 1u);
    EXPECT_EQ(keys.match_authorization("bearer alpha"), 0u);
    EXPECT_FALSE(keys.match_authorization("Bearer"));
    EXPECT_FALSE(keys.match_authorization("Basic alpha"));
    EXPECT_FALSE(keys.match_authorization("alpha"));
    EXPECT_THROW(ApiKeys({"ok", ""}), std::invalid_argument);
    EXPECT_EQ(split_keys({"a, b", "c,,", " "}), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(ApiKeys, AKeyFileHoldsOneKeyALine) {
    const auto path = std::filesystem::temp_directory_path() /
                      ("dwell-keys-" + std::to_string(::getpid()) + ".txt");
    {
        std::ofstream out(path);
        out << "# keys of the team\n  first-key  \n\nsecond,key\r\n";
    }
    EXPECT_EQ(dwell::server::read_key_file(path.string()),
              (std::vector<std::string>{"first-key", "second,key"}));
    {
        std::ofstream out(path);
        out << "# none yet\n\n";
    }
    try {
        (void)dwell::server::read_key_file(path.string());
        ADD_FAILURE() << "no key, accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), path.string() + " holds no key");
    }
    std::filesystem::remove(path);
    EXPECT_THROW((void)dwell::server::read_key_file(path.string()), std::runtime_error);
}

}  // namespace more
