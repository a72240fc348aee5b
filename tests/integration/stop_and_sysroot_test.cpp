// `dwell run` and `dwell chat` against a hostile or incomplete --sysroot,
// and stopped by SIGINT/SIGTERM: the thermal governor's devfreq cap is
// restored on the way out (exit 130/143), a FIFO in the tree is refused in
// one line rather than hanging, a tree without proc/meminfo still runs, and
// file names in the error line cannot carry escape sequences. Every child
// runs under a deadline and is killed past it, so a regression fails.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class Child {
public:
    // stdin is a pipe this object holds open (chat and run -i wait on it);
    // stdout and stderr go to files.
    Child(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
        int in[2];
        if (::pipe(in) != 0) throw std::runtime_error("pipe");
        std::vector<std::string> argv_s = emulator_prefix();
        argv_s.push_back(dwell_binary().string());
        argv_s.insert(argv_s.end(), args.begin(), args.end());
        pid_ = ::fork();
        if (pid_ == 0) {
            ::dup2(in[0], 0);
            ::close(in[0]);
            ::close(in[1]);
            if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr))
                ::_exit(127);
            std::vector<char*> argv;
            for (auto& a : argv_s) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execvp(argv[0], argv.data());  // an emulator is found in PATH
            ::_exit(127);
        }
        ::close(in[0]);
        stdin_ = in[1];
    }
    ~Child() {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (stdin_ >= 0) ::close(stdin_);
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    void signal(int sig) const { ::kill(pid_, sig); }
    void write_stdin(const std::string& s) const {
        ASSERT_EQ(::write(stdin_, s.data(), s.size()), static_cast<ssize_t>(s.size()));
    }
    // The exit code (128 + signal when killed by one), or -1 when it is
    // still running after `limit` (then it is killed).
    int wait(std::chrono::milliseconds limit) {
        const auto end = std::chrono::steady_clock::now() + limit;
        int status = 0;
        while (std::chrono::steady_clock::now() < end) {
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                reaped_ = true;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            std::this_thread::sleep_for(20ms);
        }
        return -1;
    }
    bool running() {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
        reaped_ = true;
        return false;
    }

private:
    pid_t pid_ = -1;
    int stdin_ = -1;
    bool reaped_ = false;
};

// A hot captured device: one zone at 90 C and a devfreq device at 3 GHz.
class HotSysroot : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = model_path("stories260K.gguf");
        if (model_.empty()) GTEST_SKIP() << "stories260K.gguf not found in " << models_dir();
        root_ = dir_.path() / "root";
        fs::create_directories(root_ / "proc");
        fs::create_directories(root_ / "sys/class/thermal/thermal_zone0");
        devfreq_ = root_ / "sys/class/devfreq/gpu";
        fs::create_directories(devfreq_);
        std::ofstream(root_ / "proc/meminfo") << "MemTotal: 8000000 kB\n";
        std::ofstream(root_ / "sys/class/thermal/thermal_zone0/type") << "soc\n";
        std::ofstream(root_ / "sys/class/thermal/thermal_zone0/temp") << "90000\n";
        std::ofstream(devfreq_ / "max_freq") << "3000000\n";
        std::ofstream(devfreq_ / "min_freq") << "300000\n";
        manifest_ = dir_.write("hot.toml",
                               "[[backend]]\nplugin = \"cpu\"\noptions = { threads = \"1\" }\n"
                               "[thermal]\nzones = [\"soc\"]\nperiod_ms = 50\n"
                               "target_c = 42\nlimit_c = 48\n"
                               "devfreq = [{ path = \"/sys/class/devfreq/gpu\" }]\n");
    }
    std::string max_freq() const {
        std::ifstream in(devfreq_ / "max_freq");
        std::string v;
        in >> v;
        return v;
    }
    // Until the governor has lowered the cap (it reads every 50 ms).
    bool wait_for_cap(Child& c) {
        for (int i = 0; i < 500; ++i) {
            if (max_freq() == "300000") return true;
            if (!c.running()) return false;
            std::this_thread::sleep_for(20ms);
        }
        return false;
    }
    // Until `file` holds `text` (the command got that far).
    bool wait_for_text(Child& c, const fs::path& file, const std::string& text) {
        for (int i = 0; i < 500; ++i) {
            if (read_file(file).find(text) != std::string::npos) return true;
            if (!c.running()) return false;
            std::this_thread::sleep_for(20ms);
        }
        return false;
    }
    std::vector<std::string> args(const std::string& command,
                                  std::vector<std::string> extra) const {
        std::vector<std::string> a{command,
                                   "-m",
                                   model_.string(),
                                   "--sysroot",
                                   root_.string(),
                                   "--manifest",
                                   manifest_.string(),
                                   "--thermal",
                                   "on"};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
    std::string err() const { return read_file(dir_.path() / "err"); }

    TempDir dir_;
    fs::path model_, root_, devfreq_, manifest_;
};

