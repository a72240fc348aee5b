// Output files (output_file.hpp) and the writers built on them: a target
// that is not a regular file (here a FIFO and symbolic links, standing in
// for /dev/null) is refused and left as it was, temporaries are unique and
// never follow a planted link, sessions are 0600, a dead writer's
// temporaries are cleaned up, and of two writers to one path the second to
// finish says it lost.
#include "dwell/core/platform/output_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/pack_file.hpp"
#include "dwell/core/session/session_file.hpp"
#include "dwell/tools/gguf_writer.hpp"
#include "dwell/tools/pack_writer.hpp"
#include "test_dirs.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::string> temporaries_in(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string n = e.path().filename().string();
        if (n.find(".dwell-tmp.") != std::string::npos) out.push_back(n);
    }
    return out;
}

bool one_line(const std::string& s) {
    return !s.empty() && s.find('\n') == std::string::npos;
}

class OutputFileTest : public ::testing::Test {
protected:
    void SetUp() override { dir_ = test::fresh_test_dir("dwell_output_file"); }
    void TearDown() override { test::remove_test_dir(dir_); }

    // The message of what `f` throws, "" when it does not.
    template <typename F>
    static std::string error_of(F&& f) {
        try {
            f();
        } catch (const Error& e) {
            return e.what();
        }
        return {};
    }

    fs::path dir_;
};

TEST_F(OutputFileTest, AFifoTargetIsRefusedAndStaysAFifo) {
    const fs::path fifo = dir_ / "out.dwell";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    // convert -o FIFO: the pack writer must neither block on it nor rename
    // over it (as it did over /dev/null).
    const std::string why = error_of([&] {
        PackWriter w(fifo, {});
        w.finish();
    });
    EXPECT_TRUE(one_line(why)) << why;
    EXPECT_NE(why.find(fifo.string()), std::string::npos) << why;
    EXPECT_NE(why.find("a FIFO"), std::string::npos) << why;
    EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
    EXPECT_TRUE(temporaries_in(dir_).empty());
}

TEST_F(OutputFileTest, ASymlinkTargetIsRefusedAndWhatItNamesIsUntouched) {
    const fs::path victim = dir_ / "victim";
    std::ofstream(victim) << "keep me";
    const fs::path link = dir_ / "out.gguf";
    fs::create_symlink(victim, link);
    GgufWriter w;
    w.add_uint32("general.alignment", 32);
    const std::string why = error_of([&] { w.write(link); });
    EXPECT_TRUE(one_line(why)) << why;
    EXPECT_NE(why.find("symbolic link"), std::string::npos) << why;
    EXPECT_EQ(read_all(victim), "keep me");
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
}

TEST_F(OutputFileTest, AFolderTargetIsRefused) {
    fs::create_directories(dir_ / "sub");
    const std::string why = error_of([&] { write_output_file(dir_ / "sub", "x"); });
    EXPECT_NE(why.find("a folder"), std::string::npos) << why;
    EXPECT_TRUE(fs::is_directory(dir_ / "sub"));
}

TEST_F(OutputFileTest, ALinkPlantedAtTheOldTemporaryNameIsNeverFollowed) {
    // The pack writer used to open "<out>.tmp" with O_TRUNC, following any
    // link someone placed there.
    const fs::path victim = dir_ / "victim";
    std::ofstream(victim) << "keep me";
    const fs::path out = dir_ / "m.dwell";
    fs::create_symlink(victim, out.string() + ".tmp");
    {
        PackWriter w(out, {});
        const std::vector<uint8_t> data(64 * 4, 1);
        const int64_t ne[] = {64};
        w.add_tensor("t", DWELL_F32, ne, data);
        const fs::path temp = w.temporary();
        EXPECT_EQ(temp.parent_path(), dir_);
        EXPECT_EQ(temp.filename().string().rfind(
                      ".m.dwell.dwell-tmp." + std::to_string(::getpid()) + ".", 0),
                  0u)
            << temp;
        w.finish();
    }
    EXPECT_EQ(read_all(victim), "keep me");
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(out)));
    EXPECT_TRUE(temporaries_in(dir_).empty());
}

TEST_F(OutputFileTest, SessionFilesAreOwnerOnlyWhateverTheUmask) {
    const mode_t old = ::umask(022);
    const fs::path p = dir_ / "s.dwses";
    {
        SessionFileWriter w(p, SessionFileModel{1, 4, 10, 100, 0, "m.gguf"},
                            SessionFileHeader{DWELL_F16, 16, 0, 0, 0});
        w.finish();
    }
    write_output_file(dir_ / "s.chat.json", "{}\n", 0600);
    ::umask(old);
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat((dir_ / "s.chat.json").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(OutputFileTest, TemporariesOfAGoneWriterAreRemovedOnesOfALiveOneKept) {
    // A pid that surely is gone: a child that has exited and been reaped.
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) ::_exit(0);
    ASSERT_EQ(::waitpid(child, nullptr, 0), child);
    const fs::path target = dir_ / "out.bin";
    const std::string prefix = OutputFile::temporary_prefix(target);
    EXPECT_EQ(prefix, ".out.bin.dwell-tmp.");
    const fs::path stale = dir_ / (prefix + std::to_string(child) + ".0badf00d");
    const fs::path live = dir_ / (prefix + std::to_string(::getppid()) + ".0badf00d");
    const fs::path other = dir_ / (".other.bin.dwell-tmp." + std::to_string(child) + ".1");
    for (const auto& p : {stale, live, other}) std::ofstream(p) << "old";
    write_output_file(target, "new");
    EXPECT_EQ(read_all(target), "new");
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(live));
    EXPECT_TRUE(fs::exists(other));  // another target's: its writer cleans up
}

TEST_F(OutputFileTest, OfTwoWritersTheSecondToFinishSaysItLost) {
    for (const bool existed : {false, true}) {
        SCOPED_TRACE(existed ? "target existed" : "new target");
        const fs::path target = dir_ / (existed ? "old.bin" : "new.bin");
        if (existed) std::ofstream(target) << "before";
        std::string why;
        {
            OutputFile a(target), b(target);
            EXPECT_NE(a.temporary(), b.temporary());
            a.write("from a");
            b.write("from b");
            a.commit();
            try {
                b.commit();
            } catch (const Error& e) {
                EXPECT_EQ(e.status(), DWELL_ERR_UNAVAILABLE);
                why = e.what();
            }
        }
        EXPECT_TRUE(one_line(why)) << why;
        EXPECT_NE(why.find(target.string()), std::string::npos) << why;
        EXPECT_NE(why.find("another writer"), std::string::npos) << why;
        EXPECT_EQ(read_all(target), "from a");
        EXPECT_TRUE(temporaries_in(dir_).empty());
    }
}

TEST_F(OutputFileTest, AnUncommittedFileLeavesTheOldTargetAlone) {
    const fs::path target = dir_ / "keep.bin";
    std::ofstream(target) << "before";
    {
        OutputFile f(target);
        f.write("half");
    }
    EXPECT_EQ(read_all(target), "before");
    EXPECT_TRUE(temporaries_in(dir_).empty());
    write_output_file(target, "after");
    EXPECT_EQ(read_all(target), "after");
}

}  // namespace
}  // namespace dwell
