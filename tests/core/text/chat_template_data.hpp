// The chat templates and their reference renderings in
// tests/data/chat_templates, as the template tests read them.
#pragma once

#include <filesystem>
#include <string>

namespace dwell::test {

// tests/data/chat_templates in the source tree.
std::filesystem::path chat_template_data_dir();

// A file's bytes ("" when it cannot be read).
std::string read_text_file(const std::filesystem::path& path);

}  // namespace dwell::test
