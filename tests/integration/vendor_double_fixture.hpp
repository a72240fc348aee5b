// Fixtures shared by the tests that run a vendor backend plugin (hexagon,
// apu, nnrt) against its test double (tests/plugins/*_double): the double
// opened in the test process (the same file the plugin loads, so the same
// instance) and its test-only queries, the plugin-then-cpu manifest, greedy
// generation through it, capturing the runtime's log, and the fall-through
// when the vendor library is missing.
//
// Thread-safety: test-thread only (they set environment variables and the
// default logger). Ownership: a fixture owns its temp folder and its handle
// on the double, closed in TearDown; LogCapture restores the previous
// default logger when it goes.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dwell/core/model/model.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "integration_support.hpp"

namespace spdlog {
class logger;
}

namespace dwell::test {

// The default logger's lines while it lives.
class LogCapture {
public:
    LogCapture();
    ~LogCapture();
    LogCapture(const LogCapture&) = delete;
    LogCapture& operator=(const LogCapture&) = delete;
    std::string text() const { return stream_.str(); }

private:
    std::ostringstream stream_;
    std::shared_ptr<spdlog::logger> previous_;
};

// A manifest written into `dir` as "<plugin>.toml": `plugin` first, with
// `entry` (whole lines, e.g. "options = { ... }\n") in its [[backend]]
// table, then cpu; two threads.
RuntimeOptions plugin_then_cpu(const TempDir& dir, const std::string& plugin,
                               const std::string& entry = "");

// Whether the runtime's reason for choosing (or not) `plugin` contains `text`.
bool choice_says(const Runtime& rt, const std::string& plugin, const std::string& text);

// With `variable` naming a vendor library that is not there: the plugin's
// device is unavailable, the manifest falls through to cpu alone, and the
// reason given names `reason`.
void expect_fall_through_without_library(const std::string& plugin, const char* variable,
                                         const std::string& missing, const std::string& reason);

// Where a plugin finds its test double, and where the test opens it.
struct DoubleSetup {
    const char* library_variable;  // the plugin's variable, e.g. DWELL_APU_NEURON_LIB ...
    std::string library_value;     // ... set to this
    const char* fault_variable;    // the double's fault spec, cleared around each test
    std::string double_file;       // the library the test opens for the double's queries
    const char* violations_query;  // its `int (char* out, int cap)` contract record
};

// A test of a plugin through its double, on stories260K and its llama.cpp
// reference (skipped as Stories260KReference is when they are missing).
class VendorDoubleTest : public Stories260KReference {
protected:
    explicit VendorDoubleTest(DoubleSetup setup) : setup_(std::move(setup)) {}
    void SetUp() override;
    void TearDown() override;

    // The double's function `name` called with `args`: R{} (and a failure)
    // when the double lacks it.
    template <typename R, typename... A>
    R call(const char* name, A... args) {
        auto fn = reinterpret_cast<R (*)(A...)>(::dlsym(double_, name));
        EXPECT_NE(fn, nullptr) << name;
        return fn != nullptr ? fn(args...) : R{};
    }
    // The text a query `int name(char* out, int cap)` returns.
    std::string text_of(const char* name);
    // The double's record of contract violations and objects left alive.
    std::string violations() { return text_of(setup_.violations_query); }
    long counter(const char* name) { return call<long>(name); }

    // Greedy generation through `rt` after c's prompt, as long as the
    // reference's continuation.
    std::vector<int32_t> greedy(Runtime& rt, const ReferenceCase& c);

    // The hybrid split after `model` (stories260K, loaded in rt) decoded
    // "Once": backend `label` took every projection (5 layers x 7, and the
    // vocabulary one) and nothing else; cpu took attention, norms, RoPE and
    // the KV cache, and no matmul.
    void expect_projections_only_on(Runtime& rt, const std::shared_ptr<Model>& model,
                                    const std::string& label);

    TempDir dir_;
    void* double_ = nullptr;

private:
    DoubleSetup setup_;
};

}  // namespace dwell::test
