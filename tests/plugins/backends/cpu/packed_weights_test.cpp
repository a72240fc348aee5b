// The repacked-weight cache: reused for the same leaf weight, packed afresh
// when the bytes at an address change, never kept for a weight some node
// writes (an attention's KV cache included), and dropped when the host
// releases the weights.
#include "ops/packed_weights.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu_test_graph.hpp"
#include "simd/gemm_kernel.hpp"

namespace dwell::cpu {
namespace {

using test::random_floats;
using test::random_weight_rows;
using test::tensor_2d;
using test::TestGraph;

TEST(PackedWeights, ReusedRepackedOnChangeAndReleased) {
    ThreadPool pool(2);
    const GemmKernel& kernel = *gemm_kernel(DWELL_Q4_0);
    std::vector<uint8_t> a = random_weight_rows(DWELL_Q4_0, 64, 40, 1);
    std::vector<uint8_t> b = random_weight_rows(DWELL_Q4_0, 64, 40, 2);
    const dwell_tensor wa = tensor_2d(DWELL_Q4_0, a.data(), 64, 40);
    const dwell_tensor wb = tensor_2d(DWELL_Q4_0, b.data(), 64, 40);
    PackedWeights cache;
    const unsigned char* pa = cache.get(kernel, wa, pool);
    EXPECT_EQ(cache.get(kernel, wa, pool), pa);  // the same copy
    const size_t one = cache.bytes();
    EXPECT_GT(one, 0u);
    cache.get(kernel, wb, pool);
    EXPECT_EQ(cache.bytes(), 2 * one);

    // New bytes at the same address: packed afresh, with the new contents.
    const std::vector<uint8_t> old_packed(pa, pa + one);
    a = b;
    const unsigned char* pa2 = cache.get(kernel, wa, pool);
    const std::vector<uint8_t> new_packed(pa2, pa2 + one);
    EXPECT_NE(new_packed, old_packed);

    cache.release(a.data(), a.size());
    EXPECT_EQ(cache.bytes(), one);  // b's copy stays
    cache.release(b.data(), b.size());
    EXPECT_EQ(cache.bytes(), 0u);
}

// MATMUL(CPY(w_f32 -> Q8_0), x): the weight is rewritten by a node on every
// run, so a cached packing would go stale; results must follow the new w.
TEST(PackedWeights, WeightsWrittenByTheGraphAreNotCached) {
    TestGraph g;
    const int wf = g.tensor(DWELL_F32, {64, 8});
    const int wq = g.tensor(DWELL_Q8_0, {64, 8});
    const int x = g.tensor(DWELL_F32, {64, 2});
    const int out = g.tensor(DWELL_F32, {8, 2});
    g.node(DWELL_OP_CPY, wq, {wf}, {DWELL_Q8_0});
    g.node(DWELL_OP_MATMUL, out, {wq, x});
    g.set(x, random_floats(64 * 2, 7));
    ThreadPool pool(2);
    PackedWeights cache;
    for (int round = 0; round < 3; ++round) {
        const std::vector<float> w = random_floats(64 * 8, 10 + static_cast<uint32_t>(round));
        g.set(wf, w);
        ASSERT_FALSE(g.run(pool, &cache));
        const std::vector<float> got = g.f32(out);
        const std::vector<float> xs = g.f32(x);
        for (int m = 0; m < 2; ++m) {
            for (int n = 0; n < 8; ++n) {
                double want = 0, scale = 0;
                for (int i = 0; i < 64; ++i) {
                    want += double(w[size_t(n * 64 + i)]) * xs[size_t(m * 64 + i)];
                    scale += std::fabs(double(w[size_t(n * 64 + i)]) * xs[size_t(m * 64 + i)]);
                }
                // Q8_0 weights and activations: well within 2 % of sum |w x|.
                EXPECT_NEAR(got[size_t(m * 8 + n)], want, 0.02 * scale) << round;
            }
        }
    }
    EXPECT_EQ(cache.bytes(), 0u);
}

// ATTENTION writes its cache inputs as well as its output (graph.h): a
// matmul reading a KV cache must see each run's new rows, not a packed copy.
TEST(PackedWeights, CachesWrittenByAttentionAreNotCached) {
    if (gemm_kernel(DWELL_Q8_0) == nullptr) GTEST_SKIP() << "no blocked Q8_0 kernel";
    TestGraph g;
    const int q = g.tensor(DWELL_F32, {32, 1, 1});
    const int k = g.tensor(DWELL_F32, {32, 1, 1});
    const int kc = g.tensor(DWELL_Q8_0, {32, 8});
    const int vc = g.tensor(DWELL_Q8_0, {32, 8});
    const int pos = g.tensor(DWELL_I32, {1});
    const int att = g.tensor(DWELL_F32, {32, 1, 1});
    const int x = g.tensor(DWELL_F32, {32, 2});
    const int out = g.tensor(DWELL_F32, {8, 2});
    g.node(DWELL_OP_ATTENTION, att, {q, k, k, kc, vc, pos}, {}, {1.0f});
    g.node(DWELL_OP_MATMUL, out, {kc, x});
    g.set(x, random_floats(32 * 2, 7));
    ThreadPool pool(2);
    PackedWeights cache;
    for (int32_t round = 0; round < 3; ++round) {
        g.set(k, random_floats(32, 20 + static_cast<uint32_t>(round)));
        g.set<int32_t>(pos, {round});
        ASSERT_FALSE(g.run(pool, &cache));
        const std::vector<float> got = g.f32(out);
        const std::vector<float> xs = g.f32(x);
        const std::vector<uint8_t> rows = g.raw_rows(kc);
        for (int n = 0; n <= round; ++n) {
            const auto w = test::ref_decode_row(DWELL_Q8_0, rows.data() + 34 * n, 32);
            for (int m = 0; m < 2; ++m) {
                double want = 0, scale = 0;
                for (int i = 0; i < 32; ++i) {
                    want += w[size_t(i)] * xs[size_t(m * 32 + i)];
                    scale += std::fabs(w[size_t(i)] * xs[size_t(m * 32 + i)]);
                }
                EXPECT_NEAR(got[size_t(m * 8 + n)], want, 0.02 * scale) << round;
            }
        }
    }
    EXPECT_EQ(cache.bytes(), 0u);
}

}  // namespace
}  // namespace dwell::cpu
