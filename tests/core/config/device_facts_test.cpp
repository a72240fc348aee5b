#include "dwell/core/config/device_facts.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "dwell/core/config/manifest.hpp"

namespace dwell {
namespace {

namespace fs = std::filesystem;

class FakeDevice : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("dwell-facts-" + std::to_string(::getpid()));
        fs::create_directories(root_ / "proc");
        fs::create_directories(root_ / "sys/devices/soc0");
        std::ofstream(root_ / "proc/cpuinfo")
            << "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd81\n\n"
               "processor\t: 7\nCPU part\t: 0xd82\n";
        std::ofstream(root_ / "sys/devices/soc0/soc_id") << "557\n";
    }
    void TearDown() override { fs::remove_all(root_); }
    fs::path root_;
};

TEST_F(FakeDevice, ReadsCpuPartAndSocIdUnderARelocatedRoot) {
    const DeviceFacts f = DeviceFacts::probe(root_);
    EXPECT_EQ(f.cpu_part, "0xd82");  // the last core listed: the big one on phones
    EXPECT_EQ(f.soc_id, "557");
    EXPECT_FALSE(f.arch.empty());
}

TEST_F(FakeDevice, MatchRulesCombineWithAndAndMoreSpecificWins) {
    DeviceFacts f = DeviceFacts::probe(root_);
    f.arch = "aarch64";
    const Manifest phone = Manifest::parse(
        "[device]\nmatch = { soc_id = [\"557\", \"600\"], arch = [\"aarch64\"] "
        "}\n[[backend]]\nplugin = \"cpu\"\n",
        "p");
    const Manifest other_soc = Manifest::parse(
        "[device]\nmatch = { soc_id = [\"999\"], arch = [\"aarch64\"] }\n[[backend]]\nplugin = "
        "\"cpu\"\n",
        "o");
    const Manifest arch_only = Manifest::parse(
        "[device]\nmatch = { arch = [\"aarch64\"] }\n[[backend]]\nplugin = \"cpu\"\n", "a");
    const Manifest no_rules = Manifest::parse("[[backend]]\nplugin = \"cpu\"\n", "n");
    EXPECT_TRUE(manifest_matches(phone, f));
    EXPECT_FALSE(manifest_matches(other_soc, f));
    EXPECT_TRUE(manifest_matches(arch_only, f));
    EXPECT_FALSE(manifest_matches(no_rules, f));
    EXPECT_GT(manifest_specificity(phone), manifest_specificity(arch_only));
    f.arch = "x86_64";
    EXPECT_FALSE(manifest_matches(phone, f));
}

}  // namespace
}  // namespace dwell
