// libFuzzer target: Manifest::parse on arbitrary text (TOML through toml++
// and dwell's schema checks), then matching the manifest against a fixed
// phone's facts as `dwell devices --detect` does. dwell::Error is the
// expected outcome for a malformed manifest; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dwell/core/base/error.hpp"
#include "dwell/core/config/device_facts.hpp"
#include "dwell/core/config/manifest.hpp"

namespace {

dwell::DeviceFacts phone() {
    dwell::DeviceFacts f;
    f.arch = "aarch64";
    f.soc_model = "SM8650";
    f.soc_manufacturer = "QTI";
    f.platform = "pineapple";
    f.hardware = "qcom";
    f.soc_id = "557";
    f.cpu_part = "0xd82";
    for (int i = 0; i < 8; ++i) f.cores.push_back({i, i < 3 ? "0xd80" : "0xd82", 0, 0});
    return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const dwell::DeviceFacts facts = phone();
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        const dwell::Manifest m = dwell::Manifest::parse(text, "fuzz.toml");
        (void)dwell::manifest_matches(m, facts);
        (void)dwell::manifest_specificity(m);
        const std::string why = dwell::explain_match(m, facts);
        if (why.find('\n') != std::string::npos) __builtin_trap();  // messages are one line
    } catch (const dwell::Error& e) {
        if (std::string_view(e.what()).find('\n') != std::string_view::npos) __builtin_trap();
    }
    return 0;
}
