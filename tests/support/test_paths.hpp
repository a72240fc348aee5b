// Where tests find the shared real models. DWELL_MODELS_DIR in the
// environment overrides the CMake cache value; tests that need a model call
// require_model() and are reported SKIPPED, with the reason, when it is absent.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dwell::test {

// The command that runs this build's executables: empty for a native build,
// the emulator (e.g. qemu-aarch64 -cpu max) for a cross build, since the CI
// machine has no binfmt_misc handler to run foreign binaries directly.
// DWELL_TEST_EMULATOR (words separated by spaces) overrides it.
std::vector<std::string> emulator_prefix();

// Death tests re-execute this binary ("threadsafe" style) where they can;
// under the emulator (no binfmt_misc) that exec fails, so they fork
// ("fast" style) there. Call at the start of a death test.
void use_threadsafe_death_tests_where_possible();

std::filesystem::path models_dir();
std::filesystem::path reference_dir();

// The path of a model file, or "" after GTEST_SKIP-worthy absence; use via
// the DWELL_REQUIRE_MODEL macro, which skips the calling test.
std::filesystem::path model_path(const std::string& file);

}  // namespace dwell::test

#define DWELL_REQUIRE_MODEL(var, file)                                                    \
    const std::filesystem::path var = ::dwell::test::model_path(file);                    \
    if (var.empty())                                                                      \
    GTEST_SKIP() << "model " << (file) << " not found in " << ::dwell::test::models_dir() \
                 << " (set DWELL_MODELS_DIR or -DDWELL_MODELS_DIR=...)"
