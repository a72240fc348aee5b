#include "vendor_double_fixture.hpp"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"

namespace dwell::test {

LogCapture::LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
}

LogCapture::~LogCapture() {
    spdlog::set_default_logger(previous_);
}

RuntimeOptions plugin_then_cpu(const TempDir& dir, const std::string& plugin,
                               const std::string& entry) {
    RuntimeOptions o;
    o.manifest = dir.write(plugin + ".toml",
                           "[device]\nname = \"" + plugin + " test\"\n[[backend]]\nplugin = \"" +
                               plugin + "\"\n" + entry + "[[backend]]\nplugin = \"cpu\"\n");
    o.threads = 2;
    return o;
}

bool choice_says(const Runtime& rt, const std::string& plugin, const std::string& text) {
    bool said = false;
    for (const auto& ch : rt.backend_choices())
        said |= ch.plugin == plugin && ch.reason.find(text) != std::string::npos;
    return said;
}

void expect_fall_through_without_library(const std::string& plugin, const char* variable,
                                         const std::string& missing, const std::string& reason) {
    ::setenv(variable, missing.c_str(), 1);
    {
        TempDir dir;
        Runtime rt(plugin_then_cpu(dir, plugin));
        EXPECT_EQ(rt.backends().size(), 1u);
        if (!rt.backends().empty()) {
            EXPECT_EQ(rt.backends().front()->label(), "cpu/cpu0");
        }
        EXPECT_TRUE(choice_says(rt, plugin, reason)) << reason;
    }
    ::unsetenv(variable);
}

void VendorDoubleTest::SetUp() {
    Stories260KReference::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ::setenv(setup_.library_variable, setup_.library_value.c_str(), 1);
    ::unsetenv(setup_.fault_variable);
    double_ = ::dlopen(setup_.double_file.c_str(), RTLD_NOW);
    ASSERT_NE(double_, nullptr) << ::dlerror();
}

void VendorDoubleTest::TearDown() {
    ::unsetenv(setup_.fault_variable);
    if (double_ != nullptr) ::dlclose(double_);
}

std::string VendorDoubleTest::text_of(const char* name) {
    char buf[4096] = {0};
    return call<int>(name, static_cast<char*>(buf), static_cast<int>(sizeof buf)) > 0 ? buf : "";
}

std::vector<int32_t> VendorDoubleTest::greedy(Runtime& rt, const ReferenceCase& c) {
    auto model = Model::load(rt, model_);
    const auto n =
        static_cast<int32_t>(c.full_ids.size() - model->tokenizer().encode(c.prompt, true).size());
    return greedy_ids(rt, model_, c.prompt, n);
}

void VendorDoubleTest::expect_projections_only_on(Runtime& rt, const std::shared_ptr<Model>& model,
                                                  const std::string& label) {
    Session s(rt, model, SessionOptions{});
    s.decode(model->tokenizer().encode("Once", true));
    const std::string& placement = s.placement_summary();
    EXPECT_NE(placement.find(label + ": 36 nodes"), std::string::npos) << placement;
    EXPECT_NE(placement.find("[matmulx36]"), std::string::npos) << placement;
    const size_t at = placement.find("cpu/cpu0: ");
    ASSERT_NE(at, std::string::npos) << placement;
    const std::string cpu = placement.substr(at, placement.find('\n', at) - at);
    EXPECT_NE(cpu.find("attentionx5"), std::string::npos) << placement;
    EXPECT_EQ(cpu.find("matmul"), std::string::npos) << placement;
}

}  // namespace dwell::test
