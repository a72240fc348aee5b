// ATTENTION with GQA over several decoding steps, F32 and F16 caches,
// against a naive double-precision reference that keeps its own copy of the
// cache; also checks that exactly the right cache rows were written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cpu_test_graph.hpp"

namespace dwell::cpu {
namespace {

using test::TestGraph;

constexpr int64_t kHd = 16, kHeads = 4, kKv = 2, kCtx = 8;

// Rounds like storing into the cache (and like llama.cpp's f16 q operand).
float to_cache(dwell_dtype t, float v) {
    return t == DWELL_F16 ? static_cast<float>(test::ref_half(dwell_fp32_to_fp16(v))) : v;
}

class AttentionTest : public ::testing::TestWithParam<dwell_dtype> {};

TEST_P(AttentionTest, GqaDecodingStepsMatchNaiveReference) {
    const dwell_dtype cache_t = GetParam();
    const float scale = 1.0f / std::sqrt(static_cast<float>(kHd));
    TestGraph g;
    const int kc = g.tensor(cache_t, {kHd * kKv, kCtx});
    const int vc = g.tensor(cache_t, {kHd * kKv, kCtx}, 8);  // padded rows
    // Sentinel in every cache byte: rows never written must keep it.
    memset(g.t(kc).data, 0x5a, g.bytes(kc));
    memset(g.t(vc).data, 0x5a, g.bytes(vc));
    const auto kc_before = g.raw_rows(kc);

    // The reference cache, as the values the kernel should have stored.
    std::vector<std::vector<double>> ref_k(kCtx), ref_v(kCtx);

    const std::vector<std::vector<int32_t>> steps = {{0, 1, 2}, {3}, {4, 5}};
    uint32_t seed = 100;
    for (const auto& positions : steps) {
        const auto t = static_cast<int64_t>(positions.size());
        const int q = g.tensor(DWELL_F32, {kHd, kHeads, t});
        const int k = g.tensor(DWELL_F32, {kHd, kKv, t});
        const int v = g.tensor(DWELL_F32, {kHd, kKv, t});
        const int pos = g.tensor(DWELL_I32, {t});
        const int out = g.tensor(DWELL_F32, {kHd, kHeads, t});
        const auto qs = test::random_floats(static_cast<size_t>(kHd * kHeads * t), seed++, -2, 2);
        const auto ks = test::random_floats(static_cast<size_t>(kHd * kKv * t), seed++, -2, 2);
        const auto vs = test::random_floats(static_cast<size_t>(kHd * kKv * t), seed++);
        g.set(q, qs);
        g.set(k, ks);
        g.set(v, vs);
        g.set(pos, positions);
        const int node = g.node(DWELL_OP_ATTENTION, out, {q, k, v, kc, vc, pos}, {}, {scale});
        const auto problem = g.run_nodes({node}, 1);
        ASSERT_FALSE(problem) << problem->message;
        const auto got = g.f32(out);

        for (int64_t tok = 0; tok < t; ++tok) {
            auto& rk = ref_k[static_cast<size_t>(positions[static_cast<size_t>(tok)])];
            auto& rv = ref_v[static_cast<size_t>(positions[static_cast<size_t>(tok)])];
            rk.assign(static_cast<size_t>(kHd * kKv), 0);
            rv.assign(static_cast<size_t>(kHd * kKv), 0);
            for (int64_t i = 0; i < kHd * kKv; ++i) {
                rk[static_cast<size_t>(i)] =
                    to_cache(cache_t, ks[static_cast<size_t>(tok * kHd * kKv + i)]);
                rv[static_cast<size_t>(i)] =
                    to_cache(cache_t, vs[static_cast<size_t>(tok * kHd * kKv + i)]);
            }
        }
        for (int64_t tok = 0; tok < t; ++tok) {
            const int32_t p = positions[static_cast<size_t>(tok)];
            for (int64_t h = 0; h < kHeads; ++h) {
                const int64_t kvh = h / (kHeads / kKv);
                std::vector<double> s(static_cast<size_t>(p + 1));
                double max = -INFINITY;
                for (int32_t j = 0; j <= p; ++j) {
                    double dot = 0;
                    for (int64_t d = 0; d < kHd; ++d) {
                        const double qd = to_cache(
                            cache_t, qs[static_cast<size_t>((tok * kHeads + h) * kHd + d)]);
                        dot +=
                            qd * ref_k[static_cast<size_t>(j)][static_cast<size_t>(kvh * kHd + d)];
                    }
                    s[static_cast<size_t>(j)] = scale * dot;
                    max = std::max(max, s[static_cast<size_t>(j)]);
                }
                double sum = 0;
                for (double& e : s) sum += (e = std::exp(e - max));
                for (int64_t d = 0; d < kHd; ++d) {
                    double o = 0;
                    for (int32_t j = 0; j <= p; ++j) {
                        // The weights meet an F16 value cache as fp16, as in ggml.
                        const double w =
                            to_cache(cache_t, static_cast<float>(s[static_cast<size_t>(j)] / sum));
                        o += w * ref_v[static_cast<size_t>(j)][static_cast<size_t>(kvh * kHd + d)];
                    }
                    EXPECT_NEAR(got[static_cast<size_t>((tok * kHeads + h) * kHd + d)], o, 2e-5)
                        << "pos " << p << " head " << h << " dim " << d;
                }
            }
        }

        // Re-running with 3 threads rewrites the same cache rows and must
        // give bit-identical output.
        const auto problem3 = g.run_nodes({node}, 3);
        ASSERT_FALSE(problem3) << problem3->message;
        EXPECT_EQ(0, memcmp(got.data(), g.f32(out).data(), got.size() * sizeof(float)));
    }

    // Written rows hold the stored k/v; rows 6 and 7 still hold the sentinel.
    const size_t rb = dwell_row_bytes(cache_t, kHd * kKv);
    const auto kc_after = g.raw_rows(kc);
    const auto vc_after = g.raw_rows(vc);
    for (int64_t r = 0; r < kCtx; ++r) {
        const auto kd = test::ref_decode_row(cache_t, kc_after.data() + r * rb, kHd * kKv);
        const auto vd = test::ref_decode_row(cache_t, vc_after.data() + r * rb, kHd * kKv);
        if (r < 6) {
            EXPECT_EQ(kd, ref_k[static_cast<size_t>(r)]) << "k row " << r;
            EXPECT_EQ(vd, ref_v[static_cast<size_t>(r)]) << "v row " << r;
        } else {
            EXPECT_EQ(0, memcmp(kc_after.data() + r * rb, kc_before.data() + r * rb, rb)) << r;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(CacheDtypes, AttentionTest, ::testing::Values(DWELL_F32, DWELL_F16),
                         [](const auto& info) {
                             return std::string(dwell_dtype_name(info.param));
                         });

TEST(Attention, SingleKeyReturnsItsValue) {
    // With one cached row the softmax weight is 1: out = v for every head.
    TestGraph g;
    const int q = g.tensor(DWELL_F32, {2, 2, 1});
    const int k = g.tensor(DWELL_F32, {2, 1, 1});
    const int v = g.tensor(DWELL_F32, {2, 1, 1});
    const int kc = g.tensor(DWELL_F32, {2, 4});
    const int vc = g.tensor(DWELL_F32, {2, 4});
    const int pos = g.tensor(DWELL_I32, {1});
    const int out = g.tensor(DWELL_F32, {2, 2, 1});
    g.set<float>(q, {1, 2, 3, 4});
    g.set<float>(k, {5, 6});
    g.set<float>(v, {7, -8});
    g.set<int32_t>(pos, {0});
    g.node(DWELL_OP_ATTENTION, out, {q, k, v, kc, vc, pos}, {}, {0.5f});
    ASSERT_FALSE(g.run());
    EXPECT_EQ(g.f32(out), (std::vector<float>{7, -8, 7, -8}));
    EXPECT_EQ(g.f32(kc)[0], 5.0f);
    EXPECT_EQ(g.f32(vc)[1], -8.0f);
}

TEST(Attention, TwoKeysHandComputed) {
    // q = [1, 0], keys [0, 0] then [ln 3, 0], scale 1: weights 1/4 and 3/4.
    TestGraph g;
    const int q = g.tensor(DWELL_F32, {2, 1, 2});
    const int k = g.tensor(DWELL_F32, {2, 1, 2});
    const int v = g.tensor(DWELL_F32, {2, 1, 2});
    const int kc = g.tensor(DWELL_F32, {2, 2});
    const int vc = g.tensor(DWELL_F32, {2, 2});
    const int pos = g.tensor(DWELL_I32, {2});
    const int out = g.tensor(DWELL_F32, {2, 1, 2});
    g.set<float>(q, {1, 0, 1, 0});
    g.set<float>(k, {0, 0, std::log(3.0f), 0});
    g.set<float>(v, {4, 0, 0, 8});
    g.set<int32_t>(pos, {0, 1});
    g.node(DWELL_OP_ATTENTION, out, {q, k, v, kc, vc, pos}, {}, {1.0f});
    ASSERT_FALSE(g.run());
    const auto r = g.f32(out);
    EXPECT_NEAR(r[0], 4, 1e-6);  // token 0 sees only row 0
    EXPECT_NEAR(r[1], 0, 1e-6);
    EXPECT_NEAR(r[2], 1, 1e-6);  // 1/4 * 4
    EXPECT_NEAR(r[3], 6, 1e-6);  // 3/4 * 8
}

TEST(Attention, PositionOutsideTheCacheIsAnError) {
    TestGraph g;
    const int q = g.tensor(DWELL_F32, {2, 1, 1});
    const int k = g.tensor(DWELL_F32, {2, 1, 1});
    const int v = g.tensor(DWELL_F32, {2, 1, 1});
    const int kc = g.tensor(DWELL_F16, {2, 4});
    const int vc = g.tensor(DWELL_F16, {2, 4});
    const int pos = g.tensor(DWELL_I32, {1});
    const int out = g.tensor(DWELL_F32, {2, 1, 1});
    g.set<int32_t>(pos, {4});
    g.node(DWELL_OP_ATTENTION, out, {q, k, v, kc, vc, pos}, {}, {1.0f});
    const auto p = g.run();
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(p->message.find("node 0 (attention)"), std::string::npos) << p->message;
    EXPECT_NE(p->message.find("position 4"), std::string::npos) << p->message;
}

TEST(Attention, RejectsBadShapesAndCacheTypes) {
    TestGraph g;
    const int q = g.tensor(DWELL_F32, {4, 3, 1});
    const int q2 = g.tensor(DWELL_F32, {4, 2, 1});
    const int k = g.tensor(DWELL_F32, {4, 2, 1});
    const int v = g.tensor(DWELL_F32, {4, 2, 1});
    const int kc = g.tensor(DWELL_F32, {8, 4});
    const int vc = g.tensor(DWELL_F32, {8, 4});
    const int kbf = g.tensor(DWELL_BF16, {8, 4});
    const int vbf = g.tensor(DWELL_BF16, {8, 4});
    const int pos = g.tensor(DWELL_I32, {1});
    const int out3 = g.tensor(DWELL_F32, {4, 3, 1});
    const int out2 = g.tensor(DWELL_F32, {4, 2, 1});
    const int gqa_bad = g.node(DWELL_OP_ATTENTION, out3, {q, k, v, kc, vc, pos}, {}, {1.0f});
    const int bf16 = g.node(DWELL_OP_ATTENTION, out2, {q2, k, v, kbf, vbf, pos}, {}, {1.0f});
    const int same_cache = g.node(DWELL_OP_ATTENTION, out2, {q2, k, v, kc, kc, pos}, {}, {1.0f});
    const int ok = g.node(DWELL_OP_ATTENTION, out2, {q2, k, v, kc, vc, pos}, {}, {1.0f});
    EXPECT_EQ(g.check(gqa_bad)->status, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(g.check(bf16)->status, DWELL_ERR_UNSUPPORTED);
    EXPECT_TRUE(g.check(same_cache));
    EXPECT_FALSE(g.check(ok));
}

}  // namespace
}  // namespace dwell::cpu
