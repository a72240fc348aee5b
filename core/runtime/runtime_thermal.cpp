#include "dwell/core/runtime/runtime_thermal.hpp"

#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>
#include <thread>

#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/platform/device_file.hpp"
#include "dwell/core/runtime/runtime.hpp"

namespace dwell {

namespace fs = std::filesystem;

namespace {

bool is_cpu(const Backend& b) {
    return b.device_info().kind == DWELL_DEVICE_CPU;
}

}  // namespace

RuntimeThermal::RuntimeThermal(const ThermalConfig& config,
                               const std::vector<std::unique_ptr<Backend>>& backends, fs::path root)
    : config_(config), backends_(backends), root_(std::move(root)) {}

RuntimeThermal::~RuntimeThermal() {
    apply(ThermalActions{});
}

void RuntimeThermal::apply(const ThermalActions& a) {
    duty_.store(a.duty, std::memory_order_relaxed);
    if (a.thread_share != thread_share_) set_thread_share(a.thread_share);
    if (a.freq_capped != capped_) set_freq_cap(a.freq_capped);
    if (a.offloaded != offloaded_) set_offload(a.offloaded);
}

void RuntimeThermal::pace(double step_seconds) const {
    const double d = duty();
    if (d >= 0.999 || step_seconds <= 0) return;
    // step / duty is the paced period; at most two seconds of rest per step.
    const double rest = std::min(step_seconds * (1.0 - d) / std::max(d, 0.01), 2.0);
    std::this_thread::sleep_for(std::chrono::duration<double>(rest));
}

void RuntimeThermal::set_thread_share(double share) {
    thread_share_ = share;
    const std::string value = std::to_string(share);
    const dwell_option opt{"thread_share", value.c_str()};
    for (const auto& b : backends_) {
        if (!is_cpu(*b) || cannot_reconfigure_.count(b.get())) continue;
        const dwell_backend_plugin& api = b->api();
        if (!DWELL_HAS_FIELD(&api, dwell_backend_plugin, reconfigure) ||
            api.reconfigure == nullptr) {
            cannot_reconfigure_.insert(b.get());
            spdlog::info("thermal: {} cannot change its threads (no reconfigure, ABI < 1.3)",
                         b->label());
            continue;
        }
        std::lock_guard lock(b->mutex());
        if (api.reconfigure(b->context(), &opt, 1) != DWELL_OK) {
            cannot_reconfigure_.insert(b.get());
            spdlog::warn("thermal: {} refused thread_share: {}", b->label(), b->last_error());
        }
    }
}

void RuntimeThermal::set_freq_cap(bool capped) {
    capped_ = capped;
    for (const auto& d : config_.devfreq) {
        // The manifest refuses such paths; this keeps writes inside the root
        // for a config from anywhere else too.
        const std::optional<fs::path> inside = devfreq_path_inside_root(d.path);
        if (!inside) {
            if (capped)
                spdlog::warn(
                    "thermal: devfreq path {} leaves the device root; that lever is skipped",
                    printable_name(d.path, 240));
            continue;
        }
        const fs::path dir = root_ / *inside;
        const fs::path max_file = dir / "max_freq";
        const auto read_value = [](const fs::path& f) -> int64_t {
            const DeviceFileRead r = read_device_file(f, kMaxDeviceValueBytes);
            int64_t v = 0;
            if (!r.ok()) return -1;
            const char* b = r.text.data();
            const auto [end, ec] = std::from_chars(b, b + r.text.size(), v);
            return ec == std::errc() && end != b ? v : -1;
        };
        if (capped) {
            const int64_t current = read_value(max_file);
            int64_t cap = d.cap_khz > 0 ? d.cap_khz * 1000 : read_value(dir / "min_freq");
            if (current <= 0 || cap <= 0) {
                spdlog::warn("thermal: cannot read {} (or its min_freq); that lever is skipped",
                             printable_name(max_file.string(), 240));
                continue;
            }
            // Never raise a limit someone else (the OS) already lowered.
            if (cap >= current) continue;
            std::string problem;
            if (!write_device_file(max_file, std::to_string(cap) + "\n", problem)) {
                spdlog::warn("thermal: {} (needs root on most phones); that lever is skipped",
                             problem);
                continue;
            }
            capped_files_[max_file.string()] = {current, cap};
        } else if (const auto it = capped_files_.find(max_file.string());
                   it != capped_files_.end()) {
            // Restore only what is still ours: a value written since by
            // someone else stays.
            std::string problem;
            if (read_value(max_file) == it->second.written &&
                !write_device_file(max_file, std::to_string(it->second.original) + "\n", problem))
                spdlog::warn("thermal: cannot restore {}: {}",
                             printable_name(max_file.string(), 240), problem);
            capped_files_.erase(it);
        }
    }
}

void RuntimeThermal::set_offload(bool offloaded) {
    offloaded_ = offloaded;
    const bool cpu_present =
        std::any_of(backends_.begin(), backends_.end(), [](const auto& b) { return is_cpu(*b); });
    for (const auto& b : backends_) {
        if (is_cpu(*b)) continue;
        const bool pause = offloaded && cpu_present;
        if (b->thermally_paused() != pause) {
            b->set_thermally_paused(pause);
            spdlog::info("thermal: {} {}", b->label(),
                         pause ? "paused: its work moves to the CPU" : "takes work again");
        }
    }
}

}  // namespace dwell
