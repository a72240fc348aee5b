#include "dwell/core/config/manifest.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "dwell/core/base/error.hpp"
#include "dwell/status.h"

namespace fs = std::filesystem;

namespace {

// Expects parse() to refuse `text` with exactly `prefix` ("file:line:col:")
// at the start of a one-line message that mentions `phrase`.
void expect_invalid(const std::string& text, const std::string& prefix, const std::string& phrase) {
    try {
        dwell::Manifest::parse(text, "test.toml");
        ADD_FAILURE() << "accepted:\n" << text;
    } catch (const dwell::Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT) << msg;
        EXPECT_EQ(msg.rfind(prefix, 0), 0u)
            << "message: " << msg << "\nexpected prefix: " << prefix;
        EXPECT_NE(msg.find(phrase), std::string::npos)
            << "message: " << msg << "\nphrase: " << phrase;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

const std::string kCpu = "[[backend]]\nplugin = \"cpu\"\n";

// A scratch folder per test, removed afterwards.
class ManifestFileTest : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("dwell_manifest_" + std::to_string(::getpid()) + "_" + info->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    fs::path write(const std::string& rel, const std::string& text) {
        const fs::path p = dir_ / rel;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << text;
        return p;
    }
    fs::path dir_;
};

}  // namespace

TEST(ManifestTest, ParsesShippedGenericManifest) {
    const fs::path path = DWELL_TEST_SOURCE_DIR "/manifests/generic-x86_64.toml";
    const dwell::Manifest m = dwell::Manifest::load(path);
    EXPECT_EQ(m.source, path);
    EXPECT_EQ(m.name, "generic x86-64 Linux");
    EXPECT_EQ(m.match.arch, std::vector<std::string>{"x86_64"});
    EXPECT_TRUE(m.match.soc_model.empty());
    ASSERT_EQ(m.backends.size(), 1u);
    EXPECT_EQ(m.backends[0].plugin, "cpu");
    EXPECT_FALSE(m.backends[0].device.has_value());
    EXPECT_TRUE(m.backends[0].options.empty());
    EXPECT_TRUE(m.backends[0].ops.empty());
    EXPECT_TRUE(m.backends[0].layers.empty());
    EXPECT_GT(m.backends[0].line, 0);
    EXPECT_EQ(m.memory.budget_bytes, 0u);
    EXPECT_EQ(m.memory.page_size, 16384u);
    EXPECT_EQ(m.memory.weights, "mmap");
    EXPECT_FALSE(m.memory.mlock);
    EXPECT_EQ(m.cpu.threads, 0);
    EXPECT_EQ(m.cpu.affinity, "any");
    EXPECT_EQ(m.kv.dtype, DWELL_F16);
    EXPECT_EQ(m.kv.prefix_cache_bytes, uint64_t{256} << 20);
    EXPECT_TRUE(m.plugins.search_paths.empty());
    EXPECT_TRUE(m.plugins.sha256.empty());
}

// The phone projection (tests/bench/phone_projection.sh) reads the spec-sheet
// rates of every phone manifest; a phone shipped without them would drop
// out of its table silently.
TEST(ManifestTest, ShippedPhoneManifestsCarryTheirRates) {
    for (const char* phone : {"snapdragon-8gen3", "dimensity-9300", "kirin-9000s"}) {
        SCOPED_TRACE(phone);
        const dwell::Manifest m = dwell::Manifest::load(
            fs::path(DWELL_TEST_SOURCE_DIR "/manifests") / (std::string(phone) + ".toml"));
        EXPECT_GE(m.storage_read_mb_s, 1000.0);
        EXPECT_GE(m.dram_bandwidth_gb_s, 20.0);
        EXPECT_GT(m.memory.budget_bytes, 0u);
    }
}

TEST(ManifestTest, ParsesEveryKey) {
    const std::string hash = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08";
    const std::string text = R"([device]
name = "Test phone"
storage_read_mb_s = 4200
dram_bandwidth_gb_s = 76.8

[device.match]
soc_model = ["SM8650", "SM8650P"]
soc_id = ["557"]
cpu_part = ["0xd82"]
arch = ["aarch64"]

[[backend]]
plugin = "qnn"
device = "htp0"
options = { perf_mode = "burst", vtcm_mb = 8 }
ops = ["matmul", "attention", "moe_combine"]
layers = [0, 1, 31]

[[backend]]
plugin = "cpu"

[memory]
budget_mb = 3072
page_kb = 64
weights = "stream"
mlock = true
weight_budget_mb = 512
pin_layers = [0, 21]
pin_auto = false
prefetch_layers = 3

[cpu]
threads = 4
affinity = "big"

[kv]
dtype = "fp8_e4m3"

[thermal]
target_c = 42
limit_c = 47.5
zones = ["cpu0", "gpu"]
period_ms = 500
kp = 0.2
devfreq = [{ path = "/sys/class/devfreq/gpu", cap_khz = 500000 }]

[plugins]
search_paths = ["/opt/dwell/plugins"]
sha256 = { qnn = ")" + hash + R"(" }
)";
    const dwell::Manifest m = dwell::Manifest::parse(text, "/etc/dwell/phone.toml");
    EXPECT_EQ(m.source, fs::path("/etc/dwell/phone.toml"));
    EXPECT_EQ(m.name, "Test phone");
    EXPECT_DOUBLE_EQ(m.storage_read_mb_s, 4200);
    EXPECT_DOUBLE_EQ(m.dram_bandwidth_gb_s, 76.8);
    EXPECT_EQ(m.match.soc_model, (std::vector<std::string>{"SM8650", "SM8650P"}));
    EXPECT_EQ(m.match.soc_id, std::vector<std::string>{"557"});
    EXPECT_EQ(m.match.cpu_part, std::vector<std::string>{"0xd82"});
    EXPECT_EQ(m.match.arch, std::vector<std::string>{"aarch64"});

