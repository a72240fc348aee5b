// recurrent_state() and SHORT_CONV's checks in the graph builder (ABI 1.6):
// the state is a persistent leaf the activation planner never places, and
// every malformed SHORT_CONV is refused in one line naming what is wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/graph/activation_plan.hpp"
#include "dwell/core/graph/graph_builder.hpp"

namespace dwell {
namespace {

constexpr int64_t kC = 8, kK = 3;

class ShortConvBuilderTest : public ::testing::Test {
protected:
    ShortConvBuilderTest()
        : builder_(
              graph_, [this](std::string_view n) { return lookup(n); },
              [this](int32_t layer, int32_t which) {
                  return layer == 0 ? &cache_[which] : nullptr;
              },
              [this](int32_t layer, int32_t which) {
                  return layer == 1 && which == 0 ? &state_ : nullptr;
              }) {
        const int64_t conv[2] = {kK, kC}, conv16[2] = {kK, kC}, wide[2] = {17, kC},
                      narrow[2] = {1, kC}, other_c[2] = {kK, kC + 1}, cache[2] = {kC, 4};
        weights_.emplace("conv", make_tensor(DWELL_F32, 2, conv));
        weights_.emplace("conv16", make_tensor(DWELL_F16, 2, conv16));
        weights_.emplace("wide", make_tensor(DWELL_F32, 2, wide));
        weights_.emplace("narrow", make_tensor(DWELL_F32, 2, narrow));
        weights_.emplace("other_c", make_tensor(DWELL_F32, 2, other_c));
        weights_.emplace("q8", make_tensor(DWELL_Q8_0, 2, std::vector<int64_t>{32, kC}.data()));
        const int64_t elems = kC * (kK - 1);
        state_ = make_tensor(DWELL_F32, 1, &elems);
        state_.data = state_bytes_.data();
        cache_[0] = make_tensor(DWELL_F32, 2, cache);
        cache_[1] = cache_[0];
        cache_[0].data = cache_bytes_[0].data();
        cache_[1].data = cache_bytes_[1].data();
    }
    const dwell_tensor* lookup(std::string_view n) {
        auto it = weights_.find(std::string(n));
        return it == weights_.end() ? nullptr : &it->second;
    }
    int32_t x(int64_t t) {
        const int64_t ne[2] = {kC, t};
        return builder_.input("x", DWELL_F32, ne);
    }
    int32_t state(std::vector<int64_t> ne = {kC, kK - 1}) {
        return builder_.recurrent_state(1, 0, ne);
    }
    // The message of the SHORT_CONV with these inputs, or "" when it passes.
    std::string refusal(std::vector<int32_t> in) {
        try {
            builder_.op(DWELL_OP_SHORT_CONV, in);
            return "";
        } catch (const Error& e) {
            return e.what();
        }
    }

