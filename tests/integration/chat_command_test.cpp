// `dwell chat` as a person would use it: a scripted conversation through
// stdin (commands, save and load that leave the conversation unchanged),
// and Ctrl-C during a reply stopping the reply, not the program.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "integration_support.hpp"
#include "test_paths.hpp"

extern char** environ;

namespace dwell::test {
namespace {

// The replies of a transcript: the lines that are neither command echoes
// nor "(...)" notes, in order.
std::vector<std::string> replies(const std::string& out) {
    std::vector<std::string> r;
    std::string line;
    for (char c : out + "\n") {
        if (c != '\n') {
            line += c;
            continue;
        }
        if (!line.empty() && line[0] != '(' && line.rfind("context ", 0) != 0 &&
            line.rfind("placement:", 0) != 0 && line.rfind("1 split", 0) != 0 &&
            line.rfind("backends:", 0) != 0)
            r.push_back(line);
        line.clear();
    }
    return r;
}

class Chat : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = model_path("stories260K.gguf");
        if (model_.empty()) GTEST_SKIP() << "stories260K.gguf not found in " << models_dir();
        manifest_ = dir_.write("cpu.toml", "[[backend]]\nplugin = \"cpu\"\n[cpu]\nthreads = 1\n");
    }
    std::vector<std::string> args(int n) {
        return {"chat",   "-m",         model_.string(),   "--chat-template",
                "chatml", "-n",         std::to_string(n), "--temp",
                "0",      "--manifest", manifest_.string()};
    }
    TempDir dir_;
    std::filesystem::path model_, manifest_;
};

TEST_F(Chat, CommandsAndASavedConversationContinueExactlyAsWithoutSaving) {
    const auto straight = run_dwell(args(12), "Tell me a story\nAnd then?\n/quit\n");
    ASSERT_EQ(straight.exit_code, 0) << straight.err;
    const auto file = (dir_.path() / "talk").string();
    const auto saved =
        run_dwell(args(12), "Tell me a story\n/stats\n/save " + file + "\n/reset\n/load " + file +
                                "\nAnd then?\n/nonsense\n/quit\n");
    ASSERT_EQ(saved.exit_code, 0) << saved.err;
    const auto a = replies(straight.out), b = replies(saved.out);
    ASSERT_EQ(a.size(), 2u) << straight.out;
    ASSERT_EQ(b.size(), 2u) << saved.out;
    EXPECT_EQ(a, b);  // the second reply is the same after save, reset, load
    EXPECT_NE(saved.out.find("context "), std::string::npos) << saved.out;
    EXPECT_NE(saved.out.find("placement: cpu/cpu0"), std::string::npos);
    EXPECT_NE(saved.out.find("\nbackends: cpu/cpu0 healthy, "), std::string::npos) << saved.out;
    EXPECT_NE(saved.out.find("(saved to " + file + ")"), std::string::npos);
    EXPECT_NE(saved.out.find("(loaded " + file + ")"), std::string::npos);
    EXPECT_NE(saved.out.find("(unknown command /nonsense;"), std::string::npos);
    EXPECT_NE(saved.err.find("with the chatml template"), std::string::npos) << saved.err;
}

TEST_F(Chat, AnUnknownTemplateIsOneLineNamingTheOverride) {
    auto a = args(4);
    a.erase(a.begin() + 3, a.begin() + 5);  // no --chat-template: stories260K has none
    const auto r = run_dwell(a, "hi\n/quit\n");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--chat-template NAME"), std::string::npos) << r.err;
}

TEST_F(Chat, CtrlCStopsTheReplyNotTheProgram) {
    // A slow device (the test backend "partial" sleeps 20 ms per step) so
    // the reply is still running when the signal comes.
    manifest_ = dir_.write("slow.toml",
                           "[[backend]]\nplugin = \"partial\"\noptions = { delay_ms = \"20\" }\n"
                           "[[backend]]\nplugin = \"cpu\"\n[cpu]\nthreads = 1\n"
                           "[plugins]\nsearch_paths = [\"" +
                               test_plugin_dir().string() + "\"]\n");
    int in_pipe[2], out_pipe[2];
    ASSERT_EQ(pipe(in_pipe), 0);
    ASSERT_EQ(pipe(out_pipe), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_addclose(&fa, in_pipe[1]);
    posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
    std::vector<std::string> argv_s = emulator_prefix();
    argv_s.push_back(dwell_binary().string());
    for (const auto& a : args(400)) argv_s.push_back(a);
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in_pipe[0]);
    close(out_pipe[1]);
    const std::string ask = "Tell me a very long story\n";
    ASSERT_EQ(write(in_pipe[1], ask.data(), ask.size()), static_cast<ssize_t>(ask.size()));
    // Wait for the reply to start, then interrupt it.
    std::string out;
    char buf[4096];
    while (out.empty()) {
        const ssize_t n = read(out_pipe[0], buf, sizeof buf);
        ASSERT_GT(n, 0) << "dwell chat ended before replying";
        out.append(buf, static_cast<size_t>(n));
    }
    kill(pid, SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const std::string then = "/stats\n/quit\n";
    ASSERT_EQ(write(in_pipe[1], then.data(), then.size()), static_cast<ssize_t>(then.size()));
    close(in_pipe[1]);
    for (ssize_t n; (n = read(out_pipe[0], buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<size_t>(n));
    close(out_pipe[0]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << out;
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_NE(out.find(" [stopped]"), std::string::npos) << out;
    EXPECT_NE(out.find("context "), std::string::npos) << out;  // it went on to /stats
}

TEST_F(Chat, ASavedConversationIsReadableByItsOwnerOnly) {
    const auto file = (dir_.path() / "private").string();
    const auto r = run_dwell(args(4), "Tell me a story\n/save " + file + "\n/quit\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const std::string& f : {file, file + ".chat.json"}) {
        struct stat st {};
        ASSERT_EQ(::stat(f.c_str(), &st), 0) << f;
        EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
    }
    for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
        EXPECT_EQ(e.path().filename().string().find(".dwell-tmp."), std::string::npos) << e.path();
}

}  // namespace
}  // namespace dwell::test