    ASSERT_EQ(m.backends.size(), 2u);
    const dwell::ManifestBackend& qnn = m.backends[0];
    EXPECT_EQ(qnn.plugin, "qnn");
    EXPECT_EQ(qnn.device, std::optional<std::string>("htp0"));
    EXPECT_EQ(qnn.options,
              (std::map<std::string, std::string>{{"perf_mode", "burst"}, {"vtcm_mb", "8"}}));
    EXPECT_EQ(qnn.ops, (std::vector<std::string>{"matmul", "attention", "moe_combine"}));
    EXPECT_EQ(qnn.layers, (std::vector<int32_t>{0, 1, 31}));
    EXPECT_EQ(qnn.line, 12);
    EXPECT_EQ(m.backends[1].plugin, "cpu");
    EXPECT_EQ(m.backends[1].line, 19);

    EXPECT_EQ(m.memory.budget_bytes, 3072ull << 20);
    EXPECT_EQ(m.memory.page_size, 64u * 1024);
    EXPECT_EQ(m.memory.weights, "stream");
    EXPECT_TRUE(m.memory.mlock);
    EXPECT_EQ(m.memory.weight_budget_bytes, 512ull << 20);
    EXPECT_EQ(m.memory.pin_layers, (std::vector<int32_t>{0, 21}));
    EXPECT_FALSE(m.memory.pin_auto);
    EXPECT_EQ(m.memory.prefetch_layers, 3);
    EXPECT_EQ(m.cpu.threads, 4);
    EXPECT_EQ(m.cpu.affinity, "big");
    EXPECT_EQ(m.kv.dtype, DWELL_FP8_E4M3);

    EXPECT_TRUE(m.has_thermal);
    EXPECT_EQ(m.thermal.target_c, 42.0);
    EXPECT_EQ(m.thermal.limit_c, 47.5);
    EXPECT_EQ(m.thermal.zones, (std::vector<std::string>{"cpu0", "gpu"}));
    EXPECT_EQ(m.thermal.period_ms, 500);
    EXPECT_EQ(m.thermal.gains.kp, 0.2);
    ASSERT_EQ(m.thermal.devfreq.size(), 1u);
    EXPECT_EQ(m.thermal.devfreq[0].cap_khz, 500000);

