// `dwell devices --detect` against the captured device trees: the detected
// device, the manifest chosen and why, from the installed manifests folder.
#include <gtest/gtest.h>

#include <filesystem>

#include "integration_support.hpp"

namespace dwell::test {
namespace {

const std::filesystem::path kTrees =
    std::filesystem::path(DWELL_TEST_SOURCE_DIR) / "tests/data/devices";

TEST(DevicesDetect, EachPhoneTreeNamesItsSocAndManifest) {
    struct Case {
        const char* tree;
        const char* soc;
        const char* manifest;
    };
    for (const Case& c : {Case{"xiaomi-14-pro", "SM8650", "snapdragon-8gen3.toml"},
                          Case{"vivo-x100-pro", "MT6989", "dimensity-9300.toml"},
                          Case{"mate-60-pro", "Kirin9000S", "kirin-9000s.toml"}}) {
        SCOPED_TRACE(c.tree);
        const CommandResult r =
            run_dwell({"devices", "--detect", "--sysroot", (kTrees / c.tree).string()});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find(std::string("device: ") + c.soc), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(std::string("[chosen]  ") + c.manifest), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("matched this device: "), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("big: "), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("(absent here)"), std::string::npos) << r.out;
    }
}

TEST(DevicesDetect, AnUnknownPhoneGetsTheGenericManifestWithAWarning) {
    TempDir dir;
    const auto props = dir.write("getprop.txt", "[ro.soc.model]: [T820]\n");
    const CommandResult r =
        run_dwell({"devices", "--detect", "--sysroot", (kTrees / "xiaomi-14-pro").string(),
                   "--getprop", props.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("[chosen]  generic-aarch64.toml (generic)"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("no manifest for this device (T820"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("snapdragon-8gen3.toml: soc_model: this device has T820"),
              std::string::npos)
        << r.out;
}

TEST(DevicesDetect, ABadSysrootIsOneClearLine) {
    const CommandResult r = run_dwell({"devices", "--detect", "--sysroot", "/nonexistent/tree"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--sysroot /nonexistent/tree is not a directory"), std::string::npos)
        << r.err;
}

}  // namespace
}  // namespace dwell::test
