// The manifest reader's limits: a file (or text) over 1 MiB is refused with
// one line before it is parsed, including a path to an endless device; and
// strings that would break a later message's line are refused (found by
// manifest_fuzzer: a [device.match] value with a line break came back in
// `dwell devices --detect`'s explanation).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "dwell/core/base/error.hpp"
#include "dwell/core/config/manifest.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kCpu = "[[backend]]\nplugin = \"cpu\"\n";

// A valid manifest of exactly `bytes` bytes (a comment pads it).
std::string manifest_of_size(size_t bytes) {
    std::string text = kCpu + "#";
    text += std::string(bytes - text.size() - 1, 'x') + "\n";
    return text;
}

void expect_too_large(const std::function<void()>& load, const std::string& file) {
    try {
        load();
        ADD_FAILURE() << "accepted";
    } catch (const dwell::Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(std::string(e.what()),
                  file + ": the manifest is larger than 1 MiB; is this the right file?");
    }
}

TEST(ManifestLimits, TextOfOneMiBParsesOneByteMoreIsRefused) {
    EXPECT_EQ(dwell::Manifest::parse(manifest_of_size(1 << 20), "big.toml").backends.size(), 1u);
    expect_too_large([] { dwell::Manifest::parse(manifest_of_size((1 << 20) + 1), "big.toml"); },
                     "big.toml");
}

TEST(ManifestLimits, LargeFileIsRefused) {
    const fs::path p = fs::temp_directory_path() /
                       ("dwell_manifest_limit_" + std::to_string(::getpid()) + ".toml");
    std::ofstream(p) << manifest_of_size((1 << 20) + 100);
    expect_too_large([&] { dwell::Manifest::load(p); }, p.string());
    fs::remove(p);
}

TEST(ManifestLimits, EndlessDeviceIsRefused) {
    if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
    expect_too_large([] { dwell::Manifest::load("/dev/zero"); }, "/dev/zero");
}

// A FIFO would block a plain open until a writer came; loaded in a child
// with an alarm, so a regression fails instead of hanging the suite.
TEST(ManifestLimits, AFifoIsRefusedInOneLineWithoutWaiting) {
    const fs::path p =
        fs::temp_directory_path() / ("dwell_manifest_fifo_" + std::to_string(::getpid()) + ".toml");
    fs::remove(p);
    ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0);
    EXPECT_EXIT(
        {
            ::alarm(10);
            try {
                dwell::Manifest::load(p);
            } catch (const dwell::Error& e) {
                const std::string what = e.what();
                std::fprintf(stderr, "%s\n", what.c_str());
                std::_Exit(what.find('\n') == std::string::npos ? 0 : 2);
            }
            std::_Exit(1);
        },
        ::testing::ExitedWithCode(0),
        "dwell_manifest_fifo_[0-9]+.toml: is a FIFO, not a manifest file: refused");
    fs::remove(p);
}

void expect_refused(const std::string& text, const std::string& message) {
    try {
        dwell::Manifest::parse(text, "test.toml");
        ADD_FAILURE() << "accepted:\n" << text;
    } catch (const dwell::Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(std::string(e.what()), message);
    }
}

TEST(ManifestLimits, StringsThatBreakTheLineAreRefused) {
    expect_refused("[device.match]\nproduct = [\"Pho\\ne 1\"]\n" + kCpu,
                   "test.toml:2:12: [device.match] product[0] must be one line of text (byte 3 is "
                   "0x0A, a control character)");
    expect_refused("[[backend]]\nplugin = \"cp\\ru\"\n",
                   "test.toml:2:10: [[backend]] plugin must be one line of text (byte 2 is 0x0D, a "
                   "control character)");
    expect_refused(kCpu + "options = { mode = \"a\\u001bb\" }\n",
                   "test.toml:3:20: [[backend]] options.mode must be one line of text (byte 1 is "
                   "0x1B, a control character)");
    expect_refused(kCpu + "options = { \"a\\nb\" = 1 }\n",
                   "test.toml:3:13: [[backend]] option name must be one line of text (byte 1 is "
                   "0x0A, a control character)");
    // A tab is still one line.
    EXPECT_EQ(dwell::Manifest::parse("[device]\nname = \"a\\tb\"\n" + kCpu, "t.toml").name, "a\tb");
}

}  // namespace
