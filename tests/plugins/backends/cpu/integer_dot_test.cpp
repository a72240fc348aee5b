// Activation formats and the integer block dots: each dot must equal, within
// f32 rounding, a double-precision evaluation of ggml's formula on the same
// quantized activations, written here independently (weights through the
// test's own decoder, activations through their block fields).
#include "simd/integer_dot.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cpu_test_graph.hpp"
#include "quant/activation_quant.hpp"
#include "simd/weight_rows.hpp"

namespace dwell::cpu {
namespace {

using test::random_floats;
using test::random_weight_rows;
using test::ref_decode_row;

double h2d(uint16_t h) {
    return dwell_fp16_to_fp32(h);
}

// The activations as the dot sees them (d * q per element), plus, for Q8_1,
// the per-block s.
struct Decoded {
    std::vector<double> x;
    std::vector<double> s;
};

Decoded decode_activation(ActFormat f, const void* act, int64_t n) {
    Decoded out;
    out.x.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        if (f == ActFormat::Q8_0) {
            const auto& b = static_cast<const dwell_block_q8_0*>(act)[i / 32];
            out.x[static_cast<size_t>(i)] = h2d(b.d) * b.qs[i % 32];
        } else if (f == ActFormat::Q8_1) {
            const auto& b = static_cast<const ActBlockQ8_1*>(act)[i / 32];
            out.x[static_cast<size_t>(i)] = h2d(b.d) * b.qs[i % 32];
            if (i % 32 == 0) out.s.push_back(h2d(b.s));
        } else {
            const auto& b = static_cast<const ActBlockQ8_K*>(act)[i / 256];
            out.x[static_cast<size_t>(i)] = double(b.d) * b.qs[i % 256];
        }
    }
    return out;
}

// ggml's formula in double. For every format but Q4_1/Q5_1 it is exactly
// sum w_i * (d_x q_i): the K-quant min term uses bsums = sum of q, which is
// that sum regrouped. Q4_1/Q5_1 use m * s instead of m * sum(d_x q), with s
// rounded to fp16, so the offset part is taken from s.
double ggml_formula(dwell_dtype t, const uint8_t* row, const std::vector<double>& w,
                    const Decoded& a, int64_t n, double* mag) {
    double sum = 0.0;
    *mag = 0.0;
    const bool has_offset = t == DWELL_Q4_1 || t == DWELL_Q5_1;
    const size_t block_bytes = t == DWELL_Q4_1 ? 20 : 24;
    for (int64_t i = 0; i < n; ++i) {
        double wi = w[static_cast<size_t>(i)];
        if (has_offset) {
            const uint8_t* p = row + static_cast<size_t>(i / 32) * block_bytes;
            wi -= h2d(static_cast<uint16_t>(p[2] | (p[3] << 8)));
        }
        sum += wi * a.x[static_cast<size_t>(i)];
        *mag += std::fabs(wi * a.x[static_cast<size_t>(i)]);
    }
    if (has_offset) {
        for (int64_t b = 0; b < n / 32; ++b) {
            const uint8_t* p = row + static_cast<size_t>(b) * block_bytes;
            const double term =
                h2d(static_cast<uint16_t>(p[2] | (p[3] << 8))) * a.s[static_cast<size_t>(b)];
            sum += term;
            *mag += std::fabs(term);
        }
    }
    return sum;
}

class IntegerDotTest : public ::testing::TestWithParam<dwell_dtype> {};

TEST_P(IntegerDotTest, MatchesDoubleGgmlFormulaOnTheSameActivations) {
    const dwell_dtype t = GetParam();
    const int64_t n = 512;
    const int rows = 8;
    const ActFormat f = ggml_activation_format(t);
    const auto wb = random_weight_rows(t, n, rows, 7);
    const size_t rb = dwell_row_bytes(t, n);
    // Scaled up so the activation steps are far from fp16's subnormals.
    const auto x = random_floats(static_cast<size_t>(n), 8, -4.0f, 4.0f);
    ActivationRows acts(f, n, 1);
    acts.set(0, x.data());
    const Decoded a = decode_activation(f, acts.row(0), n);
    // A weight row at an odd address, as inside a mapped file.
    std::vector<uint8_t> shifted(rb + 1);
    for (int r = 0; r < rows; ++r) {
        const uint8_t* row = wb.data() + static_cast<size_t>(r) * rb;
        double mag = 0.0;
        const double ref = ggml_formula(t, row, ref_decode_row(t, row, n), a, n, &mag);
        const float got = dot_row_prepared(t, f, row, acts.row(0), n);
        EXPECT_NEAR(got, ref, 1e-5 * mag + 1e-9) << dwell_dtype_name(t) << " row " << r;
        std::memcpy(shifted.data() + 1, row, rb);
        EXPECT_EQ(got, dot_row_prepared(t, f, shifted.data() + 1, acts.row(0), n));
    }
}

INSTANTIATE_TEST_SUITE_P(GgmlBlockFormats, IntegerDotTest,
                         ::testing::Values(DWELL_Q4_0, DWELL_Q5_0, DWELL_Q8_0, DWELL_Q4_1,
                                           DWELL_Q5_1, DWELL_Q4_K, DWELL_Q5_K, DWELL_Q6_K),
                         [](const auto& info) {
                             return std::string(dwell_dtype_name(info.param));
                         });

TEST(ActivationFormat, MatmulUsesGgmlFormatsForBlockFormats) {
    for (dwell_dtype t : {DWELL_Q4_0, DWELL_Q5_0, DWELL_Q8_0, DWELL_Q4_1, DWELL_Q5_1, DWELL_Q4_K,
                          DWELL_Q5_K, DWELL_Q6_K}) {
        EXPECT_EQ(activation_format(t), ggml_activation_format(t)) << dwell_dtype_name(t);
    }
    for (dwell_dtype t : {DWELL_F16, DWELL_BF16, DWELL_F32}) {
        EXPECT_EQ(activation_format(t), ActFormat::F32) << dwell_dtype_name(t);
    }
}

// Non-finite activations never reach an out-of-range int8 cast (UBSan
// watches): NaN becomes 0, and an infinite amax makes the block all zeros.
TEST(ActivationFormat, Q8_0NonFiniteValuesStayDefined) {
    std::vector<float> x(2 * DWELL_QK8_0, 1.0f);
    x[3] = std::nanf("");
    x[DWELL_QK8_0 + 5] = INFINITY;
    dwell_block_q8_0 q[2]{};
    quantize_act_q8_0(x.data(), q, 2 * DWELL_QK8_0);
    EXPECT_EQ(q[0].qs[3], 0);
    EXPECT_EQ(q[0].qs[0], 127);
    for (int j = 0; j < DWELL_QK8_0; ++j) EXPECT_EQ(q[1].qs[j], 0) << j;
}

// Hand-computed: amax 127 makes the scale 1, so x * 127 / amax = x and the
// halves show the rounding: to even, as llama.cpp's SIMD quantizers do.
TEST(ActivationFormat, Q8_0And8_1RoundHalvesToEven) {
    std::vector<float> x(DWELL_QK8_0, 0.0f);
    const float in[] = {127.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 1.49f, -126.5f};
    const int8_t want[] = {127, 2, 4, -2, -4, 0, 0, 1, -126};
    std::copy(std::begin(in), std::end(in), x.begin());
    dwell_block_q8_0 q8_0{};
    quantize_act_q8_0(x.data(), &q8_0, DWELL_QK8_0);
    ActBlockQ8_1 q8_1{};
    quantize_act_q8_1(x.data(), &q8_1, DWELL_QK8_0);
    EXPECT_EQ(dwell_fp16_to_fp32(q8_0.d), 1.0f);
    EXPECT_EQ(dwell_fp16_to_fp32(q8_1.d), 1.0f);
    int sum = 0;
    for (size_t i = 0; i < std::size(want); ++i) {
        EXPECT_EQ(q8_0.qs[i], want[i]) << in[i];
        EXPECT_EQ(q8_1.qs[i], want[i]) << in[i];
        sum += want[i];
    }
    EXPECT_EQ(dwell_fp16_to_fp32(q8_1.s), static_cast<float>(sum));
}

TEST(ActivationFormat, GgmlVecDotTypeByWeightDtype) {
    EXPECT_EQ(ggml_activation_format(DWELL_Q4_0), ActFormat::Q8_0);
    EXPECT_EQ(ggml_activation_format(DWELL_Q5_0), ActFormat::Q8_0);
    EXPECT_EQ(ggml_activation_format(DWELL_Q8_0), ActFormat::Q8_0);
    EXPECT_EQ(ggml_activation_format(DWELL_Q4_1), ActFormat::Q8_1);
    EXPECT_EQ(ggml_activation_format(DWELL_Q5_1), ActFormat::Q8_1);
    EXPECT_EQ(ggml_activation_format(DWELL_Q4_K), ActFormat::Q8_K);
    EXPECT_EQ(ggml_activation_format(DWELL_Q5_K), ActFormat::Q8_K);
    EXPECT_EQ(ggml_activation_format(DWELL_Q6_K), ActFormat::Q8_K);
    EXPECT_EQ(ggml_activation_format(DWELL_F16), ActFormat::F16);
    EXPECT_EQ(ggml_activation_format(DWELL_BF16), ActFormat::BF16);
    EXPECT_EQ(ggml_activation_format(DWELL_F32), ActFormat::F32);
    EXPECT_EQ(ggml_activation_format(DWELL_I4_G), ActFormat::F32);
    EXPECT_EQ(ggml_activation_format(DWELL_I6_G), ActFormat::F32);
    EXPECT_EQ(ggml_activation_format(DWELL_I8_C), ActFormat::F32);
}

TEST(ActivationQuant, Q8_1CarriesStepTimesSumOfQuants) {
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = static_cast<float>(j - 10) / 21.0f;
    ActBlockQ8_1 b;
    quantize_act_q8_1(x.data(), &b, 32);
    const float d = (21.0f / 21.0f) / 127.0f;  // amax = 21/21 = 1
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
        EXPECT_EQ(b.qs[j], static_cast<int>(std::round(x[static_cast<size_t>(j)] * (1.0f / d))));
        sum += b.qs[j];
    }
    EXPECT_EQ(b.d, dwell_fp32_to_fp16(d));
    // ggml multiplies by the f32 step, not its fp16 rounding.
    EXPECT_EQ(b.s, dwell_fp32_to_fp16(static_cast<float>(sum) * d));
}

