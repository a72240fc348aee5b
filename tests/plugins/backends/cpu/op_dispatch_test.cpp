// check_node / compute_nodes on malformed graphs: every problem is reported
// as a status with a message, nothing crashes or reads out of bounds.
#include <gtest/gtest.h>

#include <cstring>

#include "cpu_test_graph.hpp"

namespace dwell::cpu {
namespace {

using test::TestGraph;

TEST(OpDispatch, GarbageGraphsAreRejectedNotCrashed) {
    EXPECT_EQ(check_node(nullptr, 0, false)->status, DWELL_ERR_INVALID_ARGUMENT);

    TestGraph g;
    const int a = g.tensor(DWELL_F32, {4});
    const int b = g.tensor(DWELL_F32, {4});
    const int n_ok = g.node(DWELL_OP_ADD, b, {a, a});
    const int n_out = g.node(DWELL_OP_ADD, 77, {a, a});
    const int n_in = g.node(DWELL_OP_ADD, b, {a, -3});
    const int n_count = g.node(DWELL_OP_ADD, b, {a});
    const int n_none = g.node(DWELL_OP_NONE, b, {});
    const int n_weird = g.node(DWELL_OP_SILU, b, {a});
    int32_t bogus_op = 999;
    memcpy(&g.node_at(n_weird).op, &bogus_op, sizeof bogus_op);
    const int n_many = g.node(DWELL_OP_SILU, b, {a});
    g.node_at(n_many).n_inputs = 100;

    EXPECT_FALSE(g.check(n_ok));
    for (int n : {n_out, n_in, n_count, n_many}) {
        const auto p = g.check(n);
        ASSERT_TRUE(p) << n;
        EXPECT_EQ(p->status, DWELL_ERR_INVALID_ARGUMENT) << n;
    }
    EXPECT_EQ(g.check(n_none)->status, DWELL_ERR_UNSUPPORTED);
    EXPECT_EQ(g.check(n_weird)->status, DWELL_ERR_UNSUPPORTED);
    EXPECT_NE(g.check(n_weird)->message.find("999"), std::string::npos);
    EXPECT_TRUE(g.check(-1));
    EXPECT_TRUE(g.check(1000));

    dwell_graph small = g.graph();
    small.struct_size = 4;
    EXPECT_TRUE(check_node(&small, n_ok, false));
    dwell_graph no_tensors = g.graph();
    no_tensors.tensors = nullptr;
    EXPECT_TRUE(check_node(&no_tensors, n_ok, false));
}

TEST(OpDispatch, GarbageTensorsAreRejected) {
    TestGraph g;
    const int a = g.tensor(DWELL_F32, {4});
    const int b = g.tensor(DWELL_F32, {4});
    const int n = g.node(DWELL_OP_SILU, b, {a});
    int32_t bogus_dtype = 12345;
    memcpy(&g.t(a).dtype, &bogus_dtype, sizeof bogus_dtype);
    EXPECT_EQ(g.check(n)->status, DWELL_ERR_UNSUPPORTED);
    g.t(a).dtype = DWELL_F32;
    EXPECT_FALSE(g.check(n));

    g.t(a).ne[1] = 0;
    EXPECT_EQ(g.check(n)->status, DWELL_ERR_INVALID_ARGUMENT);
    g.t(a).ne[1] = -5;
    EXPECT_TRUE(g.check(n));
    g.t(a).ne[1] = 1;

    g.t(a).nb[0] = 8;  // strided elements inside a row
    EXPECT_EQ(g.check(n)->status, DWELL_ERR_UNSUPPORTED);
    g.t(a).nb[0] = 4;

    const int q = g.tensor(DWELL_Q8_0, {48});  // not whole blocks
    const int qo = g.tensor(DWELL_F32, {48});
    const int nq = g.node(DWELL_OP_CPY, qo, {q});
    EXPECT_EQ(g.check(nq)->status, DWELL_ERR_INVALID_ARGUMENT);
}

TEST(OpDispatch, ComputeNeedsDataAndAlignment) {
    TestGraph g;
    const int a = g.tensor(DWELL_F32, {4});
    const int b = g.tensor(DWELL_F32, {4});
    const int n = g.node(DWELL_OP_SILU, b, {a});
    void* saved = g.t(a).data;
    g.t(a).data = nullptr;
    EXPECT_FALSE(g.check(n, /*need_data=*/false));  // placement happens before allocation
    auto p = g.run();
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(p->message.rfind("node 0 (silu): input 0", 0), 0u) << p->message;
    g.t(a).data = static_cast<char*>(saved) + 1;
    p = g.run();
    ASSERT_TRUE(p);
    EXPECT_NE(p->message.find("misaligned"), std::string::npos) << p->message;
    g.t(a).data = saved;
    EXPECT_FALSE(g.run());
}

TEST(OpDispatch, ComputeStopsAtTheFirstFailingNode) {
    TestGraph g;
    const int a = g.tensor(DWELL_F32, {2});
    const int b = g.tensor(DWELL_F32, {2});
    const int c = g.tensor(DWELL_F32, {3});
    g.set<float>(a, {1, 2});
    g.node(DWELL_OP_SCALE, b, {a}, {}, {2.0f});
    g.node(DWELL_OP_ADD, c, {a, b});  // wrong output shape
    g.node(DWELL_OP_SCALE, a, {a}, {}, {0.0f});
    const auto p = g.run();
    ASSERT_TRUE(p);
    EXPECT_EQ(p->message.rfind("node 1 (add): ", 0), 0u) << p->message;
    EXPECT_EQ(g.f32(b), (std::vector<float>{2, 4}));  // node 0 ran
    EXPECT_EQ(g.f32(a), (std::vector<float>{1, 2}));  // node 2 did not

    const dwell_graph gr = g.graph();
    ThreadPool pool(1);
    const int32_t bad_id = 9;
    const auto q = compute_nodes(&gr, &bad_id, 1, pool);
    ASSERT_TRUE(q);
    EXPECT_EQ(q->message.rfind("node 9: ", 0), 0u) << q->message;
    EXPECT_TRUE(compute_nodes(&gr, nullptr, 1, pool));
    EXPECT_FALSE(compute_nodes(&gr, nullptr, 0, pool));
}

}  // namespace
}  // namespace dwell::cpu
