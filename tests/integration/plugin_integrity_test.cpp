// Plugin integrity: sha256 pins from the manifest (checked against
// coreutils' sha256sum), loading only from the plugin folders, and refusing
// folders and files that other users could write.
#include <gtest/gtest.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "dwell/core/base/error.hpp"
#include "integration_support.hpp"
#include "log_capture.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

bool one_line(const std::string& s) {
    return !s.empty() && s.find('\n') == std::string::npos;
}

std::string sha256sum(const fs::path& file) {
    std::string out;
    FILE* p = popen(("sha256sum '" + file.string() + "'").c_str(), "r");
    if (p == nullptr) return out;
    std::array<char, 256> buf{};
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    pclose(p);
    return out.substr(0, out.find(' '));
}

class PluginIntegrity : public ::testing::Test {
protected:
    void SetUp() override {
        folder_ = dir_.path() / "plugins";
        fs::create_directories(folder_);
        fs::permissions(folder_, fs::perms(0755));
        plugin_ = folder_ / "libdwell-partial.so";
        fs::copy_file(test_plugin_dir() / "libdwell-partial.so", plugin_);
        fs::permissions(plugin_, fs::perms(0755));
        hash_ = sha256sum(plugin_);
        ASSERT_EQ(hash_.size(), 64u) << "sha256sum failed on " << plugin_;
    }

    // A runtime whose plugin folder is folder_; partial first, then cpu.
    RuntimeOptions options(const std::string& plugins_extra = "") {
        RuntimeOptions o;
        o.manifest = dir_.write("m" + std::to_string(++manifests_) + ".toml",
                                "[plugins]\nsearch_paths = [\"" + folder_.string() + "\"]\n" +
                                    plugins_extra +
                                    "\n[[backend]]\nplugin = \"partial\"\n\n"
                                    "[[backend]]\nplugin = \"cpu\"\n");
        return o;
    }

    // What loading the copied plugin says, or "" when it loads.
    std::string load_error(Runtime& runtime, const fs::path& file) {
        try {
            runtime.loader().load_file(file);
            return {};
        } catch (const Error& e) {
            EXPECT_TRUE(one_line(e.what())) << e.what();
            return e.what();
        }
    }

    TempDir dir_;
    fs::path folder_;
    fs::path plugin_;
    std::string hash_;
    int manifests_ = 0;
};

// dl_iterate_phdr's name for each loaded object.
std::vector<std::string> loaded_object_names() {
    std::vector<std::string> names;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name ? info->dlpi_name
                                                                                   : "");
            return 0;
        },
        &names);
    return names;
}

TEST_F(PluginIntegrity, APinnedPluginWithItsHashLoadsThroughTheDescriptorItWasHashedFrom) {
    std::string upper = hash_;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    Runtime runtime(options("sha256 = { partial = \"" + upper + "\" }\n"));
    ASSERT_EQ(runtime.backends().size(), 2u);
    EXPECT_EQ(runtime.backends()[0]->label(), "partial/adder0");
    EXPECT_EQ(runtime.backends()[0]->plugin().path(), plugin_);
    // The library came in through /proc/self/fd/N, the descriptor the hash
    // was read from, which still names the file.
    bool through_descriptor = false;
    for (const std::string& name : loaded_object_names()) {
        if (name.rfind("/proc/self/fd/", 0) != 0) continue;
        std::error_code ec;
        if (fs::read_symlink(name, ec) == plugin_) through_descriptor = true;
    }
    EXPECT_TRUE(through_descriptor);
}

