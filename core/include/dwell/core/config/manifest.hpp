// Device manifests: which plugins to load on this device, in which order of
// preference, with which options, memory budget, threads, KV type and
// thermal policy. See manifests/README.md for the schema.
//
// A malformed manifest throws dwell::Error(DWELL_ERR_INVALID_ARGUMENT) with
// one line "file:line:column: what is wrong", including unknown sections and
// keys and values of the wrong type or range.
//
// Thread-safety: a Manifest is a plain value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/thermal/thermal_policy.hpp"
#include "dwell/tensor.h"

namespace dwell {

struct ManifestBackend {
    std::string plugin;                          // plugin name, e.g. "cpu"
    std::optional<std::string> device;           // device name; first available if unset
    std::map<std::string, std::string> options;  // handed to the plugin as strings
    std::vector<std::string> ops;                // if non-empty: only these ops (by name)
    std::vector<int32_t> layers;                 // if non-empty: only these layers
    int32_t line = 0;                            // where the entry starts, for messages
    // > 0: a step not done in this time is abandoned and rerun on the next
    // backend; such a backend's steps run isolated (step_worker.hpp).
    int32_t step_timeout_ms = 0;
};

// [device] match: each list names the values a fact may have (see
// DeviceFacts for where each fact comes from).
struct ManifestDeviceMatch {
    std::vector<std::string> soc_model;         // ro.soc.model values
    std::vector<std::string> soc_manufacturer;  // ro.soc.manufacturer
    std::vector<std::string> platform;          // ro.board.platform
    std::vector<std::string> hardware;          // ro.hardware / cpuinfo "Hardware"
    std::vector<std::string> soc_id;            // /sys/devices/soc0/soc_id values
    std::vector<std::string> soc_machine;       // /sys/devices/soc0/machine
    std::vector<std::string> product;           // ro.product.model
    std::vector<std::string> cpu_part;          // "CPU part" in /proc/cpuinfo
    std::vector<std::string> arch;              // "x86_64", "aarch64"
};

// The largest sparsity fraction a manifest or --sparsity may ask for: above
// it almost nothing of a projection's input is left.
inline constexpr double kMaxSparsity = 0.95;

struct DWELL_CORE_API Manifest {
    std::filesystem::path source;  // file it came from ("<string>" if parsed)
    std::string name;              // [device] name
    ManifestDeviceMatch match;
    // [device] storage_read_mb_s, dram_bandwidth_gb_s: the device's published
    // sequential storage read rate (MB/s, 1e6 bytes) and DRAM bandwidth
    // (GB/s, 1e9 bytes), from its spec sheet; 0 when not given. Only read
    // by projections (tests/bench/phone_projection.sh), never by the runtime,
    // which measures what it needs.
    double storage_read_mb_s = 0;
    double dram_bandwidth_gb_s = 0;
    std::vector<ManifestBackend> backends;  // in priority order
    struct Memory {
        uint64_t budget_bytes = 0;  // 0: no budget
        uint64_t page_size = 16384;
        std::string weights = "mmap";      // mmap | load | stream
        bool mlock = false;                // mmap: lock the pinned layers (all if none pinned)
        uint64_t weight_budget_bytes = 0;  // stream: bytes of weights resident at once
        std::vector<int32_t> pin_layers;   // resident for good (stream) / locked (mmap)
        bool pin_auto = true;              // stream: pin more layers while the budget allows
        int32_t prefetch_layers = 2;       // stream: layers read ahead of the one computing
        // stream, MoE models: experts predicted for the next layer beyond
        // the k it uses, and the threads reading experts.
        int32_t expert_prefetch_margin = 0;
        int32_t expert_readers = 4;
    } memory;
    struct Cpu {
        int32_t threads = 0;           // 0: one per core
        std::string affinity = "any";  // any | big
    } cpu;
    struct Kv {
        dwell_dtype dtype = DWELL_F16;
        // Pages kept for prompt prefixes after their sessions end; 0: off.
        uint64_t prefix_cache_bytes = uint64_t{256} << 20;
    } kv;
    // [sparsity]: training-free activation sparsity at decode (graph.h
    // SPARSIFY): the share of each projection input's entries zeroed per
    // token, smallest magnitudes first; 0 (the default) is off.
    // `thresholds` instead: a file of calibrated per-input thresholds
    // (`dwell calibrate`, sparsity_thresholds.hpp), absolute, resolved
    // against the manifest's folder; each input's entries below its
    // threshold are zeroed. The two are exclusive.
    struct Sparsity {
        float fraction = 0.0f;
        std::filesystem::path thresholds;  // empty: none
    } sparsity;
    struct Plugins {
        std::vector<std::filesystem::path> search_paths;  // absolute, resolved against the file
        std::map<std::string, std::string> sha256;        // plugin name -> pinned hash
    } plugins;
    // [thermal]: the governor (thermal_policy.hpp); has_thermal when the
    // section is present.
    ThermalConfig thermal;
    bool has_thermal = false;

    static Manifest load(const std::filesystem::path& path);
    static Manifest parse(std::string_view text, const std::filesystem::path& source);
};

}  // namespace dwell
