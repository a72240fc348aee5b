// `dwell devices`: every plugin found (path, ABI, version), every device of
// every backend plugin, which backends the manifest selected, and why any
// other was skipped.
#include <iostream>
#include <set>

#include "cli_common.hpp"
#include "dwell/core/format_bytes.hpp"

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

}  // namespace

int devices_command(const std::vector<std::string>& args) {
    CommonArgs common;
    po::options_description desc("dwell devices");
    add_runtime_options(desc, common);
    po::variables_map vm;
    if (!parse("devices", "[--manifest FILE]", desc, args, vm)) return 0;
    set_verbosity(common.verbosity);

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
