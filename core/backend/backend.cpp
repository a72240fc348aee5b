#include "dwell/core/backend/backend.hpp"

#include <utility>

namespace dwell {

Backend::Backend(std::shared_ptr<LoadedPlugin> plugin, uint32_t device,
                 const dwell_device_info& info, dwell_backend_context* ctx, ManifestBackend entry)
    : plugin_(std::move(plugin)),
      device_(device),
      info_(info),
      ctx_(ctx),
      entry_(std::move(entry)) {
    if (entry_.step_timeout_ms > 0) step_worker_ = std::make_unique<StepWorker>(*this);
}

Backend::~Backend() {
    step_worker_.reset();  // waits for a late call: it may still use the context
    if (ctx_) api().context_destroy(ctx_);
}

std::string Backend::label() const {
    return plugin_->name() + "/" + (info_.name ? info_.name : std::to_string(device_));
}

std::string Backend::last_error() const {
    const char* e = api().context_last_error ? api().context_last_error(ctx_) : nullptr;
    return e && *e ? e : "no message";
}

}  // namespace dwell
