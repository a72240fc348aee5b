// libFuzzer target: what a phone reports about itself, read by
// DeviceFacts::probe from a captured tree: the input is the text of
// proc/cpuinfo, getprop.txt (getprop or HarmonyOS param output),
// proc/meminfo and sys/devices/soc0/soc_id, separated by NUL bytes. The
// facts are then summarised and matched against a manifest as `dwell
// devices --detect` does. The readers never throw: any exception, crash or
// multi-line message is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "dwell/core/config/device_facts.hpp"
#include "dwell/core/config/manifest.hpp"
#include "scratch_file.hpp"

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kFiles[] = {"proc/cpuinfo", "getprop.txt", "proc/meminfo",
                                       "sys/devices/soc0/soc_id"};

// The captured tree: a folder made once per fuzzing process.
class ScratchTree {
public:
    ScratchTree() {
        std::string tmpl = (fs::temp_directory_path() / "dwell-device-fuzz-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
        root_ = tmpl;
        fs::create_directories(root_ / "proc");
        fs::create_directories(root_ / "sys/devices/soc0");
    }
    ~ScratchTree() {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    ScratchTree(const ScratchTree&) = delete;
    ScratchTree& operator=(const ScratchTree&) = delete;
    const fs::path& root() const { return root_; }

private:
    fs::path root_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const ScratchTree tree;
    static const dwell::Manifest manifest = dwell::Manifest::parse(
        "[device]\nname = \"fuzz\"\n[device.match]\nsoc_model = [\"SM8650\"]\n"
        "platform = [\"pineapple\"]\ncpu_part = [\"0xd82\"]\nsoc_id = [\"557\"]\n"
        "[[backend]]\nplugin = \"cpu\"\n",
        "fuzz.toml");
    std::string_view rest(reinterpret_cast<const char*>(data), size);
    for (std::string_view file : kFiles) {
        const size_t end = std::min(rest.find('\0'), rest.size());
        const std::string_view part = rest.substr(0, end);
        rest.remove_prefix(std::min(end + 1, rest.size()));
        if (!dwell::fuzz::ScratchFile::write_file(
                tree.root() / file, reinterpret_cast<const uint8_t*>(part.data()), part.size()))
            return 0;
    }
    const dwell::DeviceFacts facts = dwell::DeviceFacts::probe(tree.root());
    for (int big : facts.big_cores) {
        bool known = false;
        for (const dwell::CpuCore& c : facts.cores) known = known || c.id == big;
        if (!known) __builtin_trap();
    }
    (void)facts.summary();
    (void)dwell::manifest_matches(manifest, facts);
    if (dwell::explain_match(manifest, facts).find('\n') != std::string::npos) __builtin_trap();
    return 0;
}
