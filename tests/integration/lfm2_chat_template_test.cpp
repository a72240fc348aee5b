// An lfm2 file's own chat template (tokenizer.chat_template) is the one a
// chat uses, read through the model's metadata as for every family, and it
// renders as Jinja2 renders LFM2's published template
// (tests/data/chat_templates: lfm2.jinja and its "plain" rendering).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/text/chat_template.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

std::string published(const std::string& file) {
    std::ifstream f(fs::path(DWELL_TEST_SOURCE_DIR) / "tests/data/chat_templates" / file,
                    std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    EXPECT_FALSE(s.str().empty()) << file;
    return s.str();
}

TEST(Lfm2ChatTemplate, TheFilesTemplateIsChosenAndRendersAsPublished) {
    const fs::path plugin = fs::path(DWELL_TEST_PLUGIN_DIR) / "libdwell-lfm2.so";
    if (!fs::exists(plugin))
        GTEST_SKIP() << "the lfm2 model plugin is not built (" << plugin.string() << ")";
    TempDir dir;
    const fs::path plain = dir.path() / "plain.gguf";
    write_synthetic_model(family_reference_spec(SyntheticFamily::lfm2), plain);
    const std::string jinja = published("lfm2.jinja");
    const fs::path with = edited_gguf_copy(plain, {.key = "tokenizer.chat_template", .text = jinja},
                                           dir.path() / "with_template.gguf");

    Runtime runtime;
    auto model = Model::load(runtime, with);
    ASSERT_EQ(model->plugin().name(), "lfm2");
    const std::string text = chat_template_text(model->source().metadata());
    EXPECT_EQ(text, jinja);
    const ChatTemplate chat = ChatTemplate::choose("", text);
    EXPECT_TRUE(chat.runs_jinja());
    // conversations.json's "plain" case; unbound, bos_token is empty.
    const std::vector<ChatMessage> conversation = {
        {"system", "You are a helpful assistant."},
        {"user", "Hello!"},
        {"assistant", "  Hi there. How can I help?\n"},
        {"user", "What is 2+2?"},
    };
    EXPECT_EQ("<|bos|>" + chat.render(conversation, true), published("lfm2.plain.txt"));
    const auto& stops = chat.stop_strings();
    EXPECT_NE(std::find(stops.begin(), stops.end(), "<|im_end|>"), stops.end())
        << "the turn end of LFM2's template stops generation";
}

}  // namespace
}  // namespace dwell::test
