// The blocked matmul kernels (gemm_kernel.hpp) at every SIMD level this CPU
// runs, for every dtype with a kernel there (what gemm_kernel_for returns,
// fallbacks included). Layout-agnostic: weights go in through pack_block,
// activations through quantize_act, results come out of tile, so a new
// architecture's kernels are covered by adding nothing here.
//
//   - every output matches the scalar integer dot (dot_row_prepared on
//     ggml's activation blocks) within float summation error;
//   - an output's bits do not depend on nr, nc or the column's position in
//     the tile, and tile writes nothing outside nr x nc;
//   - quantize_act rounds exactly as quantize_act_q8_0 / quantize_act_q8_K
//     (read back through one-hot weights whose dot is one activation);
//   - pack_block reads weight rows at any byte offset (mapped files).
#include "simd/gemm_kernel.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "cpu_test_graph.hpp"
#include "dwell/quant.h"
#include "ops/packed_weights.hpp"
#include "quant/activation_quant.hpp"
#include "simd/integer_dot.hpp"
#include "simd/simd_dots.hpp"
#include "simd/weight_rows.hpp"

namespace dwell::cpu {
namespace {

using test::OffsetBuffer;
using test::random_floats;
using test::random_weight_rows;

constexpr SimdLevel kLevels[] = {SimdLevel::Scalar, SimdLevel::Avx2,        SimdLevel::Avx512,
                                 SimdLevel::Neon,   SimdLevel::NeonDotprod, SimdLevel::NeonI8mm};
constexpr dwell_dtype kDtypes[] = {DWELL_Q4_0, DWELL_Q8_0, DWELL_Q4_K, DWELL_Q6_K,
                                   DWELL_Q5_0, DWELL_Q4_1, DWELL_Q5_1, DWELL_Q5_K};

// n weight rows of k values packed into the kernel's blocks.
struct Packed {
    int64_t n_blocks = 0;
    size_t block_bytes = 0;
    AlignedBytes data;

    Packed(const GemmKernel& kernel, const uint8_t* rows, size_t row_bytes, int64_t k, int64_t n) {
        const int R = kernel.rows_per_block;
        n_blocks = (n + R - 1) / R;
        block_bytes = kernel.block_bytes(k);
        data = make_aligned_bytes(block_bytes * static_cast<size_t>(n_blocks));
        // Garbage first: pack_block must write every byte it owns.
        std::memset(data.get(), 0xa5, block_bytes * static_cast<size_t>(n_blocks));
        for (int64_t b = 0; b < n_blocks; ++b) {
            const int nr = static_cast<int>(std::min<int64_t>(R, n - b * R));
            kernel.pack_block(rows + static_cast<size_t>(b * R) * row_bytes, row_bytes, nr, k,
                              block(b));
        }
    }
    unsigned char* block(int64_t b) const {
        return data.get() + static_cast<size_t>(b) * block_bytes;
    }
};

// m activation rows quantized by the kernel, back to back.
struct Acts {
    size_t stride = 0;
    AlignedBytes data;

