// JSON text as Jinja values, against Python: json.dumps(json.loads(text),
// ensure_ascii=False) of each text below (the outputs were printed by
// python3 3.11) must be what to_json() prints of parse_json(text): key
// order, a repeated key's place and value, integers against floats, escapes.
// And the bounds: nesting, integers past int64, invalid text, one line each.
#include "dwell/core/text/jinja_json.hpp"

#include <gtest/gtest.h>

#include <string>

#include "dwell/core/base/error.hpp"

namespace dwell::jinja {
namespace {

TEST(JinjaJson, ParsesAsPythonsJsonLoads) {
    EXPECT_EQ(parse_json(R"({"b": 1, "a": [1.0, 2, -0.0, 1e2, 0.1, null, true, "\u00fc\u003c"],)"
                         R"( "b": {"x": 3}})",
                         "t")
                  .to_json(),
              R"({"b": {"x": 3}, "a": [1.0, 2, -0.0, 100.0, 0.1, null, true, "ü<"]})");
    EXPECT_EQ(parse_json("[1.5e-7, 123456789012345678, 1E+2, -0]", "t").to_json(),
              "[1.5e-07, 123456789012345678, 100.0, 0]");
    const Value v = parse_json(R"({"n": 2, "f": 2.0})", "t");
    EXPECT_EQ(v.find("n")->kind(), Value::Kind::Int);
    EXPECT_EQ(v.find("f")->kind(), Value::Kind::Float);
}

TEST(JinjaJson, HostileTextIsOneLineNamingIt) {
    const auto error_of = [](const std::string& text) {
        try {
            (void)parse_json(text, "message 1 tool call 0 arguments");
        } catch (const Error& e) {
            EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT);
            EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
            return std::string(e.what());
        }
        return std::string("parsed");
    };
    EXPECT_EQ(error_of(std::string(64, '[') + std::string(64, ']')), "parsed");
    EXPECT_EQ(error_of(std::string(65, '[') + std::string(65, ']')),
              "message 1 tool call 0 arguments: arrays and objects nest deeper than 64 levels");
    EXPECT_EQ(error_of("[9223372036854775807]"), "parsed");
    EXPECT_EQ(error_of("[9223372036854775808]"),
              "message 1 tool call 0 arguments: the integer 9223372036854775808 is larger than "
              "dwell's templates hold");
    EXPECT_EQ(error_of("[1e400]"),
              "message 1 tool call 0 arguments: not valid JSON: number overflow parsing '1e400'");
    EXPECT_EQ(
        error_of(R"({"a": 1} x)").rfind("message 1 tool call 0 arguments: not valid JSON: ", 0),
        0u);
    EXPECT_EQ(error_of("").rfind("message 1 tool call 0 arguments: not valid JSON: ", 0), 0u);
}

}  // namespace
}  // namespace dwell::jinja
