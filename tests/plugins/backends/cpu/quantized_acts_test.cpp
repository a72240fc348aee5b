// The shared int8 activations are reused only for the same input bytes,
// shape, strides and quantizer, and dropped once anything writes over them.
#include "ops/quantized_acts.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "cpu_test_graph.hpp"
#include "simd/gemm_kernel.hpp"

namespace dwell::cpu {
namespace {

dwell_tensor f32_tensor(float* data, int64_t n0, int64_t n1) {
    return test::tensor_2d(DWELL_F32, data, n0, n1);
}

TEST(QuantizedActs, HitOnlyForTheSameInputAndQuantizer) {
    const GemmKernel& q4_0 = *gemm_kernel_scalar(DWELL_Q4_0);
    const GemmKernel& q4_K = *gemm_kernel_scalar(DWELL_Q4_K);
    std::vector<float> x(256 * 4, 1.0f), other(256 * 4, 1.0f);
    const dwell_tensor a = f32_tensor(x.data(), 256, 4);
    QuantizedActs cache;
    bool hit = true;
    cache.lookup(a, q4_0, q4_0.act_row_bytes(256), &hit);
    EXPECT_FALSE(hit);
    // Not filled yet: still a miss.
    cache.lookup(a, q4_0, q4_0.act_row_bytes(256), &hit);
    EXPECT_FALSE(hit);
    cache.filled();
    cache.lookup(a, q4_0, q4_0.act_row_bytes(256), &hit);
    EXPECT_TRUE(hit);
    // Another quantizer, another tensor, another shape: misses.
    cache.lookup(a, q4_K, q4_K.act_row_bytes(256), &hit);
    EXPECT_FALSE(hit);
    cache.filled();
    cache.lookup(f32_tensor(other.data(), 256, 4), q4_K, q4_K.act_row_bytes(256), &hit);
    EXPECT_FALSE(hit);
    cache.filled();
    cache.lookup(f32_tensor(other.data(), 256, 2), q4_K, q4_K.act_row_bytes(256), &hit);
    EXPECT_FALSE(hit);
}

TEST(QuantizedActs, AWriteOverTheInputDropsIt) {
    const GemmKernel& k = *gemm_kernel_scalar(DWELL_Q8_0);
    std::vector<float> x(64 * 3, 0.5f), elsewhere(64, 0.0f);
    const dwell_tensor a = f32_tensor(x.data(), 64, 3);
    QuantizedActs cache;
    bool hit = false;
    cache.lookup(a, k, k.act_row_bytes(64), &hit);
    cache.filled();
    cache.note_written(f32_tensor(elsewhere.data(), 64, 1));  // no overlap
    cache.lookup(a, k, k.act_row_bytes(64), &hit);
    EXPECT_TRUE(hit);
    cache.note_written(f32_tensor(x.data() + 64 * 2 + 63, 1, 1));  // x's last value
    cache.lookup(a, k, k.act_row_bytes(64), &hit);
    EXPECT_FALSE(hit);
}

}  // namespace
}  // namespace dwell::cpu
