// The backend kit (sdk/kit/backend) on its own, as a plugin compiles it in:
// the plugin-wide error (prefix, per thread, the "no message" answer), the
// one-device count, vendor-library loading messages, tensor sizes and the
// FNV-1a digest against the published FNV test vectors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "backend/backend_plugin_kit.hpp"
#include "backend/vendor_library.hpp"
#include "backend/weight_conversion.hpp"

namespace dwell::plugin_kit {
namespace {

constexpr char kName[] = "acme";

// What the plugin-wide error of a thread that has not failed says.
std::string fresh_thread_error() {
    std::string seen;
    std::thread([&] { seen = plugin_last_error(nullptr); }).join();
    return seen;
}

TEST(BackendKit, PluginErrorsArePrefixedWithThePluginAndKeptPerThread) {
    EXPECT_EQ(fail_plugin<kName>(DWELL_ERR_UNAVAILABLE, "no device"), DWELL_ERR_UNAVAILABLE);
    EXPECT_STREQ(plugin_last_error(nullptr), "acme plugin: no device");
    // Another thread neither sees this message nor replaces it.
    EXPECT_EQ(fresh_thread_error(), "no message");
    std::thread([] { fail_plugin<kName>(DWELL_ERR_INTERNAL, "elsewhere"); }).join();
    EXPECT_STREQ(plugin_last_error(nullptr), "acme plugin: no device");
}

TEST(BackendKit, OneDeviceCountsOneAndRefusesANullCount) {
    uint32_t n = 7;
    EXPECT_EQ(one_device<kName>(nullptr, &n), DWELL_OK);
    EXPECT_EQ(n, 1u);
    EXPECT_EQ(one_device<kName>(nullptr, nullptr), DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(plugin_last_error(nullptr), "acme plugin: null count");
}

struct LibcApi {
    size_t (*strlen)(const char*) = nullptr;
    int (*missing)(void) = nullptr;
};

TEST(BackendKit, LoadingAVendorLibraryNamesWhatIsMissing) {
    auto absent = load_vendor_library<LibcApi>(
        "/nonexistent/libacme.so", "acme",
        [](const auto& resolve, LibcApi& a) { return resolve("strlen", a.strlen); });
    EXPECT_FALSE(absent.ok);
    EXPECT_EQ(absent.why.rfind("/nonexistent/libacme.so not found", 0), 0u) << absent.why;

    auto partial =
        load_vendor_library<LibcApi>("libc.so.6", "C", [](const auto& resolve, LibcApi& a) {
            return resolve("strlen", a.strlen) && resolve("dwell_no_such_call", a.missing);
        });
    EXPECT_FALSE(partial.ok);
    EXPECT_EQ(partial.why, "the C library lacks dwell_no_such_call");
    ASSERT_NE(partial.api.strlen, nullptr);
    EXPECT_EQ(partial.api.strlen("four"), 4u);
}

TEST(BackendKit, TensorBytesAndF32Contiguity) {
    dwell_tensor t{};
    t.dtype = DWELL_F32;
    t.n_dims = 2;
    const int64_t ne[] = {8, 3, 1, 1};
    for (int d = 0; d < DWELL_MAX_DIMS; ++d) t.ne[d] = ne[d];
    t.nb[0] = 4;
    for (int d = 1; d < DWELL_MAX_DIMS; ++d) t.nb[d] = t.nb[d - 1] * t.ne[d - 1];
    EXPECT_EQ(tensor_bytes(t), 8u * 3u * 4u);
    EXPECT_TRUE(f32_contiguous(t));
    t.nb[1] = 64;  // rows 64 bytes apart: a view, not contiguous
    t.nb[2] = t.nb[3] = 192;
    EXPECT_FALSE(f32_contiguous(t));
    t = dwell_tensor{};
    t.dtype = DWELL_Q8_0;
    t.ne[0] = 64;  // two blocks of 32 values, 34 bytes each
    t.ne[1] = t.ne[2] = t.ne[3] = 1;
    EXPECT_EQ(tensor_bytes(t), 68u);
}

TEST(BackendKit, Fnv1aMatchesThePublishedTestVectors) {
    EXPECT_EQ(fnv1a("", 0), 0xcbf29ce484222325ull);
    EXPECT_EQ(fnv1a("a", 1), 0xaf63dc4c8601ec8cull);
    EXPECT_EQ(fnv1a("foobar", 6), 0x85944171f73967e8ull);
    // Chained: the digest of the halves equals the whole's.
    EXPECT_EQ(fnv1a("bar", 3, fnv1a("foo", 3)), fnv1a("foobar", 6));
}

}  // namespace
}  // namespace dwell::plugin_kit
