// MATMUL for every weight dtype against a double-precision reference built
// from an independent decoder; thread counts must not change any bit. The
// kernel rounds activations to the weight dtype's activation format first
// (as llama.cpp does), so the tolerance adds the error that rounding can
// cause (activation_error.hpp) to the f32 accumulation allowance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "activation_error.hpp"
#include "cpu_test_graph.hpp"

namespace dwell::cpu {
namespace {

using test::TestGraph;

struct MatmulCase {
    dwell_dtype dtype;
    int64_t k;
    int64_t m;
};

class MatmulTest : public ::testing::TestWithParam<MatmulCase> {};

// Builds W [K, 37], x [K, M] (x rows padded when pad_x) and one MATMUL.
struct MatmulGraph {
    TestGraph g;
    int w, x, out;
    std::vector<uint8_t> w_bytes;
    std::vector<float> xs;

    MatmulGraph(dwell_dtype t, int64_t k, int64_t n, int64_t m, bool pad_x, uint32_t seed) {
        w = g.tensor(t, {k, n});
        x = g.tensor(DWELL_F32, {k, m}, pad_x ? 12 : 0);
        out = g.tensor(DWELL_F32, {n, m});
        w_bytes = test::random_weight_rows(t, k, n, seed);
        g.set_raw_rows(w, w_bytes);
        xs = test::random_floats(static_cast<size_t>(k * m), seed + 1);
        g.set(x, xs);
        g.node(DWELL_OP_MATMUL, out, {w, x});
    }
};

TEST_P(MatmulTest, MatchesDoubleReferenceAndIsThreadCountInvariant) {
    const auto [dtype, k, m] = GetParam();
    const int64_t n = 37;
    MatmulGraph mg(dtype, k, n, m, /*pad_x=*/m > 1, static_cast<uint32_t>(k * 10 + m));
    ASSERT_FALSE(mg.g.check(0)) << mg.g.check(0)->message;

    const auto problem = mg.g.run(1);
    ASSERT_FALSE(problem) << problem->message;
    const auto single = mg.g.f32(mg.out);

    const size_t row_bytes = dwell_row_bytes(dtype, k);
    for (int64_t r = 0; r < n; ++r) {
        const auto wr = test::ref_decode_row(dtype, mg.w_bytes.data() + r * row_bytes, k);
        for (int64_t c = 0; c < m; ++c) {
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < k; ++i) {
                const double p = wr[static_cast<size_t>(i)] * mg.xs[static_cast<size_t>(c * k + i)];
                ref += p;
                mag += std::fabs(p);
            }
            const double act = test::activation_error_bound(
                dtype, mg.w_bytes.data() + r * row_bytes, wr, mg.xs.data() + c * k, k);
            EXPECT_NEAR(single[static_cast<size_t>(c * n + r)], ref, act + 2e-5 * mag + 1e-7)
                << "n=" << r << " m=" << c;
        }
    }