    Acts(const GemmKernel& kernel, const std::vector<float>& x, int64_t k, int64_t m) {
        stride = kernel.act_row_bytes(k);
        data = make_aligned_bytes(stride * static_cast<size_t>(m));
        std::memset(data.get(), 0x5a, stride * static_cast<size_t>(m));
        for (int64_t i = 0; i < m; ++i) {
            kernel.quantize_act(x.data() + i * k, k, data.get() + static_cast<size_t>(i) * stride);
        }
    }
    const unsigned char* row(int64_t i) const {
        return data.get() + static_cast<size_t>(i) * stride;
    }
};

// ggml's activation blocks for the reference dot.
std::vector<uint8_t> reference_act(dwell_dtype t, const float* x, int64_t k) {
    const ActFormat f = ggml_activation_format(t);
    std::vector<ActBlockQ8_K> storage(activation_row_bytes(f, k) / sizeof(ActBlockQ8_K) + 1);
    quantize_activation(f, x, storage.data(), k);
    std::vector<uint8_t> out(activation_row_bytes(f, k));
    std::memcpy(out.data(), storage.data(), out.size());
    return out;
}

float reference_dot(dwell_dtype t, const uint8_t* row, const std::vector<uint8_t>& act, int64_t k) {
    // The scalar dot reads its activation blocks aligned.
    std::vector<ActBlockQ8_K> aligned(act.size() / sizeof(ActBlockQ8_K) + 1);
    std::memcpy(aligned.data(), act.data(), act.size());
    return dot_row_prepared(t, ggml_activation_format(t), row, aligned.data(), k);
}

double abs_dot(dwell_dtype t, const uint8_t* row, const float* x, int64_t k) {
    std::vector<float> w(static_cast<size_t>(k));
    dequantize_row(t, row, w.data(), k);
    double s = 0;
    for (int64_t i = 0; i < k; ++i) s += std::fabs(double(w[size_t(i)]) * x[i]);
    return s;
}

struct Param {
    SimdLevel level;
    dwell_dtype dtype;
};

void PrintTo(const Param& p, std::ostream* os) {
    *os << simd_level_name(p.level) << "/" << dwell_dtype_name(p.dtype);
}

class GemmKernelTest : public ::testing::TestWithParam<Param> {
protected:
    void SetUp() override {
        const auto [level, t] = GetParam();
        if (!simd_level_supported(level, detect_cpu_features())) {
            GTEST_SKIP() << "CPU lacks " << simd_level_name(level);
        }
        kernel_ = gemm_kernel_for(t, level);
        ASSERT_NE(kernel_, nullptr);
        ASSERT_EQ(kernel_->weight, t) << kernel_->name;
        ASSERT_GT(kernel_->rows_per_block, 0);
        ASSERT_GT(kernel_->max_cols, 0);
        ASSERT_EQ(kernel_->k_multiple, dwell_dtype_block_elems(t));
    }

    // Checks one (k, n) shape, weights at byte offset `offset`.
    void check_shape(int64_t k, int64_t n, size_t offset, bool all_nr, uint32_t seed);