TEST(ActivationQuant, Q8_KScalesBySignedMaxAndSumsRunsOf16) {
    auto x = random_floats(256, 3);
    x[100] = 2.0f;  // largest magnitude, positive: that value maps to q = -127
    ActBlockQ8_K b;
    quantize_act_q8_K(x.data(), &b, 256);
    EXPECT_EQ(b.qs[100], -127);
    EXPECT_FLOAT_EQ(b.d, -2.0f / 127.0f);
    for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
        EXPECT_EQ(b.bsums[g], sum) << g;
    }
    for (int j = 0; j < 256; ++j) {
        EXPECT_LE(std::fabs(b.d * b.qs[j] - x[static_cast<size_t>(j)]),
                  0.5f * std::fabs(b.d) * 1.001f)
            << j;
    }
    // Ties round to even, as ggml's nearest_int does: with max = -127,
    // iscale = 1 and x = 2.5 lands exactly halfway.
    std::vector<float> y(256, 0.0f);
    y[0] = -127.0f;
    y[1] = 2.5f;
    y[2] = 3.5f;
    quantize_act_q8_K(y.data(), &b, 256);
    EXPECT_EQ(b.qs[0], -127);
    EXPECT_EQ(b.qs[1], 2);
    EXPECT_EQ(b.qs[2], 4);
    EXPECT_EQ(b.d, 1.0f);
}

