// Guarded file mappings (mapped_file.hpp): a file truncated under its
// mapping turns a read past the new end into zeros and a faulted mapping,
// never a SIGBUS that kills the process; a changed size or an in-place
// rewrite is reported naming the file; a SIGBUS elsewhere still ends the
// process as before. The risky reads run in a child (death tests), so a
// regression fails the test instead of crashing the suite.
#include "dwell/core/platform/mapped_file.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "test_dirs.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

class MappedFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = test::fresh_test_dir("dwell_mapped_file");
        file_ = dir_ / "model.bin";
        page_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
        std::ofstream(file_, std::ios::binary) << std::string(4 * page_, 'w');
    }
    void TearDown() override { test::remove_test_dir(dir_); }

    fs::path dir_, file_;
    size_t page_ = 4096;
};

// Reads byte `at` of a mapping of file_ after the file is cut to `keep`
// bytes, on another thread as a backend would; exits 0 when the read gave
// 0 and the mapping says it faulted, naming the file.
[[noreturn]] void read_after_truncate(const fs::path& file, size_t keep, size_t at) {
    MappedFile m(file);
    if (m.data()[at] != 'w') std::_Exit(3);
    fs::resize_file(file, keep);
    unsigned char got = 0xff;
    std::thread reader([&] { got = *static_cast<const volatile uint8_t*>(m.data() + at); });
    reader.join();
    const std::string why = m.problem(false);
    std::fprintf(stderr, "read %u; %s\n", got, why.c_str());
    std::_Exit(got == 0 && m.faulted() && why.find(file.string()) != std::string::npos &&
                       why.find("truncated") != std::string::npos
                   ? 0
                   : 4);
}

TEST_F(MappedFileTest, AReadPastTheEndOfATruncatedFileGivesZerosNotSigbus) {
    EXPECT_EXIT(read_after_truncate(file_, page_, 3 * page_ + 5), ::testing::ExitedWithCode(0),
                "read 0; .*model.bin: the file was truncated while in use");
    EXPECT_EXIT(read_after_truncate(file_, 0, 0), ::testing::ExitedWithCode(0), "read 0");
}

TEST_F(MappedFileTest, ASigbusOutsideEveryGuardedMappingStillEndsTheProcess) {
    // The signal goes on to the handler installed before the guard: none
    // (the process dies of SIGBUS) or, in an ASan build, ASan's, which
    // reports it and aborts.
#if defined(__SANITIZE_ADDRESS__)
    const auto died_of_it = [](int status) {
        return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
    };
    const char* const report = "AddressSanitizer: BUS";
#else
    const auto died_of_it = ::testing::KilledBySignal(SIGBUS);
    const char* const report = "";
#endif
    EXPECT_EXIT(
        {
            MappedFile m(file_);  // the guard is installed
            ::raise(SIGBUS);
            std::_Exit(0);
        },
        died_of_it, report);
}

TEST_F(MappedFileTest, ASizeChangeOrAnInPlaceRewriteIsReportedNamingTheFile) {
    MappedFile m(file_);
    EXPECT_EQ(m.problem(true), "");
    EXPECT_EQ(m.size(), 4 * page_);
    fs::resize_file(file_, 2 * page_);
    const std::string shrunk = m.problem(true);
    EXPECT_NE(shrunk.find(file_.string() + ": the file changed size while in use (" +
                          std::to_string(4 * page_) + " bytes mapped, " +
                          std::to_string(2 * page_) + " now)"),
              std::string::npos)
        << shrunk;
    EXPECT_EQ(shrunk.find('\n'), std::string::npos);
    EXPECT_EQ(m.problem(false), "");  // loaded weights do not care
    EXPECT_FALSE(m.faulted());

    // As `cp new served` does: the same inode truncated and written again.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::ofstream(file_, std::ios::binary | std::ios::trunc) << std::string(4 * page_, 'n');
    const std::string rewritten = m.problem(true);
    EXPECT_NE(rewritten.find(file_.string() + ": the file was rewritten in place while in use"),
              std::string::npos)
        << rewritten;
}

TEST_F(MappedFileTest, AFileRenamedOverTheMappedOneLeavesTheMappingIntact) {
    MappedFile m(file_);
    const fs::path next = dir_ / "next.bin";
    std::ofstream(next, std::ios::binary) << "other";
    fs::rename(next, file_);
    EXPECT_EQ(m.problem(true), "");  // the old inode is still what is mapped
    EXPECT_EQ(m.data()[4 * page_ - 1], 'w');
}

TEST_F(MappedFileTest, ManyMappingsComeAndGo) {
    for (int i = 0; i < 600; ++i) {
        MappedFile m(file_);
        ASSERT_EQ(m.data()[0], 'w');
        MappedFile moved(std::move(m));
        EXPECT_EQ(moved.problem(true), "");
    }
}

TEST_F(MappedFileTest, NotARegularFileIsRefusedWithoutBlocking) {
    const fs::path fifo = dir_ / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    try {
        MappedFile m(fifo);
        FAIL() << "a FIFO was mapped";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(fifo.string() + ": not a regular file"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace dwell
