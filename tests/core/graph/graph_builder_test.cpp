#include "dwell/core/graph/graph_builder.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "dwell/core/base/error.hpp"
#include "dwell/core/graph/activation_plan.hpp"

namespace dwell {
namespace {

// A weight table with a few shapes, all F32 unless named q4.
class GraphBuilderTest : public ::testing::Test {
protected:
    GraphBuilderTest()
        : builder_(
              graph_, [this](std::string_view n) { return lookup(n); },
              [this](int32_t layer, int32_t which) {
                  return layer == 0 ? &cache_[which] : nullptr;
              }) {
        const int64_t w[2] = {64, 32}, q4[2] = {64, 32}, norm[1] = {64}, cache[2] = {16, 16};
        weights_.emplace("w", make_tensor(DWELL_F32, 2, w));
        weights_.emplace("q4", make_tensor(DWELL_Q4_0, 2, q4));
        weights_.emplace("norm", make_tensor(DWELL_F32, 1, norm));
        cache_[0] = make_tensor(DWELL_F16, 2, cache);
        cache_[1] = cache_[0];
        cache_[0].data = cache_bytes_[0].data();
        cache_[1].data = cache_bytes_[1].data();
    }
    const dwell_tensor* lookup(std::string_view n) {
        auto it = weights_.find(std::string(n));
        return it == weights_.end() ? nullptr : &it->second;
    }
    int32_t x(int64_t rows) {
        const int64_t ne[2] = {64, rows};
        return builder_.input(std::string("x").append(std::to_string(rows)), DWELL_F32, ne);
    }
    Graph graph_;
    std::map<std::string, dwell_tensor> weights_;
    dwell_tensor cache_[2];
    std::vector<uint8_t> cache_bytes_[2] = {std::vector<uint8_t>(16 * 16 * 2),
                                            std::vector<uint8_t>(16 * 16 * 2)};
    GraphBuilder builder_;
};

TEST_F(GraphBuilderTest, InfersMatmulShapeForQuantizedWeights) {
    const int32_t in = x(5);
    const int32_t w = builder_.weight("q4");
    const int32_t y = builder_.op(DWELL_OP_MATMUL, std::vector<int32_t>{w, in});
    const dwell_tensor& t = graph_.slots[y].tensor;
    EXPECT_EQ(t.dtype, DWELL_F32);
    EXPECT_EQ(t.ne[0], 32);
    EXPECT_EQ(t.ne[1], 5);
    EXPECT_EQ(t.nb[1], 32 * sizeof(float));
    EXPECT_EQ(graph_.nodes.size(), 1u);
    EXPECT_EQ(builder_.weight("q4"), w);  // bound once
    EXPECT_EQ(builder_.weight("absent"), -1);
}

TEST_F(GraphBuilderTest, RejectsMismatchedShapesWithTheOpNamed) {
    const int32_t in = x(3);
    const int64_t other[2] = {10, 3};
    const int32_t bad = builder_.input("bad", DWELL_F32, other);
    try {
        builder_.op(DWELL_OP_MATMUL, std::vector<int32_t>{builder_.weight("w"), bad});
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("matmul: inner dimensions differ"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(builder_.op(DWELL_OP_ADD, std::vector<int32_t>{in, bad}), Error);
    EXPECT_THROW(builder_.op(DWELL_OP_ADD, std::vector<int32_t>{in, 999}), Error);
    EXPECT_THROW(builder_.op(DWELL_OP_RMS_NORM, std::vector<int32_t>{in, in}), Error);
    EXPECT_TRUE(graph_.nodes.empty());
}

TEST_F(GraphBuilderTest, BroadcastsAVectorOverRows) {
    const int32_t in = x(4);
    const int32_t y = builder_.op(DWELL_OP_MUL, std::vector<int32_t>{in, builder_.weight("norm")});
    EXPECT_EQ(graph_.slots[y].tensor.ne[1], 4);
}

TEST_F(GraphBuilderTest, ReshapeIsAViewOfTheSameStorage) {
    const int32_t in = x(4);
    const int32_t y = builder_.op(DWELL_OP_SILU, std::vector<int32_t>{in});
    const int64_t ne[3] = {16, 4, 4};
    const int32_t v = builder_.reshape(y, ne);
    EXPECT_EQ(graph_.slots[v].role, TensorRole::View);
    EXPECT_EQ(graph_.storage_of(v), y);
    const int64_t wrong[2] = {10, 10};
    EXPECT_THROW(builder_.reshape(y, wrong), Error);
    // Negative dimensions, or ones whose product wraps to the right count.
    const int64_t negative[3] = {64, -1, -4};
    EXPECT_THROW(builder_.reshape(y, negative), Error);
    const int64_t wraps[2] = {256, (int64_t{1} << 58) + 1};
    EXPECT_THROW(builder_.reshape(y, wraps), Error);
}

TEST_F(GraphBuilderTest, CBuilderReportsErrorsInsteadOfThrowing) {
    const dwell_graph_builder* c = builder_.c_builder();
    const int32_t inputs[2] = {12345, 0};
    EXPECT_EQ(c->op(c->self, DWELL_OP_ADD, inputs, 2, nullptr, 0, nullptr, 0), -1);
    EXPECT_NE(std::string(c->last_error(c->self)).find("no tensor with id 12345"),
              std::string::npos);
    EXPECT_EQ(c->op(c->self, DWELL_OP_ADD, inputs, 9, nullptr, 0, nullptr, 0), -1);
    EXPECT_EQ(c->kv_cache(c->self, 3, 0), -1);
    EXPECT_GE(c->kv_cache(c->self, 0, 1), 0);
}

TEST_F(GraphBuilderTest, AttentionChecksGqaAndCacheWidth) {
    const int64_t q[3] = {8, 4, 2}, kv[3] = {8, 2, 2}, pos[1] = {2}, kv_wrong[3] = {8, 3, 2};
    const int32_t qi = builder_.input("q", DWELL_F32, q);
    const int32_t ki = builder_.input("k", DWELL_F32, kv);
    const int32_t vi = builder_.input("v", DWELL_F32, kv);
    const int32_t kw = builder_.input("kw", DWELL_F32, kv_wrong);
    const int32_t pi = builder_.input("pos", DWELL_I32, pos);
    const int32_t kc = builder_.kv_cache(0, 0), vc = builder_.kv_cache(0, 1);
    const int32_t out =
        builder_.op(DWELL_OP_ATTENTION, std::vector<int32_t>{qi, ki, vi, kc, vc, pi});
    EXPECT_EQ(graph_.slots[out].tensor.ne[1], 4);
    const auto refusal = [&](std::vector<int32_t> inputs) -> std::string {
        try {
            builder_.op(DWELL_OP_ATTENTION, inputs);
        } catch (const Error& e) {
            return e.what();
        }
        return "accepted";
    };
    // 4 heads over 3 kv heads is not a GQA grouping.
    EXPECT_EQ(refusal({qi, kw, kw, kc, vc, pi}),
              "graph: attention: q [8, 4, 2] f32, k [8, 3, 2] f32, v [8, 3, 2] f32 are not "
              "[hd, n_head, T], [hd, n_kv, T] with n_head a multiple of n_kv");
    // Heads of 4 over 2 kv heads make rows of 8; the caches hold rows of 16.
    const int64_t q4[3] = {4, 4, 2}, kv4[3] = {4, 2, 2};
    const int32_t q4i = builder_.input("q4", DWELL_F32, q4);
    const int32_t k4i = builder_.input("k4", DWELL_F32, kv4);
    EXPECT_EQ(refusal({q4i, k4i, k4i, kc, vc, pi}),
              "graph: attention: caches [16, 16] f16 / [16, 16] f16 do not hold rows of 8");
}

// ABI 1.5: ATTENTION's window (iparams[0]) and soft-cap (fparams[1]) are
// >= 0 and finite, SOFTCAP's cap (fparams[0]) > 0: anything else would turn
// into NaN logits or hide every row, so the builder refuses it.
TEST_F(GraphBuilderTest, WindowAndSoftCapParametersAreChecked) {
    const int64_t q[3] = {8, 4, 2}, kv[3] = {8, 2, 2}, pos[1] = {2};
    const int32_t qi = builder_.input("q", DWELL_F32, q);
    const int32_t ki = builder_.input("k", DWELL_F32, kv);
    const int32_t vi = builder_.input("v", DWELL_F32, kv);
    const int32_t pi = builder_.input("pos", DWELL_I32, pos);
    const int32_t kc = builder_.kv_cache(0, 0), vc = builder_.kv_cache(0, 1);
    const std::vector<int32_t> in{qi, ki, vi, kc, vc, pi};
    const auto attention = [&](int32_t window, float cap) {
        const int32_t ip[1] = {window};
        const float fp[2] = {0.5f, cap};
        return builder_.op(DWELL_OP_ATTENTION, in, ip, fp);
    };
    EXPECT_GE(attention(4, 50.0f), 0);
    EXPECT_GE(attention(0, 0.0f), 0);
    EXPECT_THROW(attention(-1, 0.0f), Error);
    EXPECT_THROW(attention(4, -1.0f), Error);
    EXPECT_THROW(attention(4, std::nanf("")), Error);
    const int32_t logits = x(8);
    const float good[1] = {30.0f}, zero[1] = {0.0f};
    EXPECT_GE(builder_.op(DWELL_OP_SOFTCAP, std::vector<int32_t>{logits}, {}, good), 0);
    EXPECT_THROW(builder_.op(DWELL_OP_SOFTCAP, std::vector<int32_t>{logits}, {}, zero), Error);
    EXPECT_THROW(builder_.op(DWELL_OP_SOFTCAP, std::vector<int32_t>{logits}), Error);
}

TEST_F(GraphBuilderTest, ActivationPlanReusesMemoryOfDeadTensors) {
    // A chain x -> a -> b -> c -> d: at most two results are live at once.
    int32_t t = x(8);
    for (int i = 0; i < 4; ++i) t = builder_.op(DWELL_OP_SILU, std::vector<int32_t>{t});
    builder_.set_output(t);
    const ActivationPlan plan = plan_activations(graph_);
    const uint64_t one = 64 * 8 * sizeof(float);
    EXPECT_EQ(plan.arena_bytes, 2 * one);
    // Neighbours in the chain never share memory.
    for (size_t i = 0; i + 1 < graph_.nodes.size(); ++i) {
        EXPECT_NE(plan.offset[graph_.nodes[i].output], plan.offset[graph_.nodes[i + 1].output]);
    }
    EXPECT_EQ(plan.offset[graph_.find_input("x8")], ActivationPlan::kNone);
}

TEST_F(GraphBuilderTest, ActivationPlanKeepsTensorsAliveThroughTheirViews) {
    const int32_t in = x(4);
    const int32_t a = builder_.op(DWELL_OP_SILU, std::vector<int32_t>{in});
    const int64_t ne[3] = {16, 4, 4};
    const int32_t view = builder_.reshape(a, ne);
    const int32_t b =
        builder_.op(DWELL_OP_GELU, std::vector<int32_t>{in});  // a still live via its view
    const int32_t c =
        builder_.op(DWELL_OP_SCALE, std::vector<int32_t>{view}, {}, std::vector<float>{2.0f});
    const int64_t flat[2] = {64, 4};
    builder_.set_output(builder_.reshape(c, flat));
    const ActivationPlan plan = plan_activations(graph_);
    EXPECT_NE(plan.offset[a], plan.offset[b]);
    (void)c;
}

}  // namespace
}  // namespace dwell
