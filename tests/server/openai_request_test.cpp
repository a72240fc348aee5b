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
         {R"("response_format": {"type": "json_object"})", R"("tools": [{"type": "function"}])",
          R"("tool_choice": "auto")", R"("functions": [{"name": "f"}])",
          R"("function_call": "auto")", R"("logprobs": true)", R"("logprobs": 3)",
          R"("top_logprobs": 1)", R"("logit_bias": {"7": 1})", R"("presence_penalty": 1)",
          R"("frequency_penalty": 0.1)", R"("suffix": "x")", R"("best_of": 2)",
          R"("echo": true)"}) {
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