TEST(ActivationQuant, ZeroBlocksGiveZeroDots) {
    const std::vector<float> zero(256, 0.0f);
    for (dwell_dtype t : {DWELL_Q4_0, DWELL_Q4_1, DWELL_Q4_K, DWELL_Q6_K}) {
        const ActFormat f = ggml_activation_format(t);
        ActivationRows acts(f, 256, 1);
        acts.set(0, zero.data());
        const auto wb = random_weight_rows(t, 256, 1, 5);
        EXPECT_EQ(dot_row_prepared(t, f, wb.data(), acts.row(0), 256), 0.0f) << dwell_dtype_name(t);
    }
}

TEST(ActivationQuant, HalfFormatsRoundEachValue) {
    const std::vector<float> x = {1.0f + 1.0f / 4096, -3.0f, 1.0f + 1.0f / 256 + 1.0f / 1024};
    std::vector<float> h(3), b(3);
    quantize_activation(ActFormat::F16, x.data(), h.data(), 3);
    quantize_activation(ActFormat::BF16, x.data(), b.data(), 3);
    EXPECT_EQ(h[0], 1.0f);  // half an fp16 ulp above 1: ties to even
    EXPECT_EQ(h[1], -3.0f);
    EXPECT_EQ(b[2], 1.0f + 1.0f / 128);  // above half a bf16 ulp: rounds up
}

}  // namespace
}  // namespace dwell::cpu
