// Device detection against captured device trees (tests/data/devices: the
// /proc, /sys and getprop output of three phones and an x86-64 box, written
// from the public facts of their SoCs) and the manifest each one selects
// from manifests/.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "dwell/core/base/error.hpp"
#include "dwell/core/config/device_facts.hpp"
#include "dwell/core/config/manifest_choice.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

const fs::path kTrees = fs::path(DWELL_TEST_SOURCE_DIR) / "tests/data/devices";
const fs::path kManifests = fs::path(DWELL_TEST_SOURCE_DIR) / "manifests";
constexpr std::string_view kBuiltin = "[[backend]]\nplugin = \"cpu\"\n";

DeviceFacts probe(const std::string& tree) {
    return DeviceFacts::probe(kTrees / tree);
}

std::vector<std::string> zone_types(const DeviceFacts& f) {
    std::vector<std::string> out;
    for (const auto& z : f.thermal_zones) out.push_back(z.type);
    return out;
}

TEST(DeviceDetection, Snapdragon8Gen3PhoneFromPropertiesSocinfoAndCpus) {
    const DeviceFacts f = probe("xiaomi-14-pro");
    EXPECT_EQ(f.arch, "aarch64");  // from the tree's cpuinfo, not this machine
    EXPECT_EQ(f.soc_model, "SM8650");
    EXPECT_EQ(f.soc_manufacturer, "QTI");
    EXPECT_EQ(f.platform, "pineapple");
    EXPECT_EQ(f.hardware, "qcom");
    EXPECT_EQ(f.soc_id, "557");
    EXPECT_EQ(f.soc_machine, "SM8650");
    EXPECT_EQ(f.product, "23116PN5BC");
    ASSERT_EQ(f.cores.size(), 8u);
    EXPECT_EQ(f.cpu_part, "0xd82");  // the X4: the biggest core
    // Above the A520s' capacity tier: the five A720s and the X4.
    EXPECT_EQ(f.big_cores, (std::vector<int>{2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(f.memory_bytes, uint64_t{15727460} * 1024);
    ASSERT_EQ(f.thermal_zones.size(), 10u);
    EXPECT_EQ(f.thermal_zones[2].type, "cpu-1-0-0");
    EXPECT_EQ(f.thermal_zones[2].millicelsius, 43600);
}

TEST(DeviceDetection, BigCoresOfAnAllBigSocAndOfASmtSoc) {
    // Dimensity 9300: no little cores; the X4s are above the A720s' tier.
    EXPECT_EQ(probe("vivo-x100-pro").big_cores, (std::vector<int>{4, 5, 6, 7}));
    // Kirin 9000S: the TaiShan threads (cpu4-11) above the A510s.
    const DeviceFacts k = probe("mate-60-pro");
    EXPECT_EQ(k.big_cores, (std::vector<int>{4, 5, 6, 7, 8, 9, 10, 11}));
    EXPECT_EQ(k.platform, "kirin9000s");
    EXPECT_EQ(k.product, "ALN-AL00");
    // x86-64: one frequency for every core, so all count as big.
    const DeviceFacts x = probe("x86_64-linux");
    EXPECT_EQ(x.arch, "x86_64");
    EXPECT_EQ(x.big_cores, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_TRUE(x.properties.empty());
    EXPECT_EQ(zone_types(x), (std::vector<std::string>{"acpitz", "x86_pkg_temp"}));
}

struct TreeCase {
    const char* tree;
    const char* manifest;
};

class EachCapturedTree : public ::testing::TestWithParam<TreeCase> {};

TEST_P(EachCapturedTree, SelectsItsManifest) {
    const DeviceFacts f = probe(GetParam().tree);
    const ManifestChoice c = choose_manifest(f, {kManifests}, kBuiltin);
    EXPECT_EQ(c.manifest.source.filename(), GetParam().manifest) << c.reason;
    const bool generic = std::string(GetParam().manifest).rfind("generic-", 0) == 0;
    EXPECT_EQ(c.fell_back, generic) << c.reason;
    // Exactly one device-specific manifest matches each phone.
    int specific = 0;
    for (const auto& m : c.candidates) specific += m.matches && !m.generic;
    EXPECT_EQ(specific, generic ? 0 : 1);
    // The manifest's thermal zones exist on the device it names.
    for (const std::string& z : c.manifest.thermal.zones) {
        const auto types = zone_types(f);
        EXPECT_NE(std::find(types.begin(), types.end(), z), types.end()) << z;
    }
}

INSTANTIATE_TEST_SUITE_P(Phones, EachCapturedTree,
                         ::testing::Values(TreeCase{"xiaomi-14-pro", "snapdragon-8gen3.toml"},
                                           TreeCase{"vivo-x100-pro", "dimensity-9300.toml"},
                                           TreeCase{"mate-60-pro", "kirin-9000s.toml"},
                                           TreeCase{"x86_64-linux", "generic-x86_64.toml"}),
                         [](const auto& info) {
                             std::string n = info.param.tree;
                             for (char& ch : n)
                                 if (ch == '-') ch = '_';
                             return n;
                         });

class TempProps : public ::testing::Test {
protected:
    void TearDown() override { fs::remove(file_); }
    fs::path write(const std::string& text) {
        std::ofstream(file_) << text;
        return file_;
    }
    fs::path file_ = fs::temp_directory_path() / ("dwell-getprop-" + std::to_string(::getpid()));
};

TEST_F(TempProps, AnUnknownPhoneFallsBackToTheGenericManifestAndSaysSo) {
    DeviceProbeOptions o;
    o.root = kTrees / "xiaomi-14-pro";
    o.getprop_file = write(
        "[ro.soc.manufacturer]: [Unisoc]\n[ro.soc.model]: [T820]\n"
        "[ro.board.platform]: [ums9620]\n");
    const DeviceFacts f = DeviceFacts::probe(o);
    EXPECT_EQ(f.soc_model, "T820");
    const ManifestChoice c = choose_manifest(f, {kManifests}, kBuiltin);
    EXPECT_TRUE(c.fell_back);
    EXPECT_EQ(c.manifest.source.filename(), "generic-aarch64.toml");
    EXPECT_NE(c.reason.find("no manifest for this device (T820"), std::string::npos) << c.reason;
    EXPECT_NE(c.reason.find("using the generic manifest generic-aarch64.toml"), std::string::npos);
    // and why the Snapdragon one was not taken
    for (const auto& m : c.candidates) {
        if (m.file.filename() == "snapdragon-8gen3.toml") {
            EXPECT_EQ(m.why, "soc_model: this device has T820, the manifest lists SM8650");
        }
    }
}

TEST_F(TempProps, AGetpropFileOverTheLimitIsRefusedNamingIt) {
    std::ofstream(file_) << "[ro.soc.model]: [SM8650]\n";
    fs::resize_file(file_, (uint64_t{4} << 20) + 1);  // sparse: nothing is written
    DeviceProbeOptions o;
    o.root = kTrees / "xiaomi-14-pro";
    o.getprop_file = file_;
    try {
        DeviceFacts::probe(o);
        FAIL() << "a getprop file over the limit was read";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(
            m.find(file_.string() + ": the getprop file (--getprop) is 4.0 MiB (4194305 bytes)"),
            std::string::npos)
            << m;
        EXPECT_NE(m.find("limit of 4.0 MiB"), std::string::npos) << m;
    }
}

TEST_F(TempProps, PropertiesParseFromGetpropAndHarmonyParamOutput) {
    const auto p = parse_properties(
        "[ro.soc.model]: [SM8650]\n[ro.empty]: []\nnoise line\n"
        "const.product.model = ALN-AL00\n[broken]: value\n");
    EXPECT_EQ(p.at("ro.soc.model"), "SM8650");
    EXPECT_EQ(p.at("ro.empty"), "");
    EXPECT_EQ(p.at("const.product.model"), "ALN-AL00");
    EXPECT_EQ(p.count("broken"), 0u);
    EXPECT_EQ(p.size(), 3u);
}

TEST(DeviceDetection, MatchRulesIgnoreCaseAndCpuPartMatchesAnyCore) {
    const DeviceFacts f = probe("vivo-x100-pro");
    const Manifest lower = Manifest::parse(
        "[device]\nmatch = { soc_model = [\"mt6989\"], cpu_part = [\"0xd81\"] }\n"
        "[[backend]]\nplugin = \"cpu\"\n",
        "m");
    EXPECT_TRUE(manifest_matches(lower, f));  // the A720s are 0xd81, the biggest core 0xd82
    const Manifest other = Manifest::parse(
        "[device]\nmatch = { platform = [\"mt6985\"] }\n[[backend]]\nplugin = \"cpu\"\n", "o");
    EXPECT_FALSE(manifest_matches(other, f));
    EXPECT_EQ(explain_match(other, f),
              "platform: this device has mt6989, the manifest lists mt6985");
}

}  // namespace
}  // namespace dwell
