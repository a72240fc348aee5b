// Activation sparsity in the graph builder (ABI 1.9): with set_sparsity, a
// projection's MATMUL reads its input through one SPARSIFY per distinct
// input (q, k and v share theirs); the token embeddings, the output head,
// routers and an input already sparse are left alone; off by default; bad
// SPARSIFY parameters are refused.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/graph/graph_builder.hpp"

namespace dwell {
namespace {

class SparsifyBuilderTest : public ::testing::Test {
protected:
    SparsifyBuilderTest()
        : builder_(
              graph_,
              [this](std::string_view n) -> const dwell_tensor* {
                  const auto it = weights_.find(std::string(n));
                  return it == weights_.end() ? nullptr : &it->second;
              },
              [](int32_t, int32_t) { return nullptr; }) {
        const int64_t ne[2] = {64, 32};
        for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "output.weight",
                                 "token_embd.weight", "blk.0.ffn_gate_inp.weight"})
            weights_[name] = make_tensor(DWELL_Q4_0, 2, ne);
    }
    int32_t x() {
        const int64_t ne[2] = {64, 1};
        return builder_.input("x", DWELL_F32, ne);
    }
    int32_t matmul(const char* w, int32_t in) {
        return builder_.op(DWELL_OP_MATMUL, std::vector<int32_t>{builder_.weight(w), in});
    }
    // The op that produced the matmul output `y`'s input 1.
    dwell_op input_op(int32_t y) const {
        const dwell_node& mm = graph_.nodes[static_cast<size_t>(graph_.slots[y].producer)];
        const int32_t p = graph_.slots[static_cast<size_t>(mm.inputs[1])].producer;
        return p < 0 ? DWELL_OP_NONE : graph_.nodes[static_cast<size_t>(p)].op;
    }
    size_t count(dwell_op op) const {
        size_t n = 0;
        for (const auto& node : graph_.nodes) n += node.op == op;
        return n;
    }
    std::map<std::string, dwell_tensor> weights_;
    Graph graph_;
    GraphBuilder builder_;
};

TEST_F(SparsifyBuilderTest, OffByDefault) {
    const int32_t in = x();
    EXPECT_EQ(input_op(matmul("blk.0.attn_q.weight", in)), DWELL_OP_NONE);
    EXPECT_EQ(count(DWELL_OP_SPARSIFY), 0u);
}

TEST_F(SparsifyBuilderTest, ProjectionsShareOneSparsifyPerInput) {
    builder_.set_sparsity(0.4f);
    const int32_t in = x();
    const int32_t q = matmul("blk.0.attn_q.weight", in);
    const int32_t k = matmul("blk.0.attn_k.weight", in);
    EXPECT_EQ(input_op(q), DWELL_OP_SPARSIFY);
    EXPECT_EQ(input_op(k), DWELL_OP_SPARSIFY);
    ASSERT_EQ(count(DWELL_OP_SPARSIFY), 1u);
    for (const auto& node : graph_.nodes) {
        if (node.op != DWELL_OP_SPARSIFY) continue;
        EXPECT_EQ(node.inputs[0], in);
        EXPECT_EQ(node.iparams[0], DWELL_SPARSIFY_FRACTION);
        EXPECT_FLOAT_EQ(node.fparams[0], 0.4f);
    }
}

TEST_F(SparsifyBuilderTest, LeavesEmbeddingsHeadAndRoutersDense) {
    builder_.set_sparsity(0.5f);
    const int32_t in = x();
    EXPECT_EQ(input_op(matmul("output.weight", in)), DWELL_OP_NONE);
    EXPECT_EQ(input_op(matmul("token_embd.weight", in)), DWELL_OP_NONE);
    EXPECT_EQ(input_op(matmul("blk.0.ffn_gate_inp.weight", in)), DWELL_OP_NONE);
    EXPECT_EQ(count(DWELL_OP_SPARSIFY), 0u);
}

TEST_F(SparsifyBuilderTest, RefusesBadParameters) {
    const int32_t in = x();
    for (const auto& [mode, p] : {std::pair<int32_t, float>{DWELL_SPARSIFY_FRACTION, 1.0f},
                                  {DWELL_SPARSIFY_FRACTION, -0.5f},
                                  {DWELL_SPARSIFY_THRESHOLD, -1.0f},
                                  {7, 0.5f}}) {
        const int32_t ip[1] = {mode};
        const float fp[1] = {p};
        EXPECT_THROW(builder_.op(DWELL_OP_SPARSIFY, std::vector<int32_t>{in}, ip, fp), Error)
            << mode << " " << p;
    }
}

}  // namespace
}  // namespace dwell
