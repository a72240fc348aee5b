// Context shift in a model whose layers rotate their keys with different
// RoPE bases (Gemma 2/3's local and global layers): each layer's moved keys
// must read as if computed at their new positions with that layer's base.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/kv/context_shift.hpp"
#include "dwell/core/kv/kv_cache.hpp"
#include "dwell/graph.h"

namespace dwell {
namespace {

constexpr size_t kPage = 16384;

// NEOX RoPE of each head of x at position p, in double; each pair's angle
// divided by factors[i] when given.
std::vector<float> rotated(const std::vector<float>& x, int64_t hd, double base, int64_t p,
                           const std::vector<float>& factors = {}) {
    std::vector<float> y(x);
    const int64_t half = hd / 2;
    for (size_t h = 0; h + static_cast<size_t>(hd) <= x.size(); h += static_cast<size_t>(hd)) {
        for (int64_t i = 0; i < half; ++i) {
            double theta = double(p) * std::pow(base, -2.0 * double(i) / double(hd));
            if (!factors.empty()) theta /= factors[static_cast<size_t>(i)];
            const double a = x[h + i], b = x[h + i + half];
            y[h + i] = static_cast<float>(a * std::cos(theta) - b * std::sin(theta));
            y[h + i + half] = static_cast<float>(a * std::sin(theta) + b * std::cos(theta));
        }
    }
    return y;
}

TEST(ContextShift, EachLayerTurnsItsKeysWithItsOwnRope) {
    MemoryPool memory{kPage, 0};
    KvPagePool pages{memory, 64 * kPage};
    const int64_t hd = 8, width = 16, n_past = 20, n_keep = 2, n_discard = 5;
    KvCache kv(pages, 2, width, 32, DWELL_F32);
    kv.prepare_write(0, n_past);
    const double bases[2] = {10000.0, 1000000.0};
    std::vector<float> x(static_cast<size_t>(width));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(1.0f + 0.7f * float(i));
    for (int32_t l = 0; l < 2; ++l)
        for (int64_t p = 0; p < n_past; ++p) {
            const auto k = rotated(x, hd, bases[l], p);
            std::copy(k.begin(), k.end(), reinterpret_cast<float*>(kv.row(l, 0, p)));
        }
    std::vector<std::optional<KeyRope>> ropes(2);
    for (int32_t l = 0; l < 2; ++l)
        ropes[static_cast<size_t>(l)] = KeyRope{DWELL_ROPE_NEOX, static_cast<int32_t>(hd), hd,
                                                static_cast<float>(bases[l]), 1.0f};
    shift_context(kv, ropes, n_keep, n_discard, n_past);
    for (int32_t l = 0; l < 2; ++l)
        for (int64_t p = n_keep; p < n_past - n_discard; ++p) {
            const auto want = rotated(x, hd, bases[l], p);
            const auto* got = reinterpret_cast<const float*>(kv.row(l, 0, p));
            for (int64_t i = 0; i < width; ++i)
                ASSERT_NEAR(got[i], want[static_cast<size_t>(i)], 1e-5)
                    << "layer " << l << " position " << p << " value " << i;
        }
}

// Keys rotated with per-pair frequency factors (Llama 3's rope_freqs,
// LongRoPE, YaRN) turn with the same factors; factors the graph could not
// read refuse the shift before any row moves.
TEST(ContextShift, KeysTurnWithTheirFrequencyFactors) {
    MemoryPool memory{kPage, 0};
    KvPagePool pages{memory, 64 * kPage};
    const int64_t hd = 8, width = 16, n_past = 20, n_keep = 2, n_discard = 5;
    const std::vector<float> factors = {1.0f, 1.6f, 4.0f, 9.5f};
    KvCache kv(pages, 1, width, 32, DWELL_F32);
    kv.prepare_write(0, n_past);
    std::vector<float> x(static_cast<size_t>(width));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.3f + 1.1f * float(i));
    for (int64_t p = 0; p < n_past; ++p) {
        const auto k = rotated(x, hd, 10000.0, p, factors);
        std::copy(k.begin(), k.end(), reinterpret_cast<float*>(kv.row(0, 0, p)));
    }
    KeyRope rope{DWELL_ROPE_NEOX, static_cast<int32_t>(hd), hd, 10000.0f, 1.0f};
    KeyRope unknown = rope;
    unknown.factors_unknown = true;
    const std::vector<float> before(reinterpret_cast<const float*>(kv.row(0, 0, n_keep)),
                                    reinterpret_cast<const float*>(kv.row(0, 0, n_keep)) + width);
    EXPECT_THROW(
        shift_context(kv, std::vector<std::optional<KeyRope>>{unknown}, n_keep, n_discard, n_past),
        Error);
    EXPECT_EQ(0, std::memcmp(before.data(), kv.row(0, 0, n_keep), sizeof(float) * width))
        << "a refused shift moved rows";
    rope.freq_factors = factors;
    shift_context(kv, std::vector<std::optional<KeyRope>>{rope}, n_keep, n_discard, n_past);
    for (int64_t p = n_keep; p < n_past - n_discard; ++p) {
        const auto want = rotated(x, hd, 10000.0, p, factors);
        const auto* got = reinterpret_cast<const float*>(kv.row(0, 0, p));
        for (int64_t i = 0; i < width; ++i)
            ASSERT_NEAR(got[i], want[static_cast<size_t>(i)], 1e-5)
                << "position " << p << " value " << i;
    }
}

}  // namespace
}  // namespace dwell
