#include "chat_template_data.hpp"

#include <fstream>
#include <sstream>

namespace dwell::test {

std::filesystem::path chat_template_data_dir() {
    return std::filesystem::path(DWELL_TEST_SOURCE_DIR) / "tests" / "data" / "chat_templates";
}

std::string read_text_file(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace dwell::test
