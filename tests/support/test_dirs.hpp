// Scratch folders for tests, under the system's temp folder.
//
// Thread-safety: a TempDir belongs to one test; fresh_test_dir() names the
// folder after the running test and this process, so parallel ctest runs
// never share one.
#pragma once

#include <filesystem>
#include <string>

namespace dwell::test {

// A fresh, randomly named folder; removed with everything in it with the object.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    // Writes `content` to path()/name and returns that path.
    std::filesystem::path write(const std::string& name, const std::string& content) const;

private:
    std::filesystem::path path_;
};

// <temp>/<prefix>-<pid>-<test name>, emptied and created: for fixtures that
// set up their folder in SetUp() (and may call it again to start over).
// remove_test_dir() in TearDown().
std::filesystem::path fresh_test_dir(const std::string& prefix);
void remove_test_dir(const std::filesystem::path& dir);

}  // namespace dwell::test