TEST_F(PluginIntegrity, AFileChangedAfterPinningIsRefusedNamingPluginFileAndBothHashes) {
    std::ofstream(plugin_, std::ios::app | std::ios::binary) << '\0';  // one byte appended
    const std::string changed = sha256sum(plugin_);
    ASSERT_NE(changed, hash_);
    Runtime runtime(options("sha256 = { partial = \"" + hash_ + "\" }\n"));
    // The backend is skipped with the reason; cpu carries on.
    ASSERT_EQ(runtime.backends().size(), 1u);
    EXPECT_EQ(runtime.backends()[0]->label(), "cpu/cpu0");
    ASSERT_FALSE(runtime.backend_choices()[0].selected);
    const std::string& reason = runtime.backend_choices()[0].reason;
    const std::string expected = "plugin 'partial' (" + plugin_.string() +
                                 ") does not match its [plugins] sha256 pin: expected " + hash_ +
                                 ", the file's is " + changed +
                                 "; reinstall the plugin or update the pin";
    EXPECT_NE(reason.find(expected), std::string::npos) << reason;
    try {
        runtime.loader().load_file(plugin_);
        FAIL() << "a plugin with another hash loaded";
    } catch (const Error& e) {
        EXPECT_EQ(e.status(), DWELL_ERR_CORRUPT);
        EXPECT_EQ(std::string(e.what()), expected);
    }
}

TEST_F(PluginIntegrity, AnUnpinnedPluginLoadsAsBefore) {
    Runtime runtime(options("sha256 = { cpu_other = \"" + hash_ + "\" }\n"));
    ASSERT_EQ(runtime.backends().size(), 2u);
    EXPECT_EQ(runtime.backends()[0]->label(), "partial/adder0");
}

TEST_F(PluginIntegrity, WorldWritableFolderOrFileIsRefusedSayingWhatToChmod) {
    Runtime runtime(options());
    ASSERT_EQ(runtime.backends().size(), 2u);  // 0755 folder and file: fine
    {
        fs::permissions(folder_, fs::perms(0777));
        Runtime refused(options());
        EXPECT_EQ(refused.backends().size(), 1u);
        const std::string why = load_error(refused, plugin_);
        EXPECT_NE(why.find("plugin folder " + folder_.string() + " is world-writable (mode 0777)"),
                  std::string::npos)
            << why;
        EXPECT_NE(why.find("chmod o-w " + folder_.string()), std::string::npos) << why;
        // The sticky bit (as on /tmp) still lets anyone add a plugin.
        fs::permissions(folder_, fs::perms(01777));
        EXPECT_NE(load_error(refused, plugin_).find("is world-writable (mode 1777)"),
                  std::string::npos);
        fs::permissions(folder_, fs::perms(0755));
    }
    {
        fs::permissions(plugin_, fs::perms(0666));
        Runtime refused(options());
        EXPECT_EQ(refused.backends().size(), 1u);
        const std::string why = load_error(refused, plugin_);
        EXPECT_NE(why.find("plugin " + plugin_.string() + " is world-writable (mode 0666)"),
                  std::string::npos)
            << why;
        EXPECT_NE(why.find("chmod o-w " + plugin_.string()), std::string::npos) << why;
        EXPECT_NE(refused.backend_choices()[0].reason.find("world-writable"), std::string::npos);
    }
}