TEST_F(HotSysroot, RunRestoresTheDevfreqCapOnSigintAndSigterm) {
    for (const int sig : {SIGINT, SIGTERM}) {
        SCOPED_TRACE(sig);
        std::ofstream(devfreq_ / "max_freq") << "3000000\n";
        Child c(args("run", {"-p", "Once", "-n", "1000000", "-c", "256", "--ctx-full", "shift"}),
                dir_.path() / "out", dir_.path() / "err");
        ASSERT_TRUE(wait_for_cap(c)) << "the governor never capped: " << err();
        c.signal(sig);
        EXPECT_EQ(c.wait(20s), 128 + sig) << err();
        EXPECT_EQ(max_freq(), "3000000") << err();
    }
}

TEST_F(HotSysroot, RunInteractiveStopsWhileWaitingForALine) {
    Child c(args("run", {"-p", "Once", "-n", "2", "-i"}), dir_.path() / "out", dir_.path() / "err");
    ASSERT_TRUE(wait_for_cap(c)) << err();
    // The first reply is out (its line ends): it reads stdin.
    ASSERT_TRUE(wait_for_text(c, dir_.path() / "out", "\n")) << err();
    std::this_thread::sleep_for(100ms);
    c.signal(SIGTERM);
    EXPECT_EQ(c.wait(20s), 143) << err();
    EXPECT_EQ(max_freq(), "3000000") << err();
}

TEST_F(HotSysroot, ChatRestoresTheDevfreqCapOnSigterm) {
    Child c(args("chat", {"--chat-template", "chatml", "-n", "1000000", "-c", "256", "--ctx-full",
                          "shift"}),
            dir_.path() / "out", dir_.path() / "err");
    ASSERT_TRUE(wait_for_cap(c)) << err();
    // The banner comes once the chat takes signals (Ctrl-C while loading
    // ends it).
    ASSERT_TRUE(wait_for_text(c, dir_.path() / "err", "/quit\n")) << err();
    // Ctrl-C while no reply runs only says how to leave.
    c.signal(SIGINT);
    std::this_thread::sleep_for(300ms);
    ASSERT_TRUE(c.running()) << err();
    c.write_stdin("tell me a story\n");  // a long reply, stopped by SIGTERM
    std::this_thread::sleep_for(300ms);
    c.signal(SIGTERM);
    EXPECT_EQ(c.wait(20s), 143) << err();
    EXPECT_EQ(max_freq(), "3000000") << err();
}

TEST_F(HotSysroot, AFifoThermalZoneNeitherHangsDetectionNorTheGovernor) {
    fs::remove(root_ / "sys/class/thermal/thermal_zone0/temp");
    ASSERT_EQ(::mkfifo((root_ / "sys/class/thermal/thermal_zone0/temp").c_str(), 0600), 0);
    {
        // Choosing a manifest probes the device: refused in one line.
        Child c(
            {"run", "-m", model_.string(), "-p", "Once", "-n", "2", "--sysroot", root_.string()},
            dir_.path() / "out", dir_.path() / "err");
        EXPECT_EQ(c.wait(20s), 1) << "hung or ran: " << err();
        EXPECT_NE(err().find("thermal_zone0/temp is a FIFO, not a regular file"), std::string::npos)
            << err();
    }
    // With --manifest only the governor reads it: an unreadable sensor.
    Child c(args("run", {"-p", "Once", "-n", "2"}), dir_.path() / "out", dir_.path() / "err");
    EXPECT_EQ(c.wait(20s), 0) << "hung or failed: " << err();
    EXPECT_NE(err().find("thermal_zone0/temp is unreadable"), std::string::npos) << err();
}

TEST_F(HotSysroot, ATreeWithoutMeminfoStillRuns) {
    fs::remove(root_ / "proc/meminfo");
    // No [memory] budget_mb: the KV page space would be the device's memory.
    const fs::path cpu = dir_.write("cpu.toml", "[[backend]]\nplugin = \"cpu\"\n");
    Child c({"run", "-m", model_.string(), "-p", "Once", "-n", "4", "--temp", "0", "--sysroot",
             root_.string(), "--manifest", cpu.string()},
            dir_.path() / "out", dir_.path() / "err");
    EXPECT_EQ(c.wait(60s), 0) << err();
    EXPECT_NE(err().find("cannot tell how much memory this device has"), std::string::npos)
        << err();
    EXPECT_EQ(read_file(dir_.path() / "out").rfind("Once", 0), 0u);
}

TEST(CliErrorLine, AFileNameCannotCarryEscapeSequences) {
    const auto r = run_dwell({"run", "-m", "missing\x1b[2J\nfake: line.gguf", "-p", "x"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("missing\\x1b[2J\\x0afake: line.gguf"), std::string::npos) << r.err;
    // The name's newline does not start a line of its own.
    EXPECT_EQ(r.err.find("\nfake: line"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dwell::test
