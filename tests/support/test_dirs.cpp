#include "test_dirs.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>

namespace dwell::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("dwell-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

fs::path TempDir::write(const std::string& name, const std::string& content) const {
    fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
}

fs::path fresh_test_dir(const std::string& prefix) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const fs::path dir =
        fs::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()) + "-" +
                                     (info ? std::string(info->name()) : std::string("no-test")));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

void remove_test_dir(const fs::path& dir) {
    std::error_code ec;
    fs::remove_all(dir, ec);
}

}  // namespace dwell::test
