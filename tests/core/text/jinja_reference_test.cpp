// The Jinja engine against Jinja2 itself: every published chat template in
// tests/data/chat_templates, rendered for every conversation of
// conversations.json (system prompt, tools, reasoning turns, a plain chat),
// must give byte for byte the text Jinja2 gave (render_reference.py, as
// transformers configures it), or fail where Jinja2 raised. The expected
// files are stored; DWELL_CHAT_TEMPLATE_EXPECTED names another folder of
// them (the ctest ChatTemplates.MatchLiveJinja2 renders them afresh with the
// installed python3-jinja2, so a template added to the folder is checked too).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "chat_template_data.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/text/jinja.hpp"

namespace dwell::jinja {
namespace {

namespace fs = std::filesystem;

fs::path data_dir() {
    return test::chat_template_data_dir();
}

std::string read(const fs::path& p) {
    return test::read_text_file(p);
}

Value to_value(const nlohmann::ordered_json& j) {
    switch (j.type()) {
        case nlohmann::json::value_t::null:
            return Value::none();
        case nlohmann::json::value_t::boolean:
            return Value(j.get<bool>());
        case nlohmann::json::value_t::number_integer:
        case nlohmann::json::value_t::number_unsigned:
            return Value(j.get<int64_t>());
        case nlohmann::json::value_t::number_float:
            return Value(j.get<double>());
        case nlohmann::json::value_t::string:
            return Value(j.get<std::string>());
        case nlohmann::json::value_t::array: {
            Array a;
            for (const auto& x : j) a.push_back(to_value(x));
            return Value(std::move(a));
        }
        case nlohmann::json::value_t::object: {
            Object o;
            for (const auto& [k, x] : j.items()) o.emplace_back(k, to_value(x));
            return Value(std::move(o));
        }
        default:
            return Value();
    }
}

TEST(JinjaReference, PublishedTemplatesRenderAsJinja2Does) {
    const char* env = std::getenv("DWELL_CHAT_TEMPLATE_EXPECTED");
    const fs::path expected = env && *env ? fs::path(env) : data_dir();
    const auto spec = nlohmann::ordered_json::parse(read(data_dir() / "conversations.json"));
    int checked = 0;
    for (const auto& entry : fs::directory_iterator(data_dir())) {
        if (entry.path().extension() != ".jinja") continue;
        const std::string name = entry.path().stem().string();
        SCOPED_TRACE(name);
        Template t;
        try {
            t = Template::parse(read(entry.path()));
        } catch (const Error& e) {
            ADD_FAILURE() << e.what();
            continue;
        }
        for (const auto& [c, context] : spec["cases"].items()) {
            SCOPED_TRACE(c);
            nlohmann::ordered_json vars = spec["common"];
            for (const auto& [k, v] : context.items()) vars[k] = v;
            const fs::path txt = expected / (name + "." + c + ".txt");
            const fs::path err = expected / (name + "." + c + ".error");
            ASSERT_TRUE(fs::exists(txt) || fs::exists(err)) << "no expected rendering " << txt;
            if (fs::exists(txt)) {
                std::string got;
                try {
                    got = t.render(to_value(vars));
                } catch (const Error& e) {
                    ADD_FAILURE() << e.what();
                    continue;
                }
                EXPECT_EQ(got, read(txt));
                // DWELL_CHAT_TEMPLATE_ACTUAL=DIR keeps dwell's renderings to diff.
                if (const char* keep = std::getenv("DWELL_CHAT_TEMPLATE_ACTUAL"); keep && *keep)
                    std::ofstream(fs::path(keep) / txt.filename(), std::ios::binary) << got;
            } else {
                try {
                    (void)t.render(to_value(vars));
                    ADD_FAILURE() << "Jinja2 raised '" << read(err) << "', dwell rendered";
                } catch (const Error& e) {
                    EXPECT_NE(std::string(e.what()).find(read(err)), std::string::npos) << e.what();
                    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
                }
            }
            ++checked;
        }
    }
    EXPECT_GE(checked, 11 * 5);  // the README's 10 templates and features.jinja, 5 cases each
}

}  // namespace
}  // namespace dwell::jinja
