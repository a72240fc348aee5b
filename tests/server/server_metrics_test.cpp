// GET /metrics text for backend health: one healthy and one unhealthy
// backend give the documented sample lines, counts included, and a label
// with a quote, backslash or line break is escaped as Prometheus requires.
#include "server_metrics.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using dwell::BackendHealthReport;
using dwell::server::ServerMetrics;

bool has_line(const std::string& text, const std::string& line) {
    return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(ServerMetrics, BackendHealthSamples) {
    BackendHealthReport cpu;
    cpu.steps_run = 120;
    BackendHealthReport npu;
    npu.healthy = false;
    npu.steps_run = 7;
    npu.failed_steps = 4;
    npu.error_statuses = 3;
    npu.wrong_sizes = 1;
    ServerMetrics::Gauges g;
    g.backends = {{"cpu/cpu0", cpu}, {"npu/\"a\\b\"\nx", npu}};
    const std::string m = ServerMetrics().render(g);
    EXPECT_TRUE(has_line(m, "# TYPE dwell_backend_healthy gauge")) << m;
    EXPECT_TRUE(has_line(m, "dwell_backend_healthy{backend=\"cpu/cpu0\"} 1")) << m;
    EXPECT_TRUE(has_line(m, "dwell_backend_steps_total{backend=\"cpu/cpu0\"} 120")) << m;
    EXPECT_TRUE(has_line(
        m, "dwell_backend_failed_steps_total{backend=\"cpu/cpu0\",fault=\"error_status\"} 0"))
        << m;
    const std::string npu_label = "npu/\\\"a\\\\b\\\"\\nx";
    EXPECT_TRUE(has_line(m, "dwell_backend_healthy{backend=\"" + npu_label + "\"} 0")) << m;
    EXPECT_TRUE(has_line(m, "dwell_backend_steps_total{backend=\"" + npu_label + "\"} 7")) << m;
    EXPECT_TRUE(has_line(m, "dwell_backend_failed_steps_total{backend=\"" + npu_label +
                                "\",fault=\"error_status\"} 3"))
        << m;
    EXPECT_TRUE(has_line(
        m, "dwell_backend_failed_steps_total{backend=\"" + npu_label + "\",fault=\"timeout\"} 0"))
        << m;
    EXPECT_TRUE(has_line(m, "dwell_backend_failed_steps_total{backend=\"" + npu_label +
                                "\",fault=\"wrong_size\"} 1"))
        << m;

    // No backends (a host that passes none): no backend samples at all.
    EXPECT_EQ(ServerMetrics().render({}).find("dwell_backend_"), std::string::npos);
}

}  // namespace
