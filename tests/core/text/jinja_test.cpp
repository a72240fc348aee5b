// The Jinja engine on hostile templates: every bound (nesting, output,
// loop iterations, macro depth, value size) holds and fails in one line
// naming the template position; plus the semantics the reference templates
// do not reach (the Jinja2 comparison is jinja_reference_test.cpp).
#include "dwell/core/text/jinja.hpp"

#include <gtest/gtest.h>

#include <string>

#include "dwell/core/base/error.hpp"

namespace dwell::jinja {
namespace {

std::string render(const std::string& src, const Limits& limits = {}, Value ctx = Value(Object{})) {
    return Template::parse(src).render(ctx, limits);
}

// The message of the dwell::Error the template throws (parse or render).
std::string error_of(const std::string& src, const Limits& limits = {}) {
    try {
        (void)render(src, limits);
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        return m;
    }
    ADD_FAILURE() << "no error for: " << src.substr(0, 80);
    return {};
}

TEST(Jinja, ErrorsNameTheLineAndColumn) {
    EXPECT_EQ(error_of("ok\n  {{ x + }}"),
              "chat template line 2 column 10: expected a value, found the end of the '{{ }}'");
    EXPECT_NE(error_of("{% if true %}never closed")
                  .find("line 1 column 26: the template ends before '{% endif %}'"),
              std::string::npos);
    EXPECT_NE(error_of("{% for x in [1] %}\n{{ raise_exception('bad turn') }}{% endfor %}")
                  .find("line 2 column 4: the template raised an exception: bad turn"),
              std::string::npos);
    EXPECT_NE(error_of("{{ a.b }}").find("line 1 column 5: 'b' of an undefined value"),
              std::string::npos);
    EXPECT_NE(error_of("{% include 'x' %}").find("'{% include %}' is not a tag"),
              std::string::npos);
    EXPECT_NE(error_of("{{ 'a' + 1 }}").find("unsupported operand types for +: string and int"),
              std::string::npos);
    EXPECT_NE(error_of("{{ 1 // 0 }}").find("division by zero"), std::string::npos);
    EXPECT_NE(error_of("{{ 'x' | no_such_filter }}").find("unknown filter 'no_such_filter'"),
              std::string::npos);
    // Text from the template in a message stays on one line (a fuzzer finding).
    EXPECT_NE(error_of("{{ [1] | select('a\\nb') | list }}").find("unknown test 'a\\nb'"),
              std::string::npos);
    EXPECT_NE(
        error_of("{{ raise_exception('two\\nlines') }}").find("raised an exception: two\\nlines"),
        std::string::npos);
}

TEST(Jinja, DeepNestingIsRefusedNotOverflowed) {
    EXPECT_NE(error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}")
                  .find("nested deeper than"),
              std::string::npos);
    EXPECT_NE(error_of("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}")
                  .find("nested deeper than"),
              std::string::npos);
    std::string chain = "{{ 1";
    for (int i = 0; i < 100000; ++i) chain += " + 1";
    EXPECT_NE(error_of(chain + " }}").find("nested deeper than"), std::string::npos);
    std::string ifs;
    for (int i = 0; i < 100000; ++i) ifs += "{% if true %}";
    EXPECT_NE(error_of(ifs).find("blocks are nested deeper than"), std::string::npos);
    std::string nots = "{{ ";
    for (int i = 0; i < 100000; ++i) nots += "not ";
    EXPECT_NE(error_of(nots + "x }}").find("nested deeper than"), std::string::npos);
    // Values nested by a loop rather than by the text.
    EXPECT_NE(error_of("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = "
                       "[ns.l] %}{% endfor %}")
                  .find("a value is nested deeper than"),
              std::string::npos);
}

TEST(Jinja, OutputLoopsAndMacrosAreBounded) {
    Limits small;
    small.max_output_bytes = 1000;
    EXPECT_NE(
        error_of("{% for i in range(100) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}",
                 small)
            .find("the output exceeds 1000 bytes"),
        std::string::npos);
    // Doubling a string, a list, or a shared list's text grows exponentially.
    EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s "
                       "~ ns.s %}{% endfor %}",
                       small)
                  .find("grows past 1000 bytes"),
              std::string::npos);
    EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s "
                       "+ ns.s %}{% endfor %}",
                       small)
                  .find("grows past 1000 bytes"),
              std::string::npos);
    EXPECT_NE(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l "
                       "+ ns.l %}{% endfor %}")
                  .find("a list grows past"),
              std::string::npos);
    EXPECT_NE(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = "
                       "[ns.l, ns.l] %}{% endfor %}"
                       "{{ ns.l | tojson }}",
                       small)
                  .find("exceeds 1000 bytes"),
              std::string::npos);
    EXPECT_NE(error_of("{{ 'x' * 100000000000 }}").find("past the output limit"),
              std::string::npos);
    Limits few;
    few.max_loop_iterations = 1000;
    EXPECT_NE(
        error_of("{% for a in range(100) %}{% for b in range(100) %}{% endfor %}{% endfor %}", few)
            .find("loops ran more than 1000 iterations"),
        std::string::npos);
    EXPECT_NE(
        error_of("{{ range(100000000000) | length }}", few).find("longer than the loop limit"),
        std::string::npos);
    EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}")
                  .find("macro calls are nested deeper than 64 levels"),
              std::string::npos);
    EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.self = [ns] %}")
                  .find("may not hold a namespace"),
              std::string::npos);
}

TEST(Jinja, ScopesFollowJinja) {
    // A set inside a loop stays in the loop; a namespace carries it out.
    EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"),
              "1");
    EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
    EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
    EXPECT_EQ(
        render(
            "{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m('A') }}{{ m(b='c', a='d') }}"),
        "ABdc");
    EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
    EXPECT_EQ(render("{% set l = ['a', 'b'] %}{{ l.1 }}{{ l.5 }}"),
              "b");  // x.N is x[N] (a fuzzer finding)
}

TEST(Jinja, WhitespaceControlMatchesJinja2Settings) {
    // trim_blocks eats the newline after a tag; lstrip_blocks the indent before it.
    EXPECT_EQ(render("a\n  {% if true %}\nb\n  {% endif %}\nc"), "a\nb\nc");
    EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
    EXPECT_EQ(render("  {{ 'x' }}\n"), "  x\n");  // {{ }} keeps both
    EXPECT_EQ(render("  {%+ if true %}x{% endif +%}\n"), "  x\n");
    EXPECT_EQ(render("a {# note #}\nb"), "a b");
}

TEST(Jinja, ContextValuesPrintAsPython) {
    Value ctx(Object{
        {"m", Value(Object{{"role", Value("user")}, {"n", Value(int64_t{3})}, {"f", Value(0.1)}})},
        {"l", Value(Array{Value(true), Value::none(), Value("it's")})}});
    EXPECT_EQ(render("{{ m }} {{ l }} {{ m.f * 3 }} {{ l | tojson }}", {}, ctx),
              "{'role': 'user', 'n': 3, 'f': 0.1} [True, None, \"it's\"] 0.30000000000000004 "
              "[true, null, \"it's\"]");
}

}  // namespace
}  // namespace dwell::jinja
