// libFuzzer target: arbitrary text as a model's tokenizer.chat_template,
// parsed and rendered by dwell's Jinja engine for a conversation with a
// system prompt, tools, a tool call and a reasoning turn. The engine must
// bound everything itself (nesting, output, loops, macro depth) and fail
// only with a one-line dwell::Error; any other exception, a multi-line
// message, a crash, a timeout or running out of memory is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "dwell/core/base/error.hpp"
#include "dwell/core/text/jinja.hpp"

namespace {

using dwell::jinja::Array;
using dwell::jinja::Object;
using dwell::jinja::Value;

Value context() {
    const Value call(Object{
        {"type", Value("function")},
        {"function", Value(Object{{"name", Value("get_weather")},
                                  {"arguments", Value(Object{{"city", Value("Zürich")},
                                                             {"days", Value(int64_t{2})},
                                                             {"hourly", Value(false)}})}})}});
    const Value tool(Object{
        {"type", Value("function")},
        {"function",
         Value(Object{{"name", Value("get_weather")},
                      {"description", Value("Weather \"now\"")},
                      {"parameters", Value(Object{{"type", Value("object")},
                                                  {"required", Value(Array{Value("city")})}})}})}});
    Array messages{
        Value(Object{{"role", Value("system")}, {"content", Value("Be brief.")}}),
        Value(Object{{"role", Value("user")}, {"content", Value("Weather?")}}),
        Value(Object{{"role", Value("assistant")},
                     {"content", Value("")},
                     {"reasoning_content", Value("call the tool")},
                     {"tool_calls", Value(Array{call})}}),
        Value(Object{{"role", Value("tool")}, {"content", Value("{\"t\": 18}")}}),
        Value(Object{{"role", Value("assistant")},
                     {"content", Value("<think>\nok\n</think>\n\n18 °C")}}),
    };
    return Value(Object{{"messages", Value(std::move(messages))},
                        {"tools", Value(Array{tool})},
                        {"add_generation_prompt", Value(true)},
                        {"bos_token", Value("<s>")},
                        {"eos_token", Value("</s>")}});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const Value ctx = context();
    dwell::jinja::Limits limits;
    limits.max_output_bytes = 1u << 20;  // small enough to stay fast under ASan
    limits.max_loop_iterations = 100'000;
    limits.max_call_depth = 16;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const dwell::jinja::Template t = dwell::jinja::Template::parse(text);
        const std::string out = t.render(ctx, limits);
        if (out.size() > limits.max_output_bytes) std::abort();
    } catch (const dwell::Error& e) {
        if (std::string_view(e.what()).find('\n') != std::string_view::npos) std::abort();
    }
    return 0;
}
