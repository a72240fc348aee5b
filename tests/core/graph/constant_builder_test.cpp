// constant() in the graph builder (ABI 1.8): a plugin's computed values
// become a read-only F32 weight the graph owns (a copy, so the plugin's
// buffer may go), usable as ROPE's frequency factors; the same name again
// is the same tensor, and a file tensor's name or a size that does not
// match the shape is refused, through the C table as well.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/graph/graph_builder.hpp"

namespace dwell {
namespace {

class ConstantBuilderTest : public ::testing::Test {
protected:
    ConstantBuilderTest()
        : builder_(
              graph_,
              [this](std::string_view n) { return n == "rope_freqs.weight" ? &file_ : nullptr; },
              [](int32_t, int32_t) { return nullptr; }) {
        const int64_t n = 4;
        file_ = make_tensor(DWELL_F32, 1, &n);
    }
    dwell_tensor file_{};
    Graph graph_;
    GraphBuilder builder_;
};

TEST_F(ConstantBuilderTest, IsACopyTheGraphOwnsAndFeedsRope) {
    std::vector<float> values = {1.0f, 1.5f, 2.0f, 4.0f};
    const int64_t ne[1] = {4};
    const int32_t c = builder_.constant("yarn", ne, values);
    values.assign(4, 0.0f);  // the plugin's buffer may change or go
    const TensorSlot& s = graph_.slots[static_cast<size_t>(c)];
    EXPECT_EQ(s.role, TensorRole::Weight);
    EXPECT_EQ(s.tensor.dtype, DWELL_F32);
    ASSERT_NE(s.tensor.data, nullptr);
    const auto* kept = static_cast<const float*>(s.tensor.data);
    EXPECT_EQ(std::vector<float>(kept, kept + 4), (std::vector<float>{1.0f, 1.5f, 2.0f, 4.0f}));
    EXPECT_EQ(builder_.constant("yarn", ne, values), c);

    const int64_t x_ne[3] = {8, 2, 3}, pos_ne[1] = {3};
    const int32_t x = builder_.input("x", DWELL_F32, x_ne);
    const int32_t pos = builder_.input("positions", DWELL_I32, pos_ne);
    const int32_t ip[2] = {DWELL_ROPE_NEOX, 8};
    const float fp[3] = {10000.0f, 1.0f, 1.1f};
    EXPECT_GE(builder_.op(DWELL_OP_ROPE, std::vector<int32_t>{x, pos, c}, ip, fp), 0);
}

TEST_F(ConstantBuilderTest, RefusesAFileTensorsNameAndAWrongSize) {
    const std::vector<float> four(4, 1.0f);
    const int64_t ne[1] = {4}, five[1] = {5};
    try {
        builder_.constant("rope_freqs.weight", ne, four);
        FAIL() << "a file tensor's name was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "graph: constant 'rope_freqs.weight' has the name of a file tensor");
    }
    try {
        builder_.constant("yarn", five, four);
        FAIL() << "5 elements of shape from 4 values were accepted";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "graph: constant 'yarn': data size differs from its shape");
    }
    // The C table answers -1 with the reason, and a null name or data.
    const dwell_graph_builder* c = builder_.c_builder();
    ASSERT_TRUE(DWELL_HAS_FIELD(c, dwell_graph_builder, constant));
    EXPECT_EQ(c->constant(c->self, nullptr, 1, ne, four.data()), -1);
    EXPECT_EQ(c->constant(c->self, "yarn", 1, ne, nullptr), -1);
    EXPECT_NE(std::string(c->last_error(c->self)).find("constant needs a name"), std::string::npos);
    EXPECT_GE(c->constant(c->self, "yarn", 1, ne, four.data()), 0);
}

}  // namespace
}  // namespace dwell
