#include "test_paths.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#ifndef DWELL_TEST_EMULATOR
#define DWELL_TEST_EMULATOR ""
#endif

namespace dwell::test {

std::vector<std::string> emulator_prefix() {
    const char* env = std::getenv("DWELL_TEST_EMULATOR");
    std::istringstream words(env != nullptr ? env : DWELL_TEST_EMULATOR);
    std::vector<std::string> out;
    for (std::string w; words >> w;) out.push_back(w);
    return out;
}

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

void use_threadsafe_death_tests_where_possible() {
    GTEST_FLAG_SET(death_test_style, emulator_prefix().empty() ? "threadsafe" : "fast");
}

}  // namespace dwell::test
