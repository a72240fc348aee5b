// One initialised backend: a plugin's execution context on one device,
// with its health record and (when the manifest sets a step deadline) the
// worker thread that isolates its calls; and BackendChoice, why the runtime
// selected or skipped a backend.
//
// Thread-safety: a Backend's calls into its context are serialised by
// mutex() (the scheduler takes it); health and the thermal pause flag may
// be read from any thread. Ownership: the Runtime owns its Backends; a
// Backend owns its context and destroys it after its step worker is done.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "dwell/backend.h"
#include "dwell/core/backend/backend_health.hpp"
#include "dwell/core/backend/plugin_loader.hpp"
#include "dwell/core/backend/step_worker.hpp"
#include "dwell/core/base/export.hpp"
#include "dwell/core/config/manifest.hpp"

namespace dwell {

// An initialised backend context on one device.
class DWELL_CORE_API Backend {
public:
    Backend(std::shared_ptr<LoadedPlugin> plugin, uint32_t device, const dwell_device_info& info,
            dwell_backend_context* ctx, ManifestBackend entry);
    ~Backend();
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;

    const LoadedPlugin& plugin() const { return *plugin_; }
    const dwell_backend_plugin& api() const { return *plugin_->backend(); }
    dwell_backend_context* context() const { return ctx_; }
    const dwell_device_info& device_info() const { return info_; }
    const ManifestBackend& entry() const { return entry_; }
    std::string label() const;  // "cpu/cpu0"
    std::string last_error() const;
    // A context is single-threaded by contract; sessions on different
    // threads take this around every call into it.
    std::mutex& mutex() const { return mutex_; }

    // Step outcomes, kept by the scheduler: an unhealthy backend gets no
    // more nodes (backend_health.hpp says when that happens).
    BackendHealth& health() const { return health_; }
    bool healthy() const { return health_.healthy(); }
    // The thread running this backend's steps against its deadline
    // ([[backend]] step_timeout_ms); nullptr when it has none.
    StepWorker* step_worker() const { return step_worker_.get(); }
    // The thermal governor moves work off a hot accelerator: placement skips
    // it while paused.
    bool thermally_paused() const { return paused_.load(); }
    void set_thermally_paused(bool paused) const { paused_.store(paused); }

private:
    std::shared_ptr<LoadedPlugin> plugin_;
    uint32_t device_;
    dwell_device_info info_;
    dwell_backend_context* ctx_;
    ManifestBackend entry_;
    mutable std::mutex mutex_;
    mutable BackendHealth health_;
    mutable std::atomic<bool> paused_{false};
    std::unique_ptr<StepWorker> step_worker_;
};

// What happened to each [[backend]] entry of the manifest.
struct BackendChoice {
    std::string plugin;
    std::filesystem::path path;  // empty when not found
    std::string device;
    bool selected = false;
    std::string reason;  // why skipped, or "selected"
};

}  // namespace dwell
