// The one shape formatter every core message uses (graph builder, model
// load, pack reader, scheduler, isolated step).
#include "dwell/core/base/tensor_shape.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>

namespace {

dwell_tensor tensor(dwell_dtype dtype, int32_t n_dims, std::array<int64_t, DWELL_MAX_DIMS> ne) {
    dwell_tensor t{};
    t.dtype = dtype;
    t.n_dims = n_dims;
    std::copy(ne.begin(), ne.end(), t.ne);
    return t;
}

TEST(TensorShape, PrintsTheDeclaredDimensions) {
    const int64_t ne[DWELL_MAX_DIMS] = {4096, 32, 1, 1};
    EXPECT_EQ(dwell::shape_str(2, ne), "[4096, 32]");
    EXPECT_EQ(dwell::shape_str(4, ne), "[4096, 32, 1, 1]");
    EXPECT_EQ(dwell::shape_str(tensor(DWELL_Q4_0, 2, {4096, 32, 1, 1})), "[4096, 32] q4_0");
    EXPECT_EQ(dwell::shape_str(tensor(DWELL_F32, 3, {64, 4, 8, 1})), "[64, 4, 8] f32");
}

// A descriptor a backend handed back may carry any n_dims: the message still
// shows one to four sizes and reads nothing past ne[].
TEST(TensorShape, KeepsAHostileDimensionCountWithinNe) {
    EXPECT_EQ(dwell::shape_str(tensor(DWELL_F32, 0, {5, 1, 1, 1})), "[5] f32");
    EXPECT_EQ(dwell::shape_str(tensor(DWELL_F32, -3, {5, 1, 1, 1})), "[5] f32");
    EXPECT_EQ(dwell::shape_str(tensor(DWELL_I32, 1000, {2, 3, 4, 5})), "[2, 3, 4, 5] i32");
}

}  // namespace
