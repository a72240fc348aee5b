// Request bodies of the OpenAI-compatible server: a valid body gives the
// fields it holds, and each limit on what a body may hold (nesting, message
// count, stop strings, max_tokens, n) is a 400 naming the field.
#include "openai_request.hpp"

#include <gtest/gtest.h>

#include <string>

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
