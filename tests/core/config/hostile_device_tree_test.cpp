// A captured device tree (--sysroot) is outside input: FIFOs, links to
// /dev/zero, huge files, overflowing numbers, escape sequences in names and
// devfreq paths that climb out of the root. Every probe fails in one line
// naming the file, or reads the fact as unknown; nothing blocks or fills
// memory. The tests that would hang or grow without a bound if a read
// regressed run in a forked child under alarm(), so a regression fails.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/config/device_facts.hpp"
#include "dwell/core/config/manifest.hpp"
#include "dwell/core/platform/system_memory.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/runtime/runtime_thermal.hpp"
#include "dwell/core/thermal/thermal_sensors.hpp"
#include "test_dirs.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

// Runs `check` in a child that SIGALRM ends after `seconds`; the child's
// exit code is check()'s result (0: passed). A hang or a crash is a failure
// with its own message, never a test that does not end.
::testing::AssertionResult bounded(const std::function<int()>& check, unsigned seconds = 10) {
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return ::testing::AssertionFailure() << "fork failed";
    if (pid == 0) {
        ::alarm(seconds);
        int rc = 99;
        try {
            rc = check();
        } catch (...) {
            rc = 98;
        }
        std::_Exit(rc);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        return ::testing::AssertionFailure()
               << (WTERMSIG(status) == SIGALRM
                       ? "hung (still reading after the alarm)"
                       : "killed by signal " + std::to_string(WTERMSIG(status)));
    }
    if (WEXITSTATUS(status) != 0)
        return ::testing::AssertionFailure() << "check failed with code " << WEXITSTATUS(status);
    return ::testing::AssertionSuccess();
}

// 0 when probe() throws a dwell::Error whose message holds every `needle`;
// 1 when it does not throw, 2 when the message misses one (printed).
int probe_refuses(const fs::path& root, const std::vector<std::string>& needles) {
    try {
        DeviceFacts::probe(root);
    } catch (const Error& e) {
        const std::string m = e.what();
        for (const auto& n : needles) {
            if (m.find(n) == std::string::npos) {
                std::fprintf(stderr, "message '%s' lacks '%s'\n", m.c_str(), n.c_str());
                return 2;
            }
        }
        return 0;
    }
    return 1;
}

class HostileTree : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = test::fresh_test_dir("dwell-hostile");
        fs::create_directories(root_ / "proc");
        fs::create_directories(root_ / "sys/devices/soc0");
        fs::create_directories(root_ / "sys/class/thermal/thermal_zone0");
        std::ofstream(root_ / "proc/cpuinfo") << "processor\t: 0\nCPU part\t: 0xd82\n";
        std::ofstream(root_ / "proc/meminfo") << "MemTotal:        8000000 kB\n";
        std::ofstream(root_ / "sys/devices/soc0/soc_id") << "557\n";
        std::ofstream(root_ / "sys/class/thermal/thermal_zone0/type") << "cpu\n";
        std::ofstream(root_ / "sys/class/thermal/thermal_zone0/temp") << "41000\n";
    }
    void TearDown() override { test::remove_test_dir(root_); }

    // Replaces the file with a FIFO that no one writes.
    void fifo(const std::string& rel) {
        fs::remove(root_ / rel);
        ASSERT_EQ(::mkfifo((root_ / rel).c_str(), 0600), 0);
    }
    void dev_zero(const std::string& rel) {
        fs::remove(root_ / rel);
        fs::create_symlink("/dev/zero", root_ / rel);
    }
    fs::path root_;
};

TEST_F(HostileTree, TheSaneTreeReads) {
    const DeviceFacts f = DeviceFacts::probe(root_);
    EXPECT_EQ(f.soc_id, "557");
    EXPECT_EQ(f.memory_bytes, uint64_t{8000000} * 1024);
    ASSERT_EQ(f.thermal_zones.size(), 1u);
    EXPECT_EQ(f.thermal_zones[0].millicelsius, 41000);
}

TEST_F(HostileTree, AFifoAnywhereIsRefusedByNameWithoutBlocking) {
    for (const std::string rel :
         {"proc/cpuinfo", "proc/meminfo", "sys/devices/soc0/soc_id",
          "sys/class/thermal/thermal_zone0/type", "sys/class/thermal/thermal_zone0/temp"}) {
        SCOPED_TRACE(rel);
        SetUp();
        fifo(rel);
        EXPECT_TRUE(bounded([&] { return probe_refuses(root_, {rel, "FIFO"}); }));
    }
}

TEST_F(HostileTree, AFifoGetpropFileIsRefusedWithoutBlocking) {
    fifo("getprop.txt");
    EXPECT_TRUE(bounded([&] { return probe_refuses(root_, {"getprop.txt", "FIFO"}); }));
    SetUp();
    fifo("props");
    EXPECT_TRUE(bounded([&] {
        try {
            DeviceProbeOptions o;
            o.root = root_;
            o.getprop_file = root_ / "props";
            DeviceFacts::probe(o);
        } catch (const Error& e) {
            return std::string(e.what()).find("(--getprop)") != std::string::npos ? 0 : 2;
        }
        return 1;
    }));
}

