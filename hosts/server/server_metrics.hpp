// Counters the server exposes at GET /metrics (Prometheus text format).
//
// Thread-safety: every member is safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dwell/core/backend/backend_health.hpp"
#include "dwell/core/thermal/thermal_governor.hpp"

namespace dwell::server {

class ServerMetrics {
public:
    void request(const std::string& endpoint, int status);
    void tokens(int64_t prompt, int64_t generated, double generation_seconds);

    // The exposition text; the gauges are read by the caller and passed in.
    struct Gauges {
        int32_t running = 0;
        int32_t waiting = 0;
        int64_t kv_pages_in_use = 0;
        int64_t kv_page_bytes = 0;
        uint64_t memory_used_bytes = 0;
        uint64_t memory_budget_bytes = 0;
        std::optional<ThermalState> thermal;  // when the governor runs
        // Each backend's label and health, in the runtime's order.
        std::vector<std::pair<std::string, BackendHealthReport>> backends;
    };
    std::string render(const Gauges& g) const;

private:
    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, int64_t> requests_;
    int64_t prompt_tokens_ = 0;
    int64_t generated_tokens_ = 0;
    double generation_seconds_ = 0;
    double last_tokens_per_second_ = 0;
};

}  // namespace dwell::server
