// The runtime: one per process (or per embedding app). It reads the device
// manifest, owns the memory pool, loads plugins, and initialises the
// backends the manifest selects, in its order of preference. A backend that
// cannot be had (plugin missing, device unavailable, same hardware already
// taken) is skipped with a warning that says why, and the next one is tried.
//
// Thread-safety: construction and destruction from one thread; the const
// accessors may be used from any thread afterwards.
// Ownership: the runtime must outlive every Model and Session made from it.
// Destroying it (and unloading a Model) waits for a backend call abandoned
// past its step deadline to return: the plugin may still read the weights
// and use its context and the host's services until then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/backend.h"
#include "dwell/core/backend/backend.hpp"
#include "dwell/core/base/export.hpp"
#include "dwell/core/config/manifest.hpp"
#include "dwell/core/config/sparsity_thresholds.hpp"
#include "dwell/core/memory/memory_pool.hpp"

namespace dwell {

// Handed out by reference only: callers that use them include their headers.
struct DeviceFacts;
struct ManifestCandidate;
struct ThermalState;
class KvPagePool;
class KvPrefixCache;

// The KV page space when no memory budget is set and the device's memory
// cannot be read (no readable proc/meminfo under the device root): about
// half of a small phone's memory.
inline constexpr uint64_t kUnknownMemoryKvSpaceBytes = uint64_t{4} << 30;

struct RuntimeOptions {
    std::optional<std::filesystem::path> manifest;  // otherwise chosen by device facts
    int32_t threads = 0;                            // > 0 overrides [cpu] threads
    std::optional<uint64_t> memory_budget_bytes;    // overrides [memory] budget_mb
    std::optional<uint64_t> prefix_cache_bytes;     // overrides [kv] prefix_cache_mb
    std::optional<std::string> weights;             // overrides [memory] weights
    std::optional<uint64_t> weight_budget_bytes;    // overrides [memory] weight_budget_mb
    std::optional<int32_t> prefetch_layers;         // overrides [memory] prefetch_layers
    // Either overrides the whole [sparsity] section: a fraction drops the
    // manifest's thresholds file and a thresholds file its fraction.
    std::optional<float> sparsity;                  // overrides [sparsity] fraction
    std::optional<std::filesystem::path> sparsity_thresholds;  // overrides [sparsity] thresholds
    // Device detection for the manifest choice: a captured device tree
    // instead of "/", and a file of getprop output (--sysroot, --getprop).
    std::optional<std::filesystem::path> device_root;
    std::optional<std::filesystem::path> getprop_file;
    // The thermal governor: overrides [thermal] enabled; its sysfs root
    // (default: device_root, else "/").
    std::optional<bool> thermal;
    std::optional<std::filesystem::path> thermal_root;
    bool strict = false;          // fail instead of falling back to a lower-priority backend
    bool require_backend = true;  // false: a runtime with no usable backend (for reports)
};

class DWELL_CORE_API Runtime {
public:
    explicit Runtime(const RuntimeOptions& options = {});
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    const Manifest& manifest() const;
    // The calibrated thresholds of [sparsity] thresholds (or the option),
    // read when the runtime was made; nullptr when none.
    const SparsityThresholds* sparsity_thresholds() const;
    const std::string& manifest_choice() const;  // why this manifest
    // Filled when the manifest was chosen by detection (not --manifest).
    const DeviceFacts& device_facts() const;
    const std::vector<ManifestCandidate>& manifest_candidates() const;
    MemoryPool& pool();
    const MemoryPool& pool() const;
    // The pages of every session's KV cache (shared prefixes share pages).
    KvPagePool& kv_pages();
    // Pages of earlier prompts that new sessions may adopt.
    KvPrefixCache& kv_prefixes();
    // A number no other Model of this runtime has had (keys the prefix cache).
    uint64_t next_model_id();
    // A Model is being unloaded: its cached prefixes go.
    void forget_model(uint64_t model_id) const;
    // Gives bytes charged to the pool back (a Model's weights on unload).
    void uncharge(uint64_t bytes, MemoryUse use) const;
    PluginLoader& loader();
    const dwell_host_services* host_services() const;
    const std::vector<std::unique_ptr<Backend>>& backends() const;
    const std::vector<BackendChoice>& backend_choices() const;
    bool strict() const;
    // Memory the system and the process's cgroup can still give, read under
    // the device root (RuntimeOptions::device_root); 0 when unknown.
    uint64_t available_memory() const;

    // The thermal governor's view, when it runs (manifest [thermal] with
    // zones, not turned off).
    std::optional<ThermalState> thermal_state() const;
    // Called by sessions after each step: rests as the governor's pacing asks.
    void pace(double step_seconds) const;

    // Every model plugin listing `architecture`, in the order they are
    // offered a model file: search folders in order, file names sorted within
    // a folder (several plugins may serve variants of one architecture, e.g.
    // dense and mixture-of-experts "llama" files; each declines the others').
    // Throws naming the architectures served and the folders searched when
    // none lists it.
    std::vector<std::shared_ptr<LoadedPlugin>> model_plugins_for(
        const std::string& architecture, const std::filesystem::path& model_path);

    // Folders searched for manifests when none is given.
    static std::vector<std::filesystem::path> manifest_dirs();
    // The cpu-only manifest used when no manifest folder exists.
    static std::string_view builtin_manifest();

    // Tells every backend that implements release_weights (ABI 1.1) that
    // the weights in [data, data + bytes) are gone.
    void release_weights(const void* data, size_t bytes) const;

    // Expires with the runtime: lets a Model that outlives it skip telling
    // backends that no longer exist.
    std::weak_ptr<const Runtime*> lifetime() const;

private:
    // The manifest, pool, plugins, backends and thermal governor: kept out
    // of this header so that hosts compile against the interface alone.
    struct DWELL_CORE_LOCAL Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dwell
