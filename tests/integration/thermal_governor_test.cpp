// The thermal governor inside a runtime, over a fake sysfs tree: a hot
// device engages pacing, fewer CPU threads and pauses the accelerator
// (work moves to the CPU), a cool one restores everything, a broken sensor
// gives the fallback, and greedy output is the same with the governor on
// and off — it changes timing and placement, never results.
#include "dwell/core/thermal/thermal_governor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

class ThermalGovernorRuntime : public Stories260KReference {
protected:
    void SetUp() override {
        Stories260KReference::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        zone_ = dir_.path() / "sys/class/thermal/thermal_zone3";
        fs::create_directories(zone_);
        std::ofstream(zone_ / "type") << "soc-test\n";
        set_temp("47000");
        devfreq_ = dir_.path() / "sys/class/devfreq/gpu";
        fs::create_directories(devfreq_);
        std::ofstream(devfreq_ / "max_freq") << "900000000\n";
        std::ofstream(devfreq_ / "min_freq") << "300000000\n";
    }
    std::string max_freq() const {
        std::ifstream in(devfreq_ / "max_freq");
        std::string v;
        in >> v;
        return v;
    }
    void set_temp(const std::string& v) { std::ofstream(zone_ / "temp") << v << "\n"; }

    RuntimeOptions options(bool thermal, const std::string& backends = "") {
        RuntimeOptions o;
        o.manifest = dir_.write("hot.toml", backends +
                                                "[[backend]]\nplugin = \"cpu\"\n"
                                                "options = { threads = \"2\" }\n"
                                                "[thermal]\nzones = [\"soc-test\"]\n"
                                                "period_ms = 50\ntarget_c = 40\nlimit_c = 45\n"
                                                "devfreq = [{ path = \"/sys/class/devfreq/gpu\", "
                                                "cap_khz = 500000 }]\n");
        o.thermal = thermal;
        o.thermal_root = dir_.path();
        return o;
    }

    // Waits until the governor has taken `n` more readings.
    static ThermalState after_periods(const Runtime& rt, int n) {
        const int64_t start = rt.thermal_state()->periods;
        for (int i = 0; i < 400 && rt.thermal_state()->periods < start + n; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return *rt.thermal_state();
    }

    std::vector<int32_t> greedy(Runtime& rt, const ReferenceCase& c) {
        auto model = Model::load(rt, model_);
        const auto n = static_cast<int32_t>(c.full_ids.size() -
                                            model->tokenizer().encode(c.prompt, true).size());
        return greedy_ids(rt, model_, c.prompt, n);
    }

    TempDir dir_;
    fs::path zone_, devfreq_;
};

TEST_F(ThermalGovernorRuntime, HotDevicePacesAndUsesFewerThreadsWithTheSameTokens) {
    Runtime off(options(false));
    EXPECT_FALSE(off.thermal_state().has_value());
    Runtime on(options(true));
    ASSERT_TRUE(on.thermal_state().has_value());
    const ThermalState hot = after_periods(on, 2);
    ASSERT_TRUE(hot.reading.temp_c.has_value());
    EXPECT_DOUBLE_EQ(*hot.reading.temp_c, 47.0);
    EXPECT_EQ(hot.reading.hottest_zone, "soc-test");
    EXPECT_EQ(hot.actions.throttle, 1.0);  // above the limit: every lever at once
    EXPECT_LT(hot.actions.duty, 0.5);
    EXPECT_LT(hot.actions.thread_share, 1.0);
    EXPECT_TRUE(hot.actions.freq_capped);
    EXPECT_EQ(max_freq(), "500000000");  // the devfreq cap, written under the sysfs root
    for (const ReferenceCase& c : ref_.cases) {
        SCOPED_TRACE(c.prompt);
        EXPECT_EQ(greedy(on, c), c.full_ids);
        EXPECT_EQ(greedy(off, c), c.full_ids);
    }
    // Cooling down restores everything.
    set_temp("30000");
    ThermalState cool = after_periods(on, 3);
    for (int i = 0; i < 100 && cool.actions.throttle > 0; ++i) cool = after_periods(on, 1);
    EXPECT_EQ(cool.actions, ThermalActions{});
    EXPECT_EQ(max_freq(), "900000000");  // restored
}

#ifdef DWELL_TEST_FAKE_CDSPRPC
TEST_F(ThermalGovernorRuntime, AHotDeviceMovesWorkOffTheAcceleratorAndBack) {
    ::setenv("DWELL_HEXAGON_FASTRPC_LIB", DWELL_TEST_FAKE_CDSPRPC, 1);
    Runtime rt(options(true, "[[backend]]\nplugin = \"hexagon\"\n"));
    ASSERT_EQ(rt.backends().front()->label(), "hexagon/cdsp0");
    const ThermalState hot = after_periods(rt, 2);
    EXPECT_TRUE(hot.actions.offloaded);
    EXPECT_TRUE(rt.backends().front()->thermally_paused());
    EXPECT_FALSE(rt.backends().back()->thermally_paused());  // the CPU takes the work
    const ReferenceCase& c = ref_.cases.front();
    EXPECT_EQ(greedy(rt, c), c.full_ids);
    set_temp("30000");
    for (int i = 0; i < 100 && rt.backends().front()->thermally_paused(); ++i) after_periods(rt, 1);
    EXPECT_FALSE(rt.backends().front()->thermally_paused());
    EXPECT_EQ(greedy(rt, c), c.full_ids);
}
#endif

TEST_F(ThermalGovernorRuntime, ABrokenSensorGivesTheFallbackNotACrash) {
    set_temp("garbage");
    Runtime rt(options(true));
    const ThermalState s = after_periods(rt, ThermalPolicy::kFallbackAfter + 1);
    EXPECT_FALSE(s.reading.temp_c.has_value());
    EXPECT_NE(s.reading.problem.find("not a temperature"), std::string::npos) << s.reading.problem;
    EXPECT_TRUE(s.actions.fallback);
    EXPECT_EQ(s.actions.throttle, ThermalPolicy::kFallbackThrottle);
    const ReferenceCase& c = ref_.cases.front();
    EXPECT_EQ(greedy(rt, c), c.full_ids);
    set_temp("41000");  // the sensor reads again: the fallback ends
    ThermalState back = after_periods(rt, 2);
    EXPECT_FALSE(back.actions.fallback);
    EXPECT_TRUE(back.reading.problem.empty()) << back.reading.problem;
}

}  // namespace
}  // namespace dwell::test
