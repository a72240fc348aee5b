// `dwell devices`: every plugin found (path, ABI, version), every device of
// every backend plugin, which backends the manifest selected, and why any
// other was skipped. `dwell devices --detect`: what this device is, which
// manifest fits it and why (no plugin is loaded).
#include <algorithm>
#include <iostream>
#include <set>

#include "cli_common.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/config/device_facts.hpp"
#include "dwell/core/config/manifest_choice.hpp"

namespace dwell::cli {

namespace {

const char* kind_name(dwell_device_kind k) {
    switch (k) {
        case DWELL_DEVICE_CPU:
            return "CPU";
        case DWELL_DEVICE_GPU:
            return "GPU";
        case DWELL_DEVICE_NPU:
            return "NPU";
        case DWELL_DEVICE_DSP:
            return "DSP";
        default:
            return "?";
    }
}

void print_detection(const DeviceFacts& f, const ManifestChoice& choice) {
    std::cout << "device: " << f.summary() << "\n";
    const auto line = [](const char* what, const std::string& v) {
        if (!v.empty())
            std::cout << "  " << what << ": " << printable_name(v, kShownFactChars) << "\n";
    };
    line("soc model", f.soc_model);
    line("soc manufacturer", f.soc_manufacturer);
    line("platform", f.platform);
    line("hardware", f.hardware);
    line("soc id", f.soc_id);
    line("soc machine", f.soc_machine);
    line("soc family", f.soc_family);
    line("product", f.product);
    line("cpu part (biggest core)", f.cpu_part);
    if (!f.cores.empty()) {
        const bool by_capacity = f.cores.front().capacity > 0;
        std::cout << "  cores: " << f.cores.size()
                  << "; big: " << (f.big_cores.empty() ? "unknown" : cpu_ranges(f.big_cores))
                  << (f.big_cores.empty() ? ""
                      : by_capacity       ? " (by cpu_capacity)"
                                          : " (by cpuinfo_max_freq)")
                  << "\n";
    }
    if (f.memory_bytes) std::cout << "  memory: " << format_bytes(f.memory_bytes) << "\n";
    if (!f.thermal_zones.empty()) {
        std::cout << "  thermal zones:";
        for (const ThermalZone& z : f.thermal_zones) {
            std::cout << " " << printable_name(z.type, kShownFactChars);
            if (z.millicelsius) std::cout << " (" << *z.millicelsius / 1000.0 << " C)";
        }
        std::cout << "\n";
    }
    std::cout << "\nmanifests:\n";
    for (const ManifestCandidate& c : choice.candidates) {
        const bool chosen = c.file == choice.manifest.source;
        std::cout << "  "
                  << (chosen      ? "[chosen]  "
                      : c.matches ? "[matches] "
                                  : "[no]      ")
                  << c.file.filename().string() << (c.generic ? " (generic)" : "") << ": " << c.why
                  << "\n";
    }
    std::cout << "\nmanifest: " << choice.manifest.source.string() << " ("
              << (choice.manifest.name.empty() ? "unnamed" : choice.manifest.name) << ")\n  "
              << choice.reason << "\n";
    if (!choice.manifest.thermal.zones.empty()) {
        std::cout << "  thermal zones it reads:";
        for (const std::string& z : choice.manifest.thermal.zones) {
            const bool present = std::any_of(f.thermal_zones.begin(), f.thermal_zones.end(),
                                             [&](const ThermalZone& t) { return t.type == z; });
            std::cout << " " << printable_name(z, kShownFactChars)
                      << (present ? "" : " (absent here)");
        }
        std::cout << "\n";
    }
}

}  // namespace

int devices_command(const std::vector<std::string>& args) {
    CommonArgs common;
    po::options_description desc("dwell devices");
    add_runtime_options(desc, common);
    bool detect = false;
    desc.add_options()("detect", po::bool_switch(&detect),
                       "print the detected device, the manifest chosen and why");
    po::variables_map vm;
    if (!parse("devices", "[--detect [--sysroot DIR] [--getprop FILE]] [--manifest FILE]", desc,
               args, vm))
        return 0;
    set_verbosity(common.verbosity);
    if (detect) {
        const RuntimeOptions o = runtime_options(common);
        DeviceProbeOptions probe;
        if (o.device_root) probe.root = *o.device_root;
        probe.getprop_file = o.getprop_file;
        const DeviceFacts facts = DeviceFacts::probe(probe);
        ManifestChoice choice;
        if (o.manifest) {
            choice.manifest = Manifest::load(*o.manifest);
            choice.reason = "given with --manifest: " + explain_match(choice.manifest, facts);
        } else {
            choice = choose_manifest(facts, Runtime::manifest_dirs(), Runtime::builtin_manifest());
        }
        print_detection(facts, choice);
        return 0;
    }

    RuntimeOptions options = runtime_options(common);
    options.require_backend = false;  // report what is there even when nothing is usable
    Runtime runtime(options);
    const Manifest& m = runtime.manifest();
    std::cout << "manifest: " << m.source.string() << " (" << (m.name.empty() ? "unnamed" : m.name)
              << "; " << runtime.manifest_choice() << ")\n";
    std::cout << "plugin search path:";
    for (const auto& d : runtime.loader().search_dirs()) std::cout << "\n  " << d.string();
    std::cout << "\n\nplugins:\n";

    auto found = runtime.loader().discover_all();
    for (const auto& p : found.plugins) {
        std::cout << "  " << p->name() << " " << p->version() << "  ABI " << p->abi_version()
                  << "  " << (p->backend() ? "backend" : "model") << "  " << p->path().string()
                  << "\n";
        if (p->info().description) std::cout << "      " << p->info().description << "\n";
        if (const dwell_model_plugin* mp = p->model()) {
            std::cout << "      architectures:";
            for (size_t i = 0; i < mp->n_architectures; ++i) {
                std::cout << " " << (mp->architectures[i] ? mp->architectures[i] : "?");
            }
            std::cout << "\n";
        }
        if (const dwell_backend_plugin* bp = p->backend()) {
            uint32_t n = 0;
            if (bp->device_count(bp->self, &n) != DWELL_OK) {
                std::cout << "      probe failed: "
                          << (bp->last_error ? bp->last_error(bp->self) : "?") << "\n";
                continue;
            }
            for (uint32_t i = 0; i < n; ++i) {
                dwell_device_info di{};
                di.struct_size = sizeof(di);
                if (bp->device_info(bp->self, i, &di) != DWELL_OK) continue;
                std::cout << "      device " << (di.name ? di.name : "?") << "  "
                          << kind_name(di.kind) << "  " << (di.description ? di.description : "")
                          << "  memory " << format_bytes(di.memory_total) << " ("
                          << format_bytes(di.memory_free) << " free)"
                          << "  hw " << (di.hardware_id ? di.hardware_id : "?")
                          << (di.available
                                  ? ""
                                  : std::string("  UNAVAILABLE: ") +
                                        (di.unavailable_reason ? di.unavailable_reason : ""))
                          << "\n";
            }
        }
    }
    for (const auto& f : found.failures)
        std::cout << "  FAILED " << f.path.string() << ": " << f.reason << "\n";

    std::cout << "\nbackends in manifest order:\n";
    for (const auto& c : runtime.backend_choices()) {
        std::cout << "  " << (c.selected ? "[selected] " : "[skipped]  ") << c.plugin;
        if (!c.device.empty()) std::cout << "/" << c.device;
        if (!c.path.empty()) std::cout << "  " << c.path.string();
        if (!c.selected) std::cout << "  -- " << c.reason;
        std::cout << "\n";
    }
    return 0;
}

}  // namespace dwell::cli