TEST_F(HostileTree, ALinkToDevZeroIsRefusedWithoutReadingIt) {
    for (const std::string rel : {"proc/cpuinfo", "sys/devices/soc0/soc_id", "proc/meminfo"}) {
        SCOPED_TRACE(rel);
        SetUp();
        dev_zero(rel);
        // Two seconds: unbounded reading grows by about 0.7 GB/s.
        EXPECT_TRUE(bounded([&] { return probe_refuses(root_, {rel, "character device"}); }, 2));
    }
}

TEST_F(HostileTree, OversizedFilesAreRefusedByName) {
    // A sysfs value is under a page; cpuinfo is under a MiB on any real device.
    std::ofstream(root_ / "sys/devices/soc0/soc_id") << std::string(100 << 10, '7') << "\n";
    EXPECT_EQ(probe_refuses(root_, {"soc0/soc_id", "larger than 64.0 KiB"}), 0);
    SetUp();
    {
        std::ofstream out(root_ / "proc/cpuinfo");
        for (int i = 0; i < 400000; ++i) out << "model name\t: x\n";  // 6 MB
    }
    EXPECT_EQ(probe_refuses(root_, {"proc/cpuinfo", "larger than 4.0 MiB"}), 0);
}

TEST_F(HostileTree, MemoryReadersTreatABrokenMeminfoAsUnknown) {
    fifo("proc/meminfo");
    EXPECT_TRUE(bounded([&] {
        return physical_memory_bytes(root_) == 0 && available_memory_bytes(root_) == 0 ? 0 : 1;
    }));
    SetUp();
    dev_zero("proc/meminfo");
    EXPECT_TRUE(bounded([&] { return physical_memory_bytes(root_) == 0 ? 0 : 1; }, 2));
}

TEST_F(HostileTree, ThermalSensorsReportAFifoAsUnreadableWithoutBlocking) {
    fifo("sys/class/thermal/thermal_zone0/temp");
    EXPECT_TRUE(bounded([&] {
        ThermalConfig c;
        c.zones = {"cpu"};
        const ThermalSensors s(root_, c);
        const ThermalReading r = s.read();
        return !r.temp_c && r.problem.find("unreadable") != std::string::npos ? 0 : 1;
    }));
}

TEST(MeminfoField, OverflowAndGarbageAreUnknown) {
    EXPECT_EQ(meminfo_field_bytes("MemTotal:        8000000 kB\n", "MemTotal:"),
              uint64_t{8000000} * 1024);
    // The largest kB count whose bytes fit in 64 bits, and one more.
    EXPECT_EQ(meminfo_field_bytes("MemTotal: 18014398509481983 kB\n", "MemTotal:"),
              uint64_t{18014398509481983} * 1024);
    EXPECT_EQ(meminfo_field_bytes("MemTotal: 18014398509481984 kB\n", "MemTotal:"), 0u);
    EXPECT_EQ(meminfo_field_bytes("MemTotal: 18014398509481985 kB\n", "MemTotal:"), 0u);
    EXPECT_EQ(meminfo_field_bytes("MemTotal: 99999999999999999999999 kB\n", "MemTotal:"), 0u);
    EXPECT_EQ(meminfo_field_bytes("MemTotal: -5 kB\n", "MemTotal:"), 0u);
    EXPECT_EQ(meminfo_field_bytes("MemFree: 5 kB\n", "MemTotal:"), 0u);
}

TEST_F(HostileTree, AnOverflowingMemTotalIsUnknownNotOneKiB) {
    std::ofstream(root_ / "proc/meminfo") << "MemTotal: 18014398509481985 kB\n";
    EXPECT_EQ(DeviceFacts::probe(root_).memory_bytes, 0u);
    EXPECT_EQ(physical_memory_bytes(root_), 0u);
}

bool has_control_bytes(const std::string& s) {
    for (const char c : s)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
    return false;
}

TEST_F(HostileTree, EscapeSequencesInFactsNeverReachTheSummary) {
    std::ofstream(root_ / "getprop.txt") << "[ro.soc.model]: [\x1b[2J\x1b[31mEVIL]\n"
                                         << "[ro.product.model]: [a\rb]\n";
    std::ofstream(root_ / "proc/cpuinfo") << "processor\t: 0\nHardware\t: hw\x1b]0;title\x07\n";
    const DeviceFacts f = DeviceFacts::probe(root_);
    ASSERT_EQ(f.soc_model, "\x1b[2J\x1b[31mEVIL");  // the fact itself is kept for matching
    const std::string s = f.summary();
    EXPECT_FALSE(has_control_bytes(s)) << s;
    EXPECT_NE(s.find("\\x1b[2J\\x1b[31mEVIL"), std::string::npos) << s;
    EXPECT_NE(s.find("a\\x0db"), std::string::npos) << s;

    const Manifest m = Manifest::parse(
        "[device]\nmatch = { soc_model = [\"SM8650\"] }\n"
        "[[backend]]\nplugin = \"cpu\"\n",
        "m.toml");
    const std::string why = explain_match(m, f);
    EXPECT_FALSE(has_control_bytes(why)) << why;
    EXPECT_NE(why.find("\\x1b"), std::string::npos) << why;
}

