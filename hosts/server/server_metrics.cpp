#include "server_metrics.hpp"

#include <sstream>

namespace dwell::server {

namespace {

// A Prometheus label value: backslash, quote and line feed escaped.
std::string label_value(const std::string& s) {
    std::string out;
    for (const char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        out += c == '\n' ? std::string("\\n") : std::string(1, c);
    }
    return out;
}

}  // namespace

void ServerMetrics::request(const std::string& endpoint, int status) {
    std::lock_guard lock(mutex_);
    ++requests_[{endpoint, status}];
}

void ServerMetrics::tokens(int64_t prompt, int64_t generated, double generation_seconds) {
    std::lock_guard lock(mutex_);
    prompt_tokens_ += prompt;
    generated_tokens_ += generated;
    generation_seconds_ += generation_seconds;
    if (generation_seconds > 0) last_tokens_per_second_ = generated / generation_seconds;
}

std::string ServerMetrics::render(const Gauges& g) const {
    std::lock_guard lock(mutex_);
    std::ostringstream out;
    out << "# HELP dwell_requests_total HTTP requests by endpoint and status.\n"
           "# TYPE dwell_requests_total counter\n";
    for (const auto& [key, n] : requests_)
        out << "dwell_requests_total{endpoint=\"" << key.first << "\",code=\"" << key.second
            << "\"} " << n << "\n";
    out << "# HELP dwell_prompt_tokens_total Prompt tokens evaluated.\n"
           "# TYPE dwell_prompt_tokens_total counter\n"
        << "dwell_prompt_tokens_total " << prompt_tokens_ << "\n"
        << "# HELP dwell_generated_tokens_total Tokens generated.\n"
           "# TYPE dwell_generated_tokens_total counter\n"
        << "dwell_generated_tokens_total " << generated_tokens_ << "\n"
        << "# HELP dwell_generation_seconds_total Time spent generating.\n"
           "# TYPE dwell_generation_seconds_total counter\n"
        << "dwell_generation_seconds_total " << generation_seconds_ << "\n"
        << "# HELP dwell_tokens_per_second Decode speed of the last finished request.\n"
           "# TYPE dwell_tokens_per_second gauge\n"
        << "dwell_tokens_per_second " << last_tokens_per_second_ << "\n"
        << "# HELP dwell_requests_running Requests generating now.\n"
           "# TYPE dwell_requests_running gauge\n"
        << "dwell_requests_running " << g.running << "\n"
        << "# HELP dwell_queue_depth Requests waiting for a place.\n"
           "# TYPE dwell_queue_depth gauge\n"
        << "dwell_queue_depth " << g.waiting << "\n"
        << "# HELP dwell_kv_pages_in_use KV-cache pages held by sessions and the prefix cache.\n"
           "# TYPE dwell_kv_pages_in_use gauge\n"
        << "dwell_kv_pages_in_use " << g.kv_pages_in_use << "\n"
        << "# HELP dwell_kv_page_bytes Bytes of one KV-cache page.\n"
           "# TYPE dwell_kv_page_bytes gauge\n"
        << "dwell_kv_page_bytes " << g.kv_page_bytes << "\n"
        << "# HELP dwell_memory_used_bytes Bytes charged to the memory budget.\n"
           "# TYPE dwell_memory_used_bytes gauge\n"
        << "dwell_memory_used_bytes " << g.memory_used_bytes << "\n"
        << "# HELP dwell_memory_budget_bytes The memory budget (0: none).\n"
           "# TYPE dwell_memory_budget_bytes gauge\n"
        << "dwell_memory_budget_bytes " << g.memory_budget_bytes << "\n";
    if (!g.backends.empty()) {
        out << "# HELP dwell_backend_healthy Whether the scheduler still gives the backend work.\n"
               "# TYPE dwell_backend_healthy gauge\n";
        for (const auto& [label, r] : g.backends)
            out << "dwell_backend_healthy{backend=\"" << label_value(label) << "\"} "
                << (r.healthy ? 1 : 0) << "\n";
        out << "# HELP dwell_backend_steps_total Steps the backend ran without a fault.\n"
               "# TYPE dwell_backend_steps_total counter\n";
        for (const auto& [label, r] : g.backends)
            out << "dwell_backend_steps_total{backend=\"" << label_value(label) << "\"} "
                << r.steps_run << "\n";
        out << "# HELP dwell_backend_failed_steps_total Steps rerun on the next backend, by "
               "fault.\n"
               "# TYPE dwell_backend_failed_steps_total counter\n";
        for (const auto& [label, r] : g.backends) {
            const std::pair<const char*, uint64_t> faults[] = {{"error_status", r.error_statuses},
                                                               {"timeout", r.timeouts},
                                                               {"wrong_size", r.wrong_sizes}};
            for (const auto& [fault, n] : faults)
                out << "dwell_backend_failed_steps_total{backend=\"" << label_value(label)
                    << "\",fault=\"" << fault << "\"} " << n << "\n";
        }
    }
    if (g.thermal) {
        const ThermalState& t = *g.thermal;
        const ThermalActions& a = t.actions;
        if (t.reading.temp_c)
            out << "# HELP dwell_temperature_celsius The hottest thermal zone the governor reads.\n"
                   "# TYPE dwell_temperature_celsius gauge\n"
                << "dwell_temperature_celsius " << *t.reading.temp_c << "\n";
        out << "# HELP dwell_thermal_throttle The governor's throttle level (0: none, 1: all "
               "levers).\n"
               "# TYPE dwell_thermal_throttle gauge\n"
            << "dwell_thermal_throttle " << a.throttle << "\n"
            << "# HELP dwell_thermal_duty Share of time spent generating (pacing).\n"
               "# TYPE dwell_thermal_duty gauge\n"
            << "dwell_thermal_duty " << a.duty << "\n"
            << "# HELP dwell_thermal_thread_share Share of the CPU threads in use.\n"
               "# TYPE dwell_thermal_thread_share gauge\n"
            << "dwell_thermal_thread_share " << a.thread_share << "\n"
            << "# HELP dwell_thermal_lever Levers engaged (1) or not (0).\n"
               "# TYPE dwell_thermal_lever gauge\n"
            << "dwell_thermal_lever{lever=\"frequency_cap\"} " << a.freq_capped << "\n"
            << "dwell_thermal_lever{lever=\"offload\"} " << a.offloaded << "\n"
            << "dwell_thermal_lever{lever=\"sensor_fallback\"} " << a.fallback << "\n";
    }
    return out.str();
}

}  // namespace dwell::server
