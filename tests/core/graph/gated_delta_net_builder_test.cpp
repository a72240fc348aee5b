// GATED_DELTA_NET's and SLICE's checks in the graph builder (ABI 1.7): the
// delta-rule state must be a layer's recurrent_state() of [Dk, Dv, Hv], the
// heads must tile, the L2 epsilon must be > 0, and a slice must fit in its
// rows; each refusal is one line naming what is wrong.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/graph/graph_builder.hpp"

namespace dwell {
namespace {

constexpr int64_t kDk = 4, kHk = 1, kDv = 4, kHv = 2, kT = 3;

class GatedDeltaNetBuilderTest : public ::testing::Test {
protected:
    GatedDeltaNetBuilderTest()
        : builder_(
              graph_, [](std::string_view) { return nullptr; },
              [](int32_t, int32_t) { return nullptr; },
              [this](int32_t layer, int32_t which) {
                  return layer == 0 && which == 1 ? &state_ : nullptr;
              }) {
        const int64_t elems = kDk * kDv * kHv;
        state_ = make_tensor(DWELL_F32, 1, &elems);
        state_.data = state_bytes_.data();
    }
    // Inputs are declared once: each call names its own.
    int32_t in(const char* name, std::vector<int64_t> ne) {
        names_.push_back(std::string(name) + std::to_string(names_.size()));
        return builder_.input(names_.back(), DWELL_F32, ne);
    }
    // The message of the op, or "" when it passes.
    std::string refusal(dwell_op op, std::vector<int32_t> inputs, std::vector<int32_t> ip,
                        std::vector<float> fp) {
        try {
            builder_.op(op, inputs, ip, fp);
            return "";
        } catch (const Error& e) {
            return e.what();
        }
    }
    std::string gdn(std::vector<int64_t> v_ne, bool state_leaf, float eps) {
        const int32_t q = in("q", {kDk, kHk, kT}), k = in("k", {kDk, kHk, kT});
        const int32_t v = in("v", v_ne);
        const int32_t g = in("g", {kHv, kT}), b = in("b", {kHv, kT});
        const int32_t s = state_leaf
                              ? builder_.recurrent_state(0, 1, std::vector<int64_t>{kDk, kDv, kHv})
                              : in("s", {kDk, kDv, kHv});
        return refusal(DWELL_OP_GATED_DELTA_NET, {q, k, v, g, b, s}, {1}, {0.5f, eps});
    }

    std::deque<std::string> names_;  // stable: push_back moves no name
    Graph graph_;
    dwell_tensor state_{};
    std::vector<float> state_bytes_ = std::vector<float>(kDk * kDv * kHv);
    GraphBuilder builder_;
};

TEST_F(GatedDeltaNetBuilderTest, AWellFormedNodePassesAndShapesItsOutputLikeV) {
    EXPECT_EQ(gdn({kDv, kHv, kT}, true, 1e-6f), "");
    const dwell_tensor& out = graph_.slots.back().tensor;
    EXPECT_EQ(out.ne[0], kDv);
    EXPECT_EQ(out.ne[1], kHv);
    EXPECT_EQ(out.ne[2], kT);
}

TEST_F(GatedDeltaNetBuilderTest, EveryMalformedNodeIsRefusedInOneLine) {
    const std::string not_state = gdn({kDv, kHv, kT}, false, 1e-6f);
    EXPECT_NE(not_state.find("recurrent_state"), std::string::npos) << not_state;
    const std::string zero_eps = gdn({kDv, kHv, kT}, true, 0.0f);
    EXPECT_NE(zero_eps.find("epsilon"), std::string::npos) << zero_eps;
    const std::string other_t = gdn({kDv, kHv, kT + 1}, true, 1e-6f);
    EXPECT_NE(other_t.find("[Dk, Hk, T]"), std::string::npos) << other_t;
    for (const auto& m : {not_state, zero_eps, other_t}) EXPECT_EQ(m.find('\n'), std::string::npos);
}

TEST_F(GatedDeltaNetBuilderTest, SliceMustFitInTheRows) {
    const int32_t x = in("x", {10, kT});
    EXPECT_EQ(refusal(DWELL_OP_SLICE, {x}, {4, 6}, {}), "");
    EXPECT_EQ(graph_.slots.back().tensor.ne[0], 6);
    EXPECT_EQ(graph_.slots.back().tensor.ne[1], kT);
    const std::string past = refusal(DWELL_OP_SLICE, {x}, {5, 6}, {});
    EXPECT_NE(past.find("do not fit"), std::string::npos) << past;
    EXPECT_NE(refusal(DWELL_OP_SLICE, {x}, {-1, 2}, {}), "");
    EXPECT_NE(refusal(DWELL_OP_SLICE, {x}, {0, 0}, {}), "");
}

}  // namespace
}  // namespace dwell