TEST_F(HostileTree, DwellSocModelCannotForgeALine) {
    ::setenv("DWELL_SOC_MODEL", "x\nfake: line\x1b[31m", 1);
    const DeviceFacts f = DeviceFacts::probe(root_);
    ::unsetenv("DWELL_SOC_MODEL");
    const std::string s = f.summary();
    EXPECT_FALSE(has_control_bytes(s)) << s;
    EXPECT_NE(s.find("x\\x0afake: line\\x1b[31m"), std::string::npos) << s;
}

TEST(DevfreqPath, OnlyAbsolutePathsThatStayInsideTheRoot) {
    EXPECT_EQ(devfreq_path_inside_root("/sys/class/devfreq/gpu"),
              fs::path("sys/class/devfreq/gpu"));
    EXPECT_EQ(devfreq_path_inside_root("/sys/class/kgsl/./kgsl-3d0/devfreq/"),
              fs::path("sys/class/kgsl/kgsl-3d0/devfreq/"));
    EXPECT_FALSE(devfreq_path_inside_root("../outside"));
    EXPECT_FALSE(devfreq_path_inside_root("/sys/../../etc"));
    EXPECT_FALSE(devfreq_path_inside_root("/sys/class/devfreq/gpu/.."));
    EXPECT_FALSE(devfreq_path_inside_root("sys/class/devfreq/gpu"));
    EXPECT_FALSE(devfreq_path_inside_root("/"));
    EXPECT_FALSE(devfreq_path_inside_root(""));
}

TEST(DevfreqPath, TheManifestRefusesAPathThatClimbsOut) {
    const auto parse = [](const std::string& path) {
        return Manifest::parse(
            "[[backend]]\nplugin = \"cpu\"\n[thermal]\nzones = [\"z\"]\n"
            "devfreq = [{ path = \"" +
                path + "\" }]\n",
            "t.toml");
    };
    EXPECT_EQ(parse("/sys/class/devfreq/gpu").thermal.devfreq.at(0).path, "/sys/class/devfreq/gpu");
    for (const std::string bad : {"../outside", "/sys/../../outside", "sys/class/devfreq/gpu"}) {
        SCOPED_TRACE(bad);
        try {
            parse(bad);
            ADD_FAILURE() << "accepted";
        } catch (const Error& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find("t.toml"), std::string::npos) << m;
            EXPECT_NE(m.find("devfreq[0] path"), std::string::npos) << m;
            EXPECT_NE(m.find("'..'"), std::string::npos) << m;
        }
    }
}

class DevfreqCap : public HostileTree {
protected:
    std::string read(const fs::path& p) {
        std::ifstream in(p);
        std::string v;
        in >> v;
        return v;
    }
    static ThermalActions capped() {
        ThermalActions a;
        a.freq_capped = true;
        return a;
    }
    std::vector<std::unique_ptr<Backend>> no_backends_;
};

TEST_F(DevfreqCap, CapsInsideTheRootAndRestores) {
    const fs::path dir = root_ / "sys/class/devfreq/gpu";
    fs::create_directories(dir);
    std::ofstream(dir / "max_freq") << "900\n";
    std::ofstream(dir / "min_freq") << "300\n";
    ThermalConfig c;
    c.devfreq.push_back({"/sys/class/devfreq/gpu", 0});
    {
        RuntimeThermal t(c, no_backends_, root_);
        t.apply(capped());
        EXPECT_EQ(read(dir / "max_freq"), "300");
    }
    EXPECT_EQ(read(dir / "max_freq"), "900");
}

TEST_F(DevfreqCap, APathThatClimbsOutIsNeverWritten) {
    // The runtime's own check, for a config that did not come through a
    // manifest: root_/../outside would be written without it.
    const fs::path outside = root_.parent_path() / (root_.filename().string() + "-outside");
    fs::create_directories(outside);
    std::ofstream(outside / "max_freq") << "900\n";
    std::ofstream(outside / "min_freq") << "300\n";
    ThermalConfig c;
    c.devfreq.push_back({"/../" + outside.filename().string(), 0});
    {
        RuntimeThermal t(c, no_backends_, root_);
        t.apply(capped());
        EXPECT_EQ(read(outside / "max_freq"), "900");
    }
    fs::remove_all(outside);
}

TEST_F(DevfreqCap, AFifoMaxFreqIsSkippedWithoutBlocking) {
    const fs::path dir = root_ / "sys/class/devfreq/gpu";
    fs::create_directories(dir);
    ASSERT_EQ(::mkfifo((dir / "max_freq").c_str(), 0600), 0);
    std::ofstream(dir / "min_freq") << "300\n";
    ThermalConfig c;
    c.devfreq.push_back({"/sys/class/devfreq/gpu", 0});
    EXPECT_TRUE(bounded([&] {
        RuntimeThermal t(c, no_backends_, root_);
        t.apply(capped());
        return 0;
    }));
}

}  // namespace
}  // namespace dwell
