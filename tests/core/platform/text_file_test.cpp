// Whole text files are read with a size limit: a larger regular file is
// refused from its size alone, and an endless source (a device, a FIFO) is
// cut at the limit, each in one line naming the file and the limit.
#include "dwell/core/platform/text_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "dwell/core/base/error.hpp"
#include "test_dirs.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

class TextFile : public ::testing::Test {
protected:
    void SetUp() override { dir_ = test::fresh_test_dir("dwell-text"); }
    void TearDown() override { test::remove_test_dir(dir_); }
    fs::path dir_;
};

std::string error_of(const fs::path& p, uint64_t limit, dwell_status* status = nullptr) {
    try {
        read_text_file(p, "the text file (-f)", limit);
    } catch (const Error& e) {
        if (status) *status = e.status();
        return e.what();
    }
    return "";
}

TEST_F(TextFile, ReadsTheWholeFileUpToTheLimit) {
    const fs::path p = dir_ / "a.txt";
    std::string text(200000, 'a');
    text[123456] = '\0';  // bytes, not C strings
    std::ofstream(p, std::ios::binary) << text;
    EXPECT_EQ(read_text_file(p, "the text file", 200000), text);
}

TEST_F(TextFile, LargerRegularFileIsRefusedFromItsSize) {
    const fs::path p = dir_ / "big.txt";
    std::ofstream(p) << "x";
    fs::resize_file(p, (uint64_t{1} << 40));  // sparse: 1 TiB that costs nothing
    dwell_status st = DWELL_OK;
    const std::string msg = error_of(p, kMaxTextFileBytes, &st);
    EXPECT_EQ(st, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(msg.find(p.string() + ": the text file (-f) is 1.0 TiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("limit of 256.0 MiB"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST_F(TextFile, EndlessDeviceIsCutAtTheLimit) {
    if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
    const std::string msg = error_of("/dev/zero", uint64_t{1} << 20);
    EXPECT_NE(msg.find("/dev/zero: the text file (-f) is larger than 1.0 MiB"), std::string::npos)
        << msg;
}

TEST_F(TextFile, MissingFileAndFolderAreIoErrors) {
    dwell_status st = DWELL_OK;
    EXPECT_NE(error_of(dir_ / "absent.txt", 100, &st)
                  .find("absent.txt: the text file (-f) cannot be opened"),
              std::string::npos);
    EXPECT_EQ(st, DWELL_ERR_IO);
    EXPECT_NE(error_of(dir_, 100, &st).find("is a folder"), std::string::npos);
    EXPECT_EQ(st, DWELL_ERR_IO);
}

}  // namespace
}  // namespace dwell