    Graph graph_;
    std::map<std::string, dwell_tensor> weights_;
    dwell_tensor state_{}, cache_[2]{};
    std::vector<float> state_bytes_ = std::vector<float>(kC * (kK - 1));
    std::vector<float> cache_bytes_[2] = {std::vector<float>(kC * 4), std::vector<float>(kC * 4)};
    GraphBuilder builder_;
};

TEST_F(ShortConvBuilderTest, StateIsAPersistentLeafOnTheStoresMemory) {
    const int32_t s = state();
    const TensorSlot& slot = graph_.slots[static_cast<size_t>(s)];
    EXPECT_EQ(slot.role, TensorRole::State);
    EXPECT_EQ(slot.layer, 1);
    EXPECT_EQ(slot.tensor.data, state_bytes_.data());
    EXPECT_EQ(slot.tensor.ne[0], kC);
    EXPECT_EQ(slot.tensor.ne[1], kK - 1);
    EXPECT_EQ(slot.tensor.nb[1], kC * sizeof(float));

    const int32_t y =
        builder_.op(DWELL_OP_SHORT_CONV, std::vector<int32_t>{x(5), builder_.weight("conv"), s});
    const dwell_tensor& out = graph_.slots[static_cast<size_t>(y)].tensor;
    EXPECT_EQ(out.dtype, DWELL_F32);
    EXPECT_EQ(out.ne[0], kC);
    EXPECT_EQ(out.ne[1], 5);
    builder_.set_output(y);
    // Only the output takes arena space: the state keeps its own memory.
    const ActivationPlan plan = plan_activations(graph_);
    EXPECT_EQ(plan.offset[static_cast<size_t>(s)], ActivationPlan::kNone);
    EXPECT_EQ(plan.arena_bytes, ((kC * 5 * sizeof(float)) + 63) / 64 * 64);
}

TEST_F(ShortConvBuilderTest, AnF16KernelAndDecodeOfOneTokenPass) {
    EXPECT_EQ(refusal({x(1), builder_.weight("conv16"), state()}), "");
}

TEST_F(ShortConvBuilderTest, RecurrentStateRefusesWhatTheModelDidNotDeclare) {
    const auto message = [&](int32_t layer, int32_t which, std::vector<int64_t> ne) {
        try {
            builder_.recurrent_state(layer, which, ne);
            return std::string();
        } catch (const Error& e) {
            return std::string(e.what());
        }
    };
    EXPECT_NE(message(0, 0, {kC, kK - 1}).find("no recurrent state 0 of layer 0"),
              std::string::npos);
    EXPECT_NE(message(1, 1, {kC, kK - 1}).find("no recurrent state 1 of layer 1"),
              std::string::npos);
    EXPECT_NE(message(1, 2, {kC, kK - 1}).find("must be 0 or 1"), std::string::npos);
    EXPECT_NE(message(1, 0, {kC, kK}).find("holds 16 values (state_elems), not the 24"),
              std::string::npos)
        << message(1, 0, {kC, kK});
    EXPECT_NE(message(1, 0, {kC, 0}).find("dimension of 0"), std::string::npos);
    EXPECT_EQ(message(1, 0, {kC * (kK - 1)}), "");  // any shape of the right size

    // Through the C table: -1 and the reason in last_error.
    const dwell_graph_builder* c = builder_.c_builder();
    const int64_t ne[2] = {kC, kK};
    EXPECT_EQ(c->recurrent_state(c->self, 1, 0, 2, ne), -1);
    EXPECT_NE(std::string(c->last_error(c->self)).find("state_elems"), std::string::npos);
    EXPECT_EQ(c->recurrent_state(c->self, 1, 0, 0, ne), -1);
    EXPECT_EQ(c->recurrent_state(c->self, 1, 0, 2, nullptr), -1);
    const int64_t ok[2] = {kC, kK - 1};
    EXPECT_GE(c->recurrent_state(c->self, 1, 0, 2, ok), 0);
}

TEST_F(ShortConvBuilderTest, RefusesEachMalformedInputInOneLine) {
    const int32_t conv = builder_.weight("conv"), s = state(), in = x(4);
    const auto expect = [&](std::vector<int32_t> inputs, const std::string& part) {
        const std::string m = refusal(std::move(inputs));
        EXPECT_NE(m.find("short_conv: " + part), std::string::npos) << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    };
    expect({in, conv}, "takes 3 inputs, got 2");
    const int64_t i32_ne[2] = {kC, 4};
    expect({builder_.input("ids", DWELL_I32, i32_ne), conv, s}, "x (in0) must be f32");
    const int64_t x3[3] = {kC, 2, 2};
    expect({builder_.input("x3", DWELL_F32, x3), conv, s}, "x (in0) must be [C, T]");
    expect({in, builder_.weight("q8"), s}, "the kernel (in1) must be f32 or f16");
    expect({in, builder_.weight("wide"), s}, "the kernel (in1) [17, 8] f32 must be [K, C]");
    expect({in, builder_.weight("narrow"), s}, "the kernel (in1) [1, 8] f32 must be [K, C]");
    expect({in, builder_.weight("other_c"), s}, "the kernel (in1) [3, 9] f32 must be [K, C]");
    // The state is written in place: an activation, an input or the KV
    // cache in its place would be overwritten.
    expect({in, conv, builder_.op(DWELL_OP_SILU, std::vector<int32_t>{s})},
           "the state (in2) must be a layer's recurrent_state()");
    expect({in, conv, builder_.kv_cache(0, 0)}, "the state (in2) must be a layer's");
    expect({in, conv, builder_.reshape(s, std::vector<int64_t>{kC * (kK - 1)})},
           "the state (in2) must be a layer's");
    expect({in, conv, state({kK - 1, kC})},
           "the state (in2) [2, 8] f32 must be [C, K - 1] = [8, 2]");
    expect({in, conv, state({kC * (kK - 1)})}, "the state (in2) [16] f32 must be [C, K - 1]");
    EXPECT_EQ(refusal({in, conv, s}), "");
}

}  // namespace
}  // namespace dwell
