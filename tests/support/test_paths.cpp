#include "test_paths.hpp"

#include <cstdlib>

namespace dwell::test {

std::filesystem::path models_dir() {
    if (const char* env = std::getenv("DWELL_MODELS_DIR"); env && *env) return env;
    return DWELL_TEST_MODELS_DIR;
}

std::filesystem::path reference_dir() {
    if (const char* env = std::getenv("DWELL_REFERENCE_DIR"); env && *env) return env;
    return DWELL_TEST_REFERENCE_DIR;
}

std::filesystem::path model_path(const std::string& file) {
    std::filesystem::path p = models_dir() / file;
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) ? p : std::filesystem::path{};
}

}  // namespace dwell::test