    EXPECT_EQ(m.plugins.search_paths, std::vector<fs::path>{"/opt/dwell/plugins"});
    ASSERT_EQ(m.plugins.sha256.count("qnn"), 1u);
    EXPECT_EQ(m.plugins.sha256.at("qnn"),
              "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
}

TEST(ManifestTest, DefaultsWhenOnlyABackendIsGiven) {
    const dwell::Manifest m = dwell::Manifest::parse(kCpu, "min.toml");
    EXPECT_EQ(m.name, "");
    EXPECT_TRUE(m.match.arch.empty());
    EXPECT_EQ(m.storage_read_mb_s, 0.0);
    EXPECT_EQ(m.dram_bandwidth_gb_s, 0.0);
    ASSERT_EQ(m.backends.size(), 1u);
    EXPECT_EQ(m.backends[0].line, 1);
    EXPECT_EQ(m.memory.budget_bytes, 0u);
    EXPECT_EQ(m.memory.page_size, 16384u);
    EXPECT_EQ(m.memory.weights, "mmap");
    EXPECT_FALSE(m.memory.mlock);
    EXPECT_EQ(m.cpu.threads, 0);
    EXPECT_EQ(m.cpu.affinity, "any");
    EXPECT_EQ(m.kv.dtype, DWELL_F16);
    EXPECT_FALSE(m.has_thermal);
    EXPECT_TRUE(m.plugins.search_paths.empty());
}

TEST(ManifestTest, AcceptsEveryKvDtypeAndWeightsMode) {
    const std::pair<const char*, dwell_dtype> dtypes[] = {
        {"f16", DWELL_F16}, {"f32", DWELL_F32}, {"q8_0", DWELL_Q8_0}, {"fp8_e4m3", DWELL_FP8_E4M3}};
    for (const auto& [name, dtype] : dtypes) {
        const auto m = dwell::Manifest::parse(kCpu + "[kv]\ndtype = \"" + name + "\"\n", "kv.toml");
        EXPECT_EQ(m.kv.dtype, dtype) << name;
    }
    for (const char* mode : {"mmap", "load", "stream"}) {
        const auto m =
            dwell::Manifest::parse(kCpu + "[memory]\nweights = \"" + mode + "\"\n", "w.toml");
        EXPECT_EQ(m.memory.weights, mode);
    }
    for (int kb : {4, 8, 16, 1024}) {
        const auto m = dwell::Manifest::parse(
            kCpu + "[memory]\npage_kb = " + std::to_string(kb) + "\n", "p.toml");
        EXPECT_EQ(m.memory.page_size, static_cast<uint64_t>(kb) * 1024);
    }
}

TEST(ManifestTest, OptionValuesBecomeStrings) {
    const auto m = dwell::Manifest::parse(
        "[[backend]]\nplugin = \"x\"\n[backend.options]\n"
        "s = \"text\"\ni = 42\nneg = -7\nt = true\nf = false\nhalf = 0.5\none = 1.0\n"
        "tiny = 1e-7\nbig = 6.02e23\n",
        "opt.toml");
    const std::map<std::string, std::string> expected = {
        {"s", "text"},   {"i", "42"},  {"neg", "-7"},     {"t", "true"},      {"f", "false"},
        {"half", "0.5"}, {"one", "1"}, {"tiny", "1e-07"}, {"big", "6.02e+23"}};
    EXPECT_EQ(m.backends.at(0).options, expected);
}

TEST_F(ManifestFileTest, RelativeSearchPathsResolveAgainstTheManifestFolder) {
    const fs::path file =
        write("conf/phone.toml", kCpu +
                                     "[plugins]\nsearch_paths = [\"plugins\", "
                                     "\"../shared/lib\", \"/abs/dir\", \"~/p\"]\n");
    const dwell::Manifest m = dwell::Manifest::load(file);
    const fs::path conf = fs::absolute(dir_ / "conf");
    ASSERT_EQ(m.plugins.search_paths.size(), 4u);
    EXPECT_EQ(m.plugins.search_paths[0], (conf / "plugins").lexically_normal());
    EXPECT_EQ(m.plugins.search_paths[1], (fs::absolute(dir_) / "shared/lib").lexically_normal());
    EXPECT_EQ(m.plugins.search_paths[2], fs::path("/abs/dir"));
    // "~" is deliberately not expanded.
    EXPECT_EQ(m.plugins.search_paths[3], (conf / "~/p").lexically_normal());
    for (const auto& p : m.plugins.search_paths) EXPECT_TRUE(p.is_absolute()) << p;
}

TEST_F(ManifestFileTest, LoadReportsErrorsWithTheFileName) {
    const fs::path file = write("bad.toml", kCpu + "[cpu]\nthreads = -1\n");
    try {
        dwell::Manifest::load(file);
        FAIL() << "accepted";
    } catch (const dwell::Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(std::string(e.what()).rfind(file.string() + ":4:11: [cpu] threads", 0), 0u)
            << e.what();
    }
}

TEST_F(ManifestFileTest, FolderIsAnIoError) {
    try {
        dwell::Manifest::load(dir_);
        FAIL() << "accepted";
    } catch (const dwell::Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_IO);
        EXPECT_EQ(std::string(e.what()).rfind(dir_.string() + ": cannot read manifest: ", 0), 0u)
            << e.what();
    }
}

