// The hosts' umbrella header compiles on its own and brings every layer of
// the core: a type from the bottom (base), the middle (kv) and the top (llm).
#include <gtest/gtest.h>

#include <type_traits>

#include "dwell/core/dwell_core.hpp"

TEST(UmbrellaHeader, BringsEveryLayer) {
    static_assert(std::is_class_v<dwell::Error>);
    static_assert(std::is_class_v<dwell::KvPagePool>);
    static_assert(std::is_class_v<dwell::Sampler>);
    const dwell::Error e(DWELL_ERR_INVALID_ARGUMENT, "x");
    EXPECT_STREQ(e.what(), "x");
}