    std::fill_n(static_cast<float*>(mg.g.t(mg.out).data), n * m, -1.0f);
    const auto problem3 = mg.g.run(3);
    ASSERT_FALSE(problem3) << problem3->message;
    const auto threaded = mg.g.f32(mg.out);
    EXPECT_EQ(0, memcmp(single.data(), threaded.data(), single.size() * sizeof(float)));
}

// The row formats take any K: one partial group (64, 96), a full group plus
// a partial one of 44 (172, stories260K's FFN width) and two full ones.
INSTANTIATE_TEST_SUITE_P(
    AllWeightDtypes, MatmulTest,
    ::testing::ValuesIn(std::vector<MatmulCase>{
        {DWELL_F32, 96, 1},   {DWELL_F32, 160, 5},  {DWELL_F32, 64, 5},   {DWELL_F16, 96, 1},
        {DWELL_F16, 160, 5},  {DWELL_F16, 64, 1},   {DWELL_BF16, 96, 5},  {DWELL_BF16, 160, 1},
        {DWELL_BF16, 64, 5},  {DWELL_Q8_0, 96, 1},  {DWELL_Q8_0, 160, 5}, {DWELL_Q8_0, 64, 5},
        {DWELL_Q4_0, 96, 5},  {DWELL_Q4_0, 160, 1}, {DWELL_Q4_0, 64, 1},  {DWELL_Q4_1, 96, 1},
        {DWELL_Q4_1, 160, 5}, {DWELL_Q5_0, 96, 5},  {DWELL_Q5_0, 64, 1},  {DWELL_Q5_1, 160, 1},
        {DWELL_Q5_1, 64, 5},  {DWELL_Q4_K, 256, 1}, {DWELL_Q4_K, 512, 5}, {DWELL_Q5_K, 256, 5},
        {DWELL_Q5_K, 512, 1}, {DWELL_Q6_K, 256, 1}, {DWELL_Q6_K, 512, 5}, {DWELL_I4_G, 64, 1},
        {DWELL_I4_G, 96, 5},  {DWELL_I4_G, 172, 5}, {DWELL_I4_G, 256, 1}, {DWELL_I6_G, 64, 5},
        {DWELL_I6_G, 96, 1},  {DWELL_I6_G, 172, 1}, {DWELL_I6_G, 256, 5}, {DWELL_I8_C, 64, 1},
        {DWELL_I8_C, 96, 5},  {DWELL_I8_C, 172, 5}}),
    [](const auto& info) {
        return std::string(dwell_dtype_name(info.param.dtype)) + "_K" +
               std::to_string(info.param.k) + "_M" + std::to_string(info.param.m);
    });

TEST(Matmul, HandComputedF32) {
    TestGraph g;
    const int w = g.tensor(DWELL_F32, {3, 2});
    const int x = g.tensor(DWELL_F32, {3, 2});
    const int out = g.tensor(DWELL_F32, {2, 2});
    g.set<float>(w, {1, 2, 3, 4, 5, 6});
    g.set<float>(x, {1, 0, -1, 2, 1, 0});
    g.node(DWELL_OP_MATMUL, out, {w, x});
    ASSERT_FALSE(g.run());
    // out[m][n] = W[n] . x[m]
    EXPECT_EQ(g.f32(out), (std::vector<float>{-2, -2, 4, 13}));
}

TEST(Matmul, BatchDimsOfXCarryToTheOutput) {
    TestGraph g;
    const int w = g.tensor(DWELL_F32, {2, 2});
    const int x = g.tensor(DWELL_F32, {2, 1, 3});
    const int out = g.tensor(DWELL_F32, {2, 1, 3});
    g.set<float>(w, {1, 0, 0, 2});
    g.set<float>(x, {1, 2, 3, 4, 5, 6});
    g.node(DWELL_OP_MATMUL, out, {w, x});
    ASSERT_FALSE(g.run());
    EXPECT_EQ(g.f32(out), (std::vector<float>{1, 4, 3, 8, 5, 12}));
}

TEST(Matmul, RejectsWhatItCannotRun) {
    TestGraph g;
    const int w = g.tensor(DWELL_Q4_0, {64, 4});
    const int x16 = g.tensor(DWELL_F16, {64, 1});
    const int x = g.tensor(DWELL_F32, {64, 1});
    const int xbad = g.tensor(DWELL_F32, {32, 1});
    const int out = g.tensor(DWELL_F32, {4, 1});
    const int out_bad = g.tensor(DWELL_F32, {5, 1});
    const int wk = g.tensor(DWELL_FP8_E4M3, {64, 4});  // no kernel reads it
    const int ok = g.node(DWELL_OP_MATMUL, out, {w, x});
    const int n_f16x = g.node(DWELL_OP_MATMUL, out, {w, x16});
    const int n_k = g.node(DWELL_OP_MATMUL, out, {w, xbad});
    const int n_out = g.node(DWELL_OP_MATMUL, out_bad, {w, x});
    const int n_qk = g.node(DWELL_OP_MATMUL, out, {wk, x});
    const int n_self = g.node(DWELL_OP_MATMUL, x, {w, x});
    EXPECT_FALSE(g.check(ok));
    EXPECT_EQ(g.check(n_f16x)->status, DWELL_ERR_UNSUPPORTED);
    EXPECT_EQ(g.check(n_k)->status, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(g.check(n_out)->status, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(g.check(n_qk));
    EXPECT_TRUE(g.check(n_self));
}

}  // namespace
}  // namespace dwell::cpu