TEST(ManifestTest, MissingFileIsAnIoError) {
    const std::string file = "/nonexistent/dwell/manifest.toml";
    try {
        dwell::Manifest::load(file);
        FAIL() << "accepted";
    } catch (const dwell::Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(e.status(), DWELL_ERR_IO);
        EXPECT_EQ(msg.rfind(file + ": cannot read manifest: ", 0), 0u) << msg;
        EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos);
    }
}

TEST(ManifestErrorTest, SyntaxError) {
    expect_invalid(kCpu + "[memory]\nbudget_mb = = 3\n", "test.toml:4:13: ", "parsing");
    expect_invalid(kCpu + "name = \"unterminated\n", "test.toml:3:", "string");
    expect_invalid(kCpu + "[memory]\nmlock = true\nmlock = false\n", "test.toml:5:9: ", "mlock");
}

TEST(ManifestErrorTest, UnknownSection) {
    expect_invalid(kCpu + "\n[memroy]\nbudget_mb = 1\n",
                   "test.toml:4:2: ", "unknown section [memroy]");
}

TEST(ManifestErrorTest, UnknownTopLevelKey) {
    expect_invalid("budget_mb = 1\n" + kCpu,
                   "test.toml:1:1: ", "unknown top-level key 'budget_mb'");
}

TEST(ManifestErrorTest, UnknownKey) {
    expect_invalid(kCpu + "[memory]\n  budget = 1\n",
                   "test.toml:4:3: ", "unknown key 'budget' in [memory]");
    expect_invalid(kCpu + "[device]\nmatch = { arch = [\"x86_64\"], soc = [\"x\"] }\n",
                   "test.toml:4:30: ", "unknown key 'soc' in [device.match]");
    expect_invalid("[[backend]]\nplugin = \"cpu\"\nop = [\"matmul\"]\n",
                   "test.toml:3:1: ", "unknown key 'op' in [[backend]]");
    // The first unknown key in file order, not in the table's (sorted) order.
    expect_invalid(kCpu + "[cpu]\nzz = 1\naa = 2\n", "test.toml:4:1: ", "'zz' in [cpu]");
}

TEST(ManifestErrorTest, WrongType) {
    expect_invalid(kCpu + "[memory]\nbudget_mb = \"3\"\n",
                   "test.toml:4:13: ", "[memory] budget_mb must be an integer, got string");
    expect_invalid(kCpu + "[memory]\nmlock = 1\n",
                   "test.toml:4:9: ", "[memory] mlock must be a bool, got integer");
    expect_invalid(kCpu + "[memory]\npin_layers = [1, \"x\"]\n",
                   "test.toml:4:", "[memory] pin_layers[1] must be an integer");
    expect_invalid(kCpu + "[memory]\nprefetch_layers = 65\n",
                   "test.toml:4:", "[memory] prefetch_layers");
    expect_invalid(kCpu + "[device]\nname = 3.5\n",
                   "test.toml:4:8: ", "[device] name must be a string, got float");
    expect_invalid(kCpu + "[device.match]\narch = \"x86_64\"\n",
                   "test.toml:4:8: ", "[device.match] arch must be an array, got string");
    expect_invalid(kCpu + "[device.match]\narch = [\"x86_64\", 1]\n",
                   "test.toml:4:19: ", "[device.match] arch[1] must be a string, got integer");
    expect_invalid("kv = 1\n" + kCpu, "test.toml:1:6: ", "[kv] must be a table, got integer");
    expect_invalid("[[backend]]\nplugin = \"cpu\"\noptions = { list = [1] }\n", "test.toml:3:20: ",
                   "options.list must be a string, integer, float or bool, got array");
}

TEST(ManifestErrorTest, OutOfRange) {
    expect_invalid(kCpu + "[memory]\nbudget_mb = -1\n",
                   "test.toml:4:13: ", "[memory] budget_mb must be between 0 and");
    expect_invalid(kCpu + "[cpu]\nthreads = 100000\n",
                   "test.toml:4:11: ", "[cpu] threads must be between 0 and 1024, got 100000");
    expect_invalid("[[backend]]\nplugin = \"cpu\"\nlayers = [0, -2]\n",
                   "test.toml:3:14: ", "[[backend]] layers[1] must be between 0 and");
}