TEST_F(PluginIntegrity, GroupWritableIsRefusedUnlessTheGroupIsOurOwn) {
    // Our own (effective) group: the umask 002 setup; allowed.
    ASSERT_EQ(chown(plugin_.c_str(), static_cast<uid_t>(-1), getegid()), 0);
    fs::permissions(plugin_, fs::perms(0775));
    fs::permissions(folder_, fs::perms(0775));
    {
        Runtime runtime(options());
        EXPECT_EQ(load_error(runtime, plugin_), "");
    }
    // Another group: only root may give a file away, so skip elsewhere.
    const gid_t other = getegid() == 4242 ? 4243 : 4242;
    if (chown(plugin_.c_str(), static_cast<uid_t>(-1), other) != 0)
        GTEST_SKIP() << "cannot give " << plugin_ << " another group (not root)";
    Runtime runtime(options());
    const std::string why = load_error(runtime, plugin_);
    EXPECT_NE(why.find("plugin " + plugin_.string() + " is writable by group " +
                       std::to_string(other) + " (mode 0775)"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("chmod g-w " + plugin_.string()), std::string::npos) << why;
}

TEST_F(PluginIntegrity, OnlyFilesInThePluginFoldersAreLoaded) {
    Runtime runtime(options());
    // Outside every folder: refused, naming the folders.
    const fs::path elsewhere = dir_.path() / "libdwell-partial.so";
    fs::copy_file(plugin_, elsewhere);
    std::string why = load_error(runtime, elsewhere);
    EXPECT_NE(why.find("plugin " + elsewhere.string() + " is not in a plugin folder ("),
              std::string::npos)
        << why;
    EXPECT_NE(why.find(folder_.string()), std::string::npos) << why;
    EXPECT_NE(why.find("[plugins] search_paths or DWELL_PLUGIN_PATH"), std::string::npos) << why;
    // A link inside a folder to a file outside is just as outside.
    fs::remove(plugin_);
    fs::create_symlink(elsewhere, plugin_);
    Runtime linked(options());
    EXPECT_EQ(linked.backends().size(), 1u);
    why = load_error(linked, plugin_);
    EXPECT_NE(why.find("plugin " + plugin_.string() + " (really " + elsewhere.string() +
                       ") is not in a plugin folder"),
              std::string::npos)
        << why;
}

// How many lines of `log` hold `needle`.
size_t lines_with(const std::string& log, const std::string& needle) {
    size_t n = 0, at = 0;
    while ((at = log.find(needle, at)) != std::string::npos) {
        ++n;
        at += needle.size();
    }
    return n;
}

// Broken files named like plugins beside a good one: each is skipped with
// one warning line saying what it is, never a SIGBUS (a half-copied
// library mapped by dlopen) or a hang (a FIFO opened for reading). Run in a
// re-executed child with an alarm, so either regression fails the test.
[[noreturn]] void discover_beside_broken_files(const fs::path& folder, const RuntimeOptions& o) {
    ::alarm(20);
    const std::string good = read_file(folder / "libdwell-partial.so");
    std::ofstream(folder / "libdwell-half.so", std::ios::binary) << good.substr(0, good.size() / 2);
    std::ofstream(folder / "libdwell-text.so")
        << "not a library, " << std::string(100, 'x') << "\n";
    std::ofstream(folder / "libdwell-empty.so");
    ::mkfifo((folder / "libdwell-fifo.so").c_str(), 0644);
    fs::create_directory(folder / "libdwell-dir.so");
    for (const char* f : {"libdwell-half.so", "libdwell-text.so", "libdwell-empty.so"})
        fs::permissions(folder / f, fs::perms(0755));
    LogCapture log;
    Runtime runtime(o);
    const auto first = runtime.loader().discover_all();
    const auto again = runtime.loader().discover_all();  // warned once, not twice
    int bad = 0;
    auto expect = [&](const std::string& file, const std::string& reason) {
        const std::string where = (folder / file).string();
        bool found = false;
        for (const auto& f : first.failures) {
            if (f.path.filename() != file) continue;
            found = true;
            std::fprintf(stderr, "%s\n", f.reason.c_str());
            if (f.reason.find(reason) == std::string::npos || !one_line(f.reason)) ++bad;
        }
        const size_t warnings = lines_with(log.text(), "[warning] plugin " + where + " ");
        if (!found || warnings != 1) {
            std::fprintf(stderr, "%s: found %d, %zu warning lines\n", file.c_str(), found ? 1 : 0,
                         warnings);
            ++bad;
        }
    };
    expect("libdwell-half.so", "is truncated (");
    expect("libdwell-text.so", "is not an ELF file: refused");
    expect("libdwell-empty.so", "is too short to be a shared library (0 bytes)");
    expect("libdwell-fifo.so", "is a FIFO, not a regular file: refused");
    expect("libdwell-dir.so", "is a folder, not a regular file: refused");
    bool partial_loaded = false;
    for (const auto& p : first.plugins) partial_loaded |= p->name() == "partial";
    if (!partial_loaded || first.failures.size() != 5 || again.failures.size() != 5) ++bad;
    std::fprintf(stderr, "%s\n", bad == 0 ? "all skipped" : "WRONG");
    std::fflush(stderr);
    std::_Exit(bad == 0 ? 0 : 1);
}

TEST_F(PluginIntegrity, BrokenFilesNamedLikePluginsAreSkippedWithOneWarningEach) {
    use_threadsafe_death_tests_where_possible();
    EXPECT_EXIT(discover_beside_broken_files(folder_, options()), ::testing::ExitedWithCode(0),
                "all skipped");
}

TEST_F(PluginIntegrity, ARefusedPluginBeforeAGoodOneIsAWarning) {
    const fs::path shadow = dir_.path() / "shadow";
    fs::create_directories(shadow);
    fs::permissions(shadow, fs::perms(0755));
    fs::copy_file(plugin_, shadow / "libdwell-partial.so");
    fs::permissions(shadow / "libdwell-partial.so", fs::perms(0666));
    RuntimeOptions o;
    o.manifest = dir_.write("shadow.toml", "[plugins]\nsearch_paths = [\"" + shadow.string() +
                                               "\", \"" + folder_.string() +
                                               "\"]\n\n[[backend]]\nplugin = \"partial\"\n");
    LogCapture log;
    Runtime runtime(o);
    ASSERT_EQ(runtime.backends().size(), 1u);
    EXPECT_EQ(runtime.backend_choices()[0].path, fs::canonical(plugin_));
    const std::string text = log.text();
    EXPECT_EQ(lines_with(text, "[warning] plugin " + (shadow / "libdwell-partial.so").string() +
                                   " is world-writable (mode 0666)"),
              1u)
        << text;
}

TEST_F(PluginIntegrity, EveryFolderAboveThePluginIsCheckedAsStrictModesDoes) {
    const fs::path above = dir_.path();
    const auto restore = fs::status(above).permissions();
    {
        fs::permissions(above, fs::perms(0777));
        Runtime runtime(options());
        const std::string why = load_error(runtime, plugin_);
        EXPECT_NE(why.find("folder " + above.string() +
                           " above the plugins is world-writable (mode 0777)"),
                  std::string::npos)
            << why;
        EXPECT_NE(why.find("chmod o-w " + above.string()), std::string::npos) << why;
        // With the sticky bit (as /tmp has) others cannot rename what is ours.
        fs::permissions(above, fs::perms(01777));
        EXPECT_EQ(load_error(runtime, plugin_), "");
    }
    fs::permissions(above, restore);
    if (::geteuid() != 0) GTEST_SKIP() << "giving files to another user needs root";
    const uid_t other = 4242;
    auto refused_when_owned_by_other = [&](const fs::path& p, const std::string& what) {
        ASSERT_EQ(::lchown(p.c_str(), other, static_cast<gid_t>(-1)), 0) << p;
        Runtime runtime(options());
        const std::string why = load_error(runtime, plugin_);
        EXPECT_NE(why.find(what + " " + p.string() + " is owned by uid 4242, neither you nor root"),
                  std::string::npos)
            << why;
        ASSERT_EQ(::lchown(p.c_str(), ::geteuid(), static_cast<gid_t>(-1)), 0) << p;
    };
    refused_when_owned_by_other(plugin_, "plugin");
    refused_when_owned_by_other(folder_, "plugin folder");
    refused_when_owned_by_other(above, "folder");
    // Group-writable above, by a group that is not ours.
    ASSERT_EQ(::chown(above.c_str(), static_cast<uid_t>(-1), 4242), 0);
    fs::permissions(above, fs::perms(0775));
    {
        Runtime runtime(options());
        const std::string why = load_error(runtime, plugin_);
        EXPECT_NE(why.find("folder " + above.string() +
                           " above the plugins is writable by group 4242 (mode 0775)"),
                  std::string::npos)
            << why;
    }
    fs::permissions(above, restore);
    Runtime runtime(options());
    EXPECT_EQ(load_error(runtime, plugin_), "");
}

}  // namespace
}  // namespace dwell::test
