#include "dwell/core/thermal/thermal_sensors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace dwell {
namespace {

namespace fs = std::filesystem;

// A fake /sys under a temp dir.
class FakeSysfs : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("dwell-thermal-" + std::to_string(::getpid()));
        fs::remove_all(root_);
        fs::create_directories(root_ / "sys/class/thermal");
        fs::create_directories(root_ / "sys/class/power_supply");
    }
    void TearDown() override { fs::remove_all(root_); }

    fs::path zone(int i, const std::string& type, const std::string& temp) {
        const fs::path d = root_ / "sys/class/thermal" / ("thermal_zone" + std::to_string(i));
        fs::create_directories(d);
        std::ofstream(d / "type") << type << "\n";
        if (!temp.empty()) std::ofstream(d / "temp") << temp << "\n";
        return d;
    }
    ThermalConfig zones(std::vector<std::string> z) {
        ThermalConfig c;
        c.zones = std::move(z);
        return c;
    }
    fs::path root_;
};

TEST_F(FakeSysfs, MatchesZonesByTypeAndTheHottestWins) {
    zone(0, "cpu-big", "45200");
    zone(1, "gpu", "47900");
    zone(2, "battery", "60000");  // not named: ignored
    const ThermalSensors s(root_, zones({"cpu-big", "gpu"}));
    EXPECT_EQ(s.zone_dirs().size(), 2u);
    const ThermalReading r = s.read();
    ASSERT_TRUE(r.temp_c);
    EXPECT_DOUBLE_EQ(*r.temp_c, 47.9);
    EXPECT_EQ(r.hottest_zone, "gpu");
    EXPECT_EQ(r.problem, "");
}

TEST_F(FakeSysfs, ReadsMillidegreesAndDegrees) {
    zone(0, "cpu", "41");  // some vendor drivers report whole degrees
    EXPECT_DOUBLE_EQ(*ThermalSensors(root_, zones({"cpu"})).read().temp_c, 41.0);
    EXPECT_DOUBLE_EQ(*parse_zone_temperature("41500"), 41.5);
    EXPECT_DOUBLE_EQ(*parse_zone_temperature("-5000"), -5.0);
    EXPECT_FALSE(parse_zone_temperature("abc"));
    EXPECT_FALSE(parse_zone_temperature("999999"));  // 999.999 C: nonsense
    EXPECT_FALSE(parse_zone_temperature(""));
}

TEST_F(FakeSysfs, AMissingZoneIsReportedAndTheOthersStillCount) {
    zone(0, "cpu", "40000");
    const ThermalSensors s(root_, zones({"cpu", "npu"}));
    ASSERT_EQ(s.missing_zones().size(), 1u);
    EXPECT_EQ(s.missing_zones()[0], "npu");
    const ThermalReading r = s.read();
    ASSERT_TRUE(r.temp_c);
    EXPECT_DOUBLE_EQ(*r.temp_c, 40.0);
    EXPECT_NE(r.problem.find("no thermal zone of type npu"), std::string::npos);
}

TEST_F(FakeSysfs, UnreadableOrNonsenseValuesGiveAProblemAndNoTemperature) {
    zone(0, "cpu", "");        // no temp file
    zone(1, "gpu", "hot");     // not a number
    zone(2, "npu", "250000");  // 250 C: out of range
    const ThermalReading r = ThermalSensors(root_, zones({"cpu", "gpu", "npu"})).read();
    EXPECT_FALSE(r.temp_c);
    EXPECT_NE(r.problem.find("unreadable"), std::string::npos);
    EXPECT_NE(r.problem.find("reads 'hot', not a temperature"), std::string::npos);
    EXPECT_NE(r.problem.find("reads '250000'"), std::string::npos);
}

TEST_F(FakeSysfs, NoZonesNamedIsAProblem) {
    zone(0, "cpu", "40000");
    const ThermalReading r = ThermalSensors(root_, zones({})).read();
    EXPECT_FALSE(r.temp_c);
    EXPECT_NE(r.problem.find("no thermal zones are named"), std::string::npos);
}

TEST_F(FakeSysfs, BatteryPowerFromCurrentTimesVoltage) {
    zone(0, "cpu", "40000");
    const fs::path bat = root_ / "sys/class/power_supply/battery";
    fs::create_directories(bat);
    std::ofstream(bat / "type") << "Battery\n";
    std::ofstream(bat / "current_now") << "-1500000\n";  // uA; negative: discharging
    std::ofstream(bat / "voltage_now") << "3800000\n";   // uV
    const fs::path usb = root_ / "sys/class/power_supply/usb";
    fs::create_directories(usb);
    std::ofstream(usb / "type") << "USB\n";
    ThermalConfig c = zones({"cpu"});
    c.battery_power = true;
    const ThermalReading r = ThermalSensors(root_, c).read();
    ASSERT_TRUE(r.power_w);
    EXPECT_NEAR(*r.power_w, 5.7, 1e-9);
    c.battery_power = false;
    EXPECT_FALSE(ThermalSensors(root_, c).read().power_w);  // not asked for
}

}  // namespace
}  // namespace dwell