TEST(ManifestErrorTest, DeviceRatesOutOfRange) {
    // A rate in the wrong unit (bytes per second for MB/s) is refused, not projected.
    expect_invalid("[device]\nstorage_read_mb_s = 4200000000\n" + kCpu, "test.toml:2:21: ",
                   "[device] storage_read_mb_s must be between 1 and 1e+06, got 4.2e+09");
    expect_invalid("[device]\ndram_bandwidth_gb_s = 0\n" + kCpu, "test.toml:2:23: ",
                   "[device] dram_bandwidth_gb_s must be between 0.1 and 10000, got 0");
    expect_invalid("[device]\ndram_bandwidth_gb_s = \"fast\"\n" + kCpu,
                   "test.toml:2:", "[device] dram_bandwidth_gb_s must be a number");
}

TEST(ManifestErrorTest, BadWeightsMode) {
    expect_invalid(kCpu + "[memory]\nweights = \"mapped\"\n", "test.toml:4:11: ",
                   "[memory] weights must be one of mmap, load, stream, got 'mapped'");
}

TEST(ManifestErrorTest, BadAffinity) {
    expect_invalid(kCpu + "[cpu]\naffinity = \"little\"\n",
                   "test.toml:4:12: ", "[cpu] affinity must be one of any, big");
}

TEST(ManifestErrorTest, BadPageKb) {
    expect_invalid(kCpu + "[memory]\npage_kb = 12\n", "test.toml:4:11: ",
                   "[memory] page_kb must be a power of two between 4 and 1024, got 12");
    expect_invalid(kCpu + "[memory]\npage_kb = 2048\n", "test.toml:4:11: ", "got 2048");
    expect_invalid(kCpu + "[memory]\npage_kb = 2\n", "test.toml:4:11: ", "got 2");
    expect_invalid(kCpu + "[memory]\npage_kb = 0\n", "test.toml:4:11: ", "got 0");
}

TEST(ManifestErrorTest, BadKvDtype) {
    expect_invalid(kCpu + "[kv]\ndtype = \"q4_0\"\n", "test.toml:4:9: ",
                   "[kv] dtype must be one of f16, f32, q8_0, fp8_e4m3, got 'q4_0'");
}

TEST(ManifestErrorTest, BadOpName) {
    expect_invalid("[[backend]]\nplugin = \"cpu\"\nops = [\"matmul\", \"matmull\"]\n",
                   "test.toml:3:18: ", "unknown op 'matmull'");
    // "none" marks graph leaves; no backend runs it.
    expect_invalid("[[backend]]\nplugin = \"cpu\"\nops = [\"none\"]\n",
                   "test.toml:3:8: ", "unknown op 'none'");
}

TEST(ManifestErrorTest, BadSha256) {
    expect_invalid(kCpu + "[plugins.sha256]\ncpu = \"abc\"\n",
                   "test.toml:4:7: ", "[plugins.sha256] cpu must be 64 hexadecimal digits");
    expect_invalid(kCpu + "[plugins.sha256]\ncpu = \"" + std::string(63, 'a') + "g\"\n",
                   "test.toml:4:7: ", "64 hexadecimal digits");
}

TEST(ManifestErrorTest, EmptySearchPath) {
    expect_invalid(kCpu + "[plugins]\nsearch_paths = [\"a\", \"\"]\n",
                   "test.toml:4:22: ", "[plugins] search_paths[1] must not be empty");
}

TEST(ManifestErrorTest, BackendWithoutPlugin) {
    expect_invalid(kCpu + "\n[[backend]]\ndevice = \"gpu0\"\n",
                   "test.toml:4:1: ", "[[backend]] entry has no plugin");
    expect_invalid("[[backend]]\nplugin = \"\"\n",
                   "test.toml:2:10: ", "[[backend]] plugin must not be empty");
}

TEST(ManifestErrorTest, NoBackends) {
    expect_invalid("[device]\nname = \"x\"\n", "test.toml:1:1: ", "no [[backend]] entry");
    expect_invalid("backend = []\n", "test.toml:1:11: ", "no [[backend]] entry");
    expect_invalid("[backend]\nplugin = \"cpu\"\n",
                   "test.toml:1:1: ", "must be written [[backend]]");
}