    const GemmKernel* kernel_ = nullptr;
};

void GemmKernelTest::check_shape(int64_t k, int64_t n, size_t offset, bool all_nr, uint32_t seed) {
    const GemmKernel& kn = *kernel_;
    const dwell_dtype t = kn.weight;
    const int R = kn.rows_per_block;
    const int C = kn.max_cols;
    const int64_t m = 2 * C + 1;  // enough columns for every position of every nc
    const size_t row_bytes = dwell_row_bytes(t, k);
    SCOPED_TRACE(std::string(kn.name) + " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                 " offset=" + std::to_string(offset));

    const auto w_bytes = random_weight_rows(t, k, n, seed);
    const OffsetBuffer w(w_bytes, offset);
    // Wide-range activations reach the int8 extremes in some blocks.
    const auto x = random_floats(static_cast<size_t>(k * m), seed + 1, -4.0f, 3.0f);
    ASSERT_EQ(kn.act_row_bytes(k) % 64, 0u);
    const Packed packed(kn, w.data(), row_bytes, k, n);
    const Acts acts(kn, x, k, m);

    // Reference: the scalar integer dot per output.
    std::vector<float> want(static_cast<size_t>(n * m));
    std::vector<double> scale(static_cast<size_t>(n * m));
    for (int64_t c = 0; c < m; ++c) {
        const auto act = reference_act(t, x.data() + c * k, k);
        for (int64_t r = 0; r < n; ++r) {
            const uint8_t* row = w.data() + r * row_bytes;
            want[size_t(c * n + r)] = reference_dot(t, row, act, k);
            scale[size_t(c * n + r)] = abs_dot(t, row, x.data() + c * k, k);
        }
    }

    // Canonical run: every block with all its rows, one column at a time.
    const float kSentinel = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> got(static_cast<size_t>(n * m));
    std::vector<float> tile(static_cast<size_t>(R * C));
    for (int64_t b = 0; b < packed.n_blocks; ++b) {
        const int nr = static_cast<int>(std::min<int64_t>(R, n - b * R));
        for (int64_t c = 0; c < m; ++c) {
            std::fill(tile.begin(), tile.end(), kSentinel);
            kn.tile(k, packed.block(b), nr, acts.row(c), acts.stride, 1, tile.data(),
                    static_cast<size_t>(R));
            for (int r = 0; r < nr; ++r) got[size_t(c * n + b * R + r)] = tile[size_t(r)];
            for (int r = nr; r < R * C; ++r) {
                ASSERT_TRUE(std::isnan(tile[size_t(r)])) << "wrote outside the tile, slot " << r;
            }
        }
    }
    for (int64_t c = 0; c < m; ++c) {
        for (int64_t r = 0; r < n; ++r) {
            const size_t i = size_t(c * n + r);
            EXPECT_NEAR(got[i], want[i], 1e-5 * scale[i] + 1e-30) << "row " << r << " col " << c;
        }
    }

    // Every nr (or the extremes), every nc and every column position: the
    // same bits as the canonical run, nothing written outside nr x nc.
    std::vector<float> strided(static_cast<size_t>((R + 3) * C));
    for (int64_t b = 0; b < packed.n_blocks; ++b) {
        const int nr_max = static_cast<int>(std::min<int64_t>(R, n - b * R));
        for (int nr = 1; nr <= nr_max; ++nr) {
            if (!all_nr && nr != 1 && nr != nr_max) continue;
            for (int nc = 1; nc <= C; ++nc) {
                for (int64_t c0 = 0; c0 + nc <= m; ++c0) {
                    // An out_stride wider than R, as a caller writing straight
                    // into a bigger output might use.
                    const size_t out_stride = static_cast<size_t>(R + 3);
                    std::fill(strided.begin(), strided.end(), kSentinel);
                    kn.tile(k, packed.block(b), nr, acts.row(c0), acts.stride, nc, strided.data(),
                            out_stride);
                    for (int c = 0; c < C; ++c) {
                        for (int r = 0; r < static_cast<int>(out_stride); ++r) {
                            const float v = strided[size_t(c) * out_stride + size_t(r)];
                            if (c >= nc || r >= nr) {
                                ASSERT_TRUE(std::isnan(v)) << "nr=" << nr << " nc=" << nc
                                                           << " wrote c=" << c << " r=" << r;
                                continue;
                            }
                            const float ref = got[size_t((c0 + c) * n + b * R + r)];
                            ASSERT_EQ(std::memcmp(&v, &ref, sizeof v), 0)
                                << "block " << b << " row " << r << " col " << c0 + c
                                << " nr=" << nr << " nc=" << nc << ": " << v << " vs " << ref;
                        }
                    }
                }
            }
        }
    }
}

TEST_P(GemmKernelTest, MatchesScalarDotAndIsTileInvariant) {
    const dwell_dtype t = GetParam().dtype;
    const int64_t block = kernel_->k_multiple;
    const int R = kernel_->rows_per_block;
    std::vector<int64_t> ks = {block, 3 * block, 7 * block};
    if (2048 % block == 0) ks.push_back(2048);
    if (t == DWELL_Q4_0) ks.push_back(8192);
    const std::vector<int64_t> ns = {1, std::max(1, R - 1), R + 3, 37};
    uint32_t seed = 7;
    for (int64_t k : ks) {
        for (int64_t n : ns) {
            const size_t offset = static_cast<size_t>(seed % 4);  // 0..3 bytes off alignment
            check_shape(k, n, offset, /*all_nr=*/k <= 2048, seed);
            seed += 11;
            if (HasFatalFailure()) return;
        }
    }
}

// One-hot weights: row r's dot is activation value i_r times the block
// scale exactly (weight scale 1, every other weight 0), so tile() reads back
// the kernel's quantized activations in ggml's numbers.
std::vector<uint8_t> one_hot_rows(dwell_dtype t, int64_t k, const std::vector<int64_t>& hot) {
    const size_t row_bytes = dwell_row_bytes(t, k);
    std::vector<uint8_t> out(row_bytes * hot.size(), 0);
    const uint16_t one = dwell_fp32_to_fp16(1.0f);
    auto put16 = [](uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); };
    for (size_t r = 0; r < hot.size(); ++r) {
        uint8_t* row = out.data() + r * row_bytes;
        const int64_t i = hot[r];
        switch (t) {
            case DWELL_Q8_0:
                for (int64_t b = 0; b < k / 32; ++b) put16(row + 34 * b, one);
                row[34 * (i / 32) + 2 + i % 32] = 1;
                break;
            case DWELL_Q4_0: {
                for (int64_t b = 0; b < k / 32; ++b) {
                    put16(row + 18 * b, one);
                    std::memset(row + 18 * b + 2, 0x88, 16);  // every code 8, value 0
                }
                const int j = static_cast<int>(i % 32);
                uint8_t& q = row[18 * (i / 32) + 2 + j % 16];
                q = j < 16 ? static_cast<uint8_t>((q & 0xf0) | 9)
                           : static_cast<uint8_t>(0x90 | (q & 0x0f));
                break;
            }
            case DWELL_Q4_1:
            case DWELL_Q5_1: {
                // Step 1, offset 0, every code 0 but the hot one (1).
                const bool five = t == DWELL_Q5_1;
                const size_t bb = five ? sizeof(dwell_block_q5_1) : sizeof(dwell_block_q4_1);
                const size_t qs =
                    five ? offsetof(dwell_block_q5_1, qs) : offsetof(dwell_block_q4_1, qs);
                for (int64_t b = 0; b < k / 32; ++b) put16(row + bb * b, one);
                const int j = static_cast<int>(i % 32);
                row[bb * (i / 32) + qs + j % 16] = j < 16 ? 0x01 : 0x10;
                break;
            }
            case DWELL_Q5_0: {
                // Every code 16 (value 0: fifth bit set), the hot one 17.
                for (int64_t b = 0; b < k / 32; ++b) {
                    uint8_t* blk = row + sizeof(dwell_block_q5_0) * b;
                    put16(blk, one);
                    std::memset(blk + offsetof(dwell_block_q5_0, qh), 0xff, 4);
                }
                const int j = static_cast<int>(i % 32);
                row[sizeof(dwell_block_q5_0) * (i / 32) + offsetof(dwell_block_q5_0, qs) + j % 16] =
                    j < 16 ? 0x01 : 0x10;
                break;
            }
            case DWELL_Q4_K:
            case DWELL_Q5_K: {
                // Scales 1, mins 0, every code 0 but the hot one (1); Q5_K's
                // fifth bits stay 0.
                const bool five = t == DWELL_Q5_K;
                const size_t bb = five ? sizeof(dwell_block_q5_K) : sizeof(dwell_block_q4_K);
                const size_t qs_at =
                    five ? offsetof(dwell_block_q5_K, qs) : offsetof(dwell_block_q4_K, qs);
                for (int64_t b = 0; b < k / 256; ++b) {
                    uint8_t* blk = row + bb * b;
                    put16(blk, one);  // d first, then dmin (0) in both formats
                    uint8_t* sc = blk + 4;
                    for (int j = 0; j < 4; ++j) sc[j] = 1;      // scales 0..3
                    for (int j = 8; j < 12; ++j) sc[j] = 0x01;  // scales 4..7, mins 0
                }
                uint8_t* qs = row + bb * (i / 256) + qs_at;
                const int e = static_cast<int>(i % 256);
                const int p = e / 64, l = e % 64;
                qs[32 * p + l % 32] = l < 32 ? 0x01 : 0x10;
                break;
            }
            case DWELL_Q6_K: {
                for (int64_t b = 0; b < k / 256; ++b) {
                    uint8_t* blk = row + sizeof(dwell_block_q6_K) * b;
                    put16(blk + offsetof(dwell_block_q6_K, d), one);
                    std::memset(blk + offsetof(dwell_block_q6_K, scales), 1, 16);
                    // Every code 32 (value 0): low nibble 0, high bits 2.
                    std::memset(blk + offsetof(dwell_block_q6_K, qh), 0xaa, 64);
                }
                uint8_t* blk = row + sizeof(dwell_block_q6_K) * (i / 256);
                const int e = static_cast<int>(i % 256);
                const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
                uint8_t* ql =
                    blk + offsetof(dwell_block_q6_K, ql) + 64 * h + l + (quarter % 2) * 32;
                *ql |= quarter < 2 ? 0x01 : 0x10;  // code 33
                break;
            }
            default:
                ADD_FAILURE() << "no one-hot rows for " << dwell_dtype_name(t);
        }
    }
    return out;
}

TEST_P(GemmKernelTest, QuantizeActRoundsLikeGgml) {
    const dwell_dtype t = GetParam().dtype;
    const bool q8_K = ggml_activation_format(t) == ActFormat::Q8_K;
    const bool q8_1 = ggml_activation_format(t) == ActFormat::Q8_1;
    const int64_t block = q8_K ? DWELL_QK_K : DWELL_QK8_0;
    const int64_t k = 2 * block;
    const int R = kernel_->rows_per_block;

    // Row 0 random; row 1 with amax 127 so d = 1 and halves are exact ties
    // (each format must round them as its reference does); row 2 negative
    // extremes and a zero block.
    std::vector<float> x = random_floats(static_cast<size_t>(3 * k), 3, -2.0f, 2.0f);
    float* ties = x.data() + k;
    for (int64_t i = 0; i < k; ++i) ties[i] = static_cast<float>(i % 40 - 20) + 0.5f;
    for (int64_t b = 0; b < k / block; ++b) ties[b * block + 3] = 127.0f;
    float* third = x.data() + 2 * k;
    for (int64_t i = 0; i < block; ++i) third[i] = 0.0f;
    third[block + 5] = -3.0f;
    third[block + 6] = -2.99f;

    std::vector<float> want(static_cast<size_t>(3 * k));
    for (int c = 0; c < 3; ++c) {
        if (q8_K) {
            std::vector<ActBlockQ8_K> ref(static_cast<size_t>(k / block));
            quantize_act_q8_K(x.data() + c * k, ref.data(), k);
            for (int64_t i = 0; i < k; ++i) {
                want[size_t(c * k + i)] = static_cast<float>(ref[size_t(i / block)].qs[i % block]) *
                                          ref[size_t(i / block)].d;
            }
        } else if (q8_1) {
            std::vector<ActBlockQ8_1> ref(static_cast<size_t>(k / block));
            quantize_act_q8_1(x.data() + c * k, ref.data(), k);
            for (int64_t i = 0; i < k; ++i) {
                const auto& b = ref[size_t(i / block)];
                want[size_t(c * k + i)] =
                    static_cast<float>(b.qs[i % block]) * dwell_fp16_to_fp32(b.d);
            }
        } else {
            std::vector<dwell_block_q8_0> ref(static_cast<size_t>(k / block));
            quantize_act_q8_0(x.data() + c * k, ref.data(), k);
            for (int64_t i = 0; i < k; ++i) {
                const auto& b = ref[size_t(i / block)];
                want[size_t(c * k + i)] =
                    static_cast<float>(b.qs[i % block]) * dwell_fp16_to_fp32(b.d);
            }
        }
    }

    const Acts acts(*kernel_, x, k, 3);
    std::vector<float> tile(static_cast<size_t>(R));
    for (int64_t i0 = 0; i0 < k; i0 += R) {
        std::vector<int64_t> hot;
        for (int64_t i = i0; i < std::min<int64_t>(k, i0 + R); ++i) hot.push_back(i);
        const auto rows = one_hot_rows(t, k, hot);
        const Packed packed(*kernel_, rows.data(), dwell_row_bytes(t, k), k,
                            static_cast<int64_t>(hot.size()));
        for (int c = 0; c < 3; ++c) {
            kernel_->tile(k, packed.block(0), static_cast<int>(hot.size()), acts.row(c),
                          acts.stride, 1, tile.data(), static_cast<size_t>(R));
            for (size_t r = 0; r < hot.size(); ++r) {
                const float w = want[size_t(c * k + hot[r])];
                EXPECT_EQ(tile[r], w) << kernel_->name << " row " << c << " element " << hot[r];
            }
        }
    }
}

// Only the levels this CPU runs: the other architecture's never apply.
std::vector<Param> all_params() {
    std::vector<Param> out;
    const CpuFeatures features = detect_cpu_features();
    for (SimdLevel l : kLevels) {
        if (!simd_level_supported(l, features)) continue;
        for (dwell_dtype t : kDtypes) out.push_back({l, t});
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(AllLevels, GemmKernelTest, ::testing::ValuesIn(all_params()),
                         [](const auto& info) {
                             return std::string(simd_level_name(info.param.level)) + "_" +
                                    dwell_dtype_name(info.param.dtype);
                         });

}  // namespace
}  // namespace dwell::cpu
