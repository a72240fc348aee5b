// TOPK, GATHER, EXPERT_MATMUL and MOE_COMBINE against hand-computed cases
// and double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "activation_error.hpp"
#include "cpu_test_graph.hpp"

namespace dwell::cpu {
namespace {

using test::TestGraph;

TEST(TopK, LargestFirstTiesToLowerIndex) {
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {6, 2});
    const int idx = g.tensor(DWELL_I32, {3, 2});
    g.set<float>(x, {0.5f, 3, 1, 3, -2, 1, /* row 1 */ 2, 2, 2, 2, 2, 9});
    g.node(DWELL_OP_TOPK, idx, {x}, {3});
    ASSERT_FALSE(g.run(2));
    EXPECT_EQ(g.i32(idx), (std::vector<int32_t>{1, 3, 2, /* row 1 */ 5, 0, 1}));
}

TEST(TopK, NanRanksLastAndKIsValidated) {
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {4});
    const int idx = g.tensor(DWELL_I32, {4});
    g.set<float>(x, {NAN, 1, NAN, -1});
    g.node(DWELL_OP_TOPK, idx, {x}, {4});
    ASSERT_FALSE(g.run());
    EXPECT_EQ(g.i32(idx), (std::vector<int32_t>{1, 3, 0, 2}));
    const int bad = g.node(DWELL_OP_TOPK, idx, {x}, {5});
    EXPECT_TRUE(g.check(bad));
}

TEST(Gather, PicksPerRowAndChecksIds) {
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {4, 2});
    const int ids = g.tensor(DWELL_I32, {2, 2});
    const int out = g.tensor(DWELL_F32, {2, 2});
    g.set<float>(x, {10, 11, 12, 13, 20, 21, 22, 23});
    g.set<int32_t>(ids, {3, 0, 1, 1});
    g.node(DWELL_OP_GATHER, out, {x, ids});
    ASSERT_FALSE(g.run());
    EXPECT_EQ(g.f32(out), (std::vector<float>{13, 10, 21, 21}));
    g.set<int32_t>(ids, {4, 0, 1, 1});
    const auto p = g.run();
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(p->message.find("node 0 (gather)"), std::string::npos) << p->message;
}

TEST(MoeCombine, WeightedSumPerToken) {
    TestGraph g;
    const int y = g.tensor(DWELL_F32, {2, 2, 2});  // [N, k, T]
    const int w = g.tensor(DWELL_F32, {2, 2});     // [k, T]
    const int out = g.tensor(DWELL_F32, {2, 2});
    g.set<float>(y, {1, 2, 3, 4, /* t1 */ 5, 6, 7, 8});
    g.set<float>(w, {0.5f, 2, /* t1 */ 1, -1});
    g.node(DWELL_OP_MOE_COMBINE, out, {y, w});
    ASSERT_FALSE(g.run());
    EXPECT_EQ(g.f32(out), (std::vector<float>{6.5f, 9, -2, -2}));
}

// EXPERT_MATMUL with x shared per token ([K, T]) or per slot ([K, k, T]).
void expert_matmul_case(dwell_dtype dtype, bool per_slot) {
    const int64_t kdim = dwell_dtype_block_elems(dtype) == DWELL_QK_K ? 256 : 64, n = 5,
                  experts = 4, k = 2, t = 3;
    TestGraph g;
    const int w = g.tensor(dtype, {kdim, n, experts});
    const int x = per_slot ? g.tensor(DWELL_F32, {kdim, k, t}) : g.tensor(DWELL_F32, {kdim, t});
    const int ids = g.tensor(DWELL_I32, {k, t});
    const int out = g.tensor(DWELL_F32, {n, k, t});
    const auto wb = test::random_weight_rows(dtype, kdim, n * experts, 21);
    g.set_raw_rows(w, wb);
    const auto xs = test::random_floats(static_cast<size_t>(kdim * (per_slot ? k * t : t)), 22);
    g.set(x, xs);
    const std::vector<int32_t> id = {3, 0, 1, 1, 2, 3};
    g.set(ids, id);
    g.node(DWELL_OP_EXPERT_MATMUL, out, {w, x, ids});
    const auto problem = g.run(1);
    ASSERT_FALSE(problem) << problem->message;
    const auto got = g.f32(out);
    const size_t rb = dwell_row_bytes(dtype, kdim);
    for (int64_t tok = 0; tok < t; ++tok) {
        for (int64_t i = 0; i < k; ++i) {
            const int32_t e = id[static_cast<size_t>(tok * k + i)];
            const float* xr = xs.data() + (per_slot ? (tok * k + i) : tok) * kdim;
            for (int64_t r = 0; r < n; ++r) {
                const auto wr = test::ref_decode_row(dtype, wb.data() + (e * n + r) * rb, kdim);
                double ref = 0, mag = 0;
                for (int64_t j = 0; j < kdim; ++j) {
                    ref += wr[static_cast<size_t>(j)] * xr[j];
                    mag += std::fabs(wr[static_cast<size_t>(j)] * xr[j]);
                }
                // Activations are rounded as in MATMUL (see matmul_test.cpp).
                const double act =
                    test::activation_error_bound(dtype, wb.data() + (e * n + r) * rb, wr, xr, kdim);
                EXPECT_NEAR(got[static_cast<size_t>((tok * k + i) * n + r)], ref,
                            act + 2e-5 * mag + 1e-7)
                    << dwell_dtype_name(dtype) << " t=" << tok << " slot=" << i << " row=" << r;
            }
        }
    }
    const auto problem3 = g.run(3);
    ASSERT_FALSE(problem3);
    EXPECT_EQ(0, memcmp(got.data(), g.f32(out).data(), got.size() * sizeof(float)));
}

TEST(ExpertMatmul, PerTokenInputEveryDtype) {
    for (dwell_dtype t : test::kWeightDtypes) {
        expert_matmul_case(t, false);
    }
}

TEST(ExpertMatmul, PerSlotInput) {
    expert_matmul_case(DWELL_Q4_0, true);
    expert_matmul_case(DWELL_Q5_K, true);
    expert_matmul_case(DWELL_F32, true);
}

TEST(ExpertMatmul, ExpertIdOutOfRangeIsAnError) {
    TestGraph g;
    const int w = g.tensor(DWELL_F32, {4, 2, 2});
    const int x = g.tensor(DWELL_F32, {4, 1});
    const int ids = g.tensor(DWELL_I32, {1, 1});
    const int out = g.tensor(DWELL_F32, {2, 1, 1});
    g.set<int32_t>(ids, {2});
    g.node(DWELL_OP_EXPERT_MATMUL, out, {w, x, ids});
    const auto p = g.run();
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(p->message.find("expert id 2"), std::string::npos) << p->message;
}

}  // namespace
}  // namespace dwell::cpu
