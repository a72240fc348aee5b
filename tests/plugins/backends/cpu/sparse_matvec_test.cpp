// Activation sparsity on the cpu backend (ABI 1.9):
//   - the column-layout kernels (sparse_matvec.hpp, Q4_0 and Q8_0) at every
//     SIMD level this CPU runs give the dense blocked kernel's output of the same level bit
//     for bit on the same input with zeros (whole zero blocks, groups of
//     1-3 channels, rows not a multiple of the tile, any tile split), and
//     count the bytes they read as the channels and blocks they touch;
//   - SPARSIFY against a scalar reference of graph.h's definition (ties to
//     the lower index, NaN never zeroed, threshold mode);
//   - a MATMUL fed by SPARSIFY in a graph equals the same MATMUL on the
//     zeroed input computed dense, and its weight reads fall.
#include "simd/sparse_matvec.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "cpu_test_graph.hpp"
#include "dwell/quant.h"
#include "ops/packed_weights.hpp"
#include "simd/gemm_kernel.hpp"
#include "simd/simd_dots.hpp"

namespace dwell::cpu {
namespace {

using test::random_floats;
using test::random_weight_rows;
using test::TestGraph;

constexpr SimdLevel kLevels[] = {SimdLevel::Scalar, SimdLevel::Avx2,        SimdLevel::Avx512,
                                 SimdLevel::Neon,   SimdLevel::NeonDotprod, SimdLevel::NeonI8mm};

// The dense blocked kernel's outputs for one activation row.
std::vector<float> dense_matvec(const GemmKernel& kernel, const std::vector<uint8_t>& rows,
                                int64_t k, int64_t n, const std::vector<float>& x) {
    const size_t row_bytes = dwell_row_bytes(kernel.weight, k);
    const int R = kernel.rows_per_block;
    AlignedBytes block = make_aligned_bytes(kernel.block_bytes(k));
    AlignedBytes act = make_aligned_bytes(kernel.act_row_bytes(k));
    kernel.quantize_act(x.data(), k, act.get());
    std::vector<float> out(static_cast<size_t>(n));
    std::vector<float> tile(static_cast<size_t>(R * kernel.max_cols));
    for (int64_t r0 = 0; r0 < n; r0 += R) {
        const int nr = static_cast<int>(std::min<int64_t>(R, n - r0));
        kernel.pack_block(rows.data() + r0 * row_bytes, row_bytes, nr, k, block.get());
        kernel.tile(k, block.get(), nr, act.get(), kernel.act_row_bytes(k), 1, tile.data(),
                    static_cast<size_t>(R));
        std::copy_n(tile.data(), nr, out.begin() + r0);
    }
    return out;
}

struct Case {
    int64_t k, n;
    std::vector<float> x;
};

// Inputs with about `zero` of them zero, whole zero blocks and blocks with
// 1, 2 and 3 non-zero channels (the kernels' padded last group).
std::vector<float> sparse_input(int64_t k, double zero, uint32_t seed) {
    auto x = random_floats(static_cast<size_t>(k), seed, -3.0f, 3.0f);
    auto u = random_floats(static_cast<size_t>(k), seed + 1, 0.0f, 1.0f);
    for (int64_t i = 0; i < k; ++i)
        if (u[static_cast<size_t>(i)] < zero) x[static_cast<size_t>(i)] = 0.0f;
    const int64_t nb = k / 32;
    for (int64_t b = 0; b < nb; b += 5) std::fill_n(x.begin() + b * 32, 32, 0.0f);
    for (int64_t b = 1, keep = 1; b < nb && keep <= 3; b += 5, ++keep) {
        std::fill_n(x.begin() + b * 32, 32, 0.0f);
        for (int j = 0; j < keep; ++j) x[static_cast<size_t>(b * 32 + 7 * j + 3)] = 1.5f - j;
    }
    // Block 2 near full scale (codes about 100-127) bar a few zeros: with
    // the extreme rows below its integer sums pass 2^13 with many
    // significant bits, where the order of the epilogue's multiplies
    // changes the rounding.
    if (nb > 2) {
        for (int64_t i = 64; i < 96; ++i) {
            const float ui = u[static_cast<size_t>(i)];
            x[static_cast<size_t>(i)] = ui < zero ? 0.0f : 2.0f + 0.5f * ui;
        }
    }
    return x;
}

// Every 7th row's block 2 at extreme codes (Q4_0 weights -8 and -7, Q8_0
// 127 and 126 mixed, or -128), whose products with block 2's inputs come near the
// integer sums' largest magnitudes.
void make_extreme_rows(dwell_dtype t, int64_t k, int64_t n, std::vector<uint8_t>& rows) {
    if (k / 32 <= 2) return;
    const size_t row_bytes = dwell_row_bytes(t, k);
    for (int64_t r = 0; r < n; r += 7) {
        uint8_t* row = rows.data() + static_cast<size_t>(r) * row_bytes;
        if (t == DWELL_Q8_0) {
            auto* blk = reinterpret_cast<dwell_block_q8_0*>(row) + 2;
            // Every 14th row all -128 (a hostile file's code, which a sign
            // trick must carry as |w| = 128).
            for (int i = 0; i < 32; ++i)
                blk->qs[i] = static_cast<int8_t>(r % 14 == 0            ? -128
                                                 : (i * 7 + r) % 3 == 0 ? 126
                                                                        : 127);
        } else {
            auto* blk = reinterpret_cast<dwell_block_q4_0*>(row) + 2;
            for (int i = 0; i < 16; ++i)
                blk->qs[i] = static_cast<uint8_t>(((i * 7 + r) % 3 == 0 ? 0x01 : 0x00) |
                                                  ((i * 5 + r) % 3 == 0 ? 0x10 : 0x00));
        }
    }
}

class SparseMatvecTest : public ::testing::TestWithParam<std::pair<SimdLevel, dwell_dtype>> {};

TEST_P(SparseMatvecTest, EqualsTheDenseKernelBitForBit) {
    const auto [level, dtype] = GetParam();
    if (!simd_level_supported(level, detect_cpu_features()))
        GTEST_SKIP() << "CPU lacks " << simd_level_name(level);
    const SparseKernel* sk = sparse_kernel_for(dtype, level);
    if (sk == nullptr) GTEST_SKIP() << "no sparse kernel at " << simd_level_name(level);
    const GemmKernel* dk = gemm_kernel_for(dtype, level);
    ASSERT_NE(dk, nullptr);
    for (const auto& [k, n] : {std::pair<int64_t, int64_t>{256, 200}, {512, 384}, {96, 17}}) {
        auto rows = random_weight_rows(dtype, k, n, static_cast<uint32_t>(k + n));
        make_extreme_rows(dtype, k, n, rows);
        const size_t row_bytes = dwell_row_bytes(dtype, k);
        const int64_t tiles = sparse_padded_rows(*sk, n) / sk->rows_per_tile;
        AlignedBytes layout = make_aligned_bytes(sparse_layout_bytes(*sk, k, n));
        std::memset(layout.get(), 0xa5, sparse_layout_bytes(*sk, k, n));
        sparse_pack_tiles(*sk, rows.data(), row_bytes, k, n, 0, tiles, layout.get());
        std::vector<unsigned char> zeros(static_cast<size_t>(tiles) * sparse_tile_code_bytes(*sk),
                                         0);
        for (double zero : {0.0, 0.25, 0.5, 0.9}) {
            const auto x = sparse_input(k, zero, static_cast<uint32_t>(1000 * zero) + 7);
            const auto want = dense_matvec(*dk, rows, k, n, x);
            SparseActs acts;
            build_sparse_acts(x.data(), k, acts);
            // Whole, and split at every tile (a thread's range).
            for (int64_t split : {tiles, int64_t{1}}) {
                std::vector<float> got(static_cast<size_t>(n), -1.0f);
                for (int64_t t0 = 0; t0 < tiles; t0 += split)
                    sk->run(layout.get(), k, n, acts, t0, std::min(tiles, t0 + split), zeros.data(),
                            got.data());
                for (int64_t r = 0; r < n; ++r) {
                    EXPECT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(r)]),
                              std::bit_cast<uint32_t>(want[static_cast<size_t>(r)]))
                        << sk->name << " k " << k << " n " << n << " zero " << zero << " row " << r
                        << ": " << got[static_cast<size_t>(r)] << " vs "
                        << want[static_cast<size_t>(r)];
                }
            }
            // Bytes: the scales of blocks with a non-zero code and the codes
            // of their non-zero channels, counted from x independently.
            uint64_t blocks = 0, channels = 0;
            std::vector<dwell_block_q8_0> q(static_cast<size_t>(k / 32));
            dwell_quantize_row_q8_0(x.data(), q.data(), k);
            for (const auto& b : q) {
                const auto nz = static_cast<uint64_t>(
                    std::count_if(b.qs, b.qs + 32, [](int8_t v) { return v != 0; }));
                blocks += nz > 0;
                channels += nz;
            }
            const auto np = static_cast<uint64_t>(sparse_padded_rows(*sk, n));
            const uint64_t per_channel = dtype == DWELL_Q8_0 ? np : np / 2;
            EXPECT_EQ(sparse_bytes_read(*sk, n, acts), blocks * 2 * np + channels * per_channel);
        }
    }
}

std::vector<std::pair<SimdLevel, dwell_dtype>> supported_levels() {
    std::vector<std::pair<SimdLevel, dwell_dtype>> out;
    for (SimdLevel l : kLevels)
        if (simd_level_supported(l, detect_cpu_features()))
            for (dwell_dtype t : {DWELL_Q4_0, DWELL_Q8_0}) out.push_back({l, t});
    return out;
}

INSTANTIATE_TEST_SUITE_P(AllLevels, SparseMatvecTest, ::testing::ValuesIn(supported_levels()),
                         [](const auto& info) {
                             return std::string(simd_level_name(info.param.first)) + "_" +
                                    dwell_dtype_name(info.param.second);
                         });

// graph.h's SPARSIFY, written out: sort (|x|, index), zero the first
// floor(S * n); NaN above everything.
std::vector<float> ref_sparsify(std::vector<float> x, double s) {
    const size_t n = x.size();
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    auto mag = [&](size_t i) {
        return std::isnan(x[i]) ? INFINITY * 2.0 : std::fabs(static_cast<double>(x[i]));
    };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (std::isnan(x[a]) != std::isnan(x[b])) return std::isnan(x[b]);
        return mag(a) < mag(b);
    });
    const auto z = static_cast<size_t>(std::floor(s * static_cast<double>(n)));
    for (size_t i = 0; i < z; ++i) x[order[i]] = 0.0f;
    return x;
}

TEST(Sparsify, FractionMatchesTheReferenceWithTiesAndNaN) {
    const int64_t n = 50, R = 3;
    auto xs = random_floats(static_cast<size_t>(n * R), 5, -2.0f, 2.0f);
    // Ties of magnitude across signs, a NaN, an infinity, zeros.
    xs[3] = 0.5f;
    xs[9] = -0.5f;
    xs[20] = 0.5f;
    xs[11] = NAN;
    xs[12] = -INFINITY;
    xs[60] = 0.0f;
    xs[61] = -0.0f;
    for (int64_t r = 0; r < R; ++r) xs[static_cast<size_t>(r * n + 30)] = 1e-3f;
    for (double s : {0.0, 0.1, 0.5, 0.66, 0.98}) {
        TestGraph g;
        const int x = g.tensor(DWELL_F32, {n, R});
        const int y = g.tensor(DWELL_F32, {n, R});
        g.set<float>(x, xs);
        g.node(DWELL_OP_SPARSIFY, y, {x}, {DWELL_SPARSIFY_FRACTION}, {static_cast<float>(s)});
        const auto p = g.run(2);
        ASSERT_FALSE(p) << p->message;
        const auto got = g.f32(y);
        for (int64_t r = 0; r < R; ++r) {
            std::vector<float> row(xs.begin() + r * n, xs.begin() + (r + 1) * n);
            const auto want = ref_sparsify(row, s);
            for (int64_t i = 0; i < n; ++i) {
                const float a = got[static_cast<size_t>(r * n + i)],
                            b = want[static_cast<size_t>(i)];
                if (std::isnan(b)) {
                    EXPECT_TRUE(std::isnan(a));
                } else {
                    EXPECT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b))
                        << "s " << s << " row " << r << " i " << i;
                }
            }
        }
    }
}

TEST(Sparsify, ThresholdZeroesBelowIt) {
    const std::vector<float> xs = {0.1f, -0.2f, 0.3f, -0.29f, 0.31f, NAN, -5.0f, 0.0f};
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {8});
    const int y = g.tensor(DWELL_F32, {8});
    g.set<float>(x, xs);
    g.node(DWELL_OP_SPARSIFY, y, {x}, {DWELL_SPARSIFY_THRESHOLD}, {0.3f});
    ASSERT_FALSE(g.run(1));
    const auto got = g.f32(y);
    const std::vector<float> want = {0.0f, 0.0f, 0.3f, 0.0f, 0.31f, NAN, -5.0f, 0.0f};
    for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i])) {
            EXPECT_TRUE(std::isnan(got[i]));
        } else {
            EXPECT_EQ(got[i], want[i]) << i;
        }
    }
}

TEST(Sparsify, RefusesBadParameters) {
    for (const auto& [mode, p] :
         {std::pair<int32_t, float>{0, 1.0f}, {0, -0.1f}, {1, -1.0f}, {1, INFINITY}, {2, 0.5f}}) {
        TestGraph g;
        const int x = g.tensor(DWELL_F32, {8});
        const int y = g.tensor(DWELL_F32, {8});
        g.node(DWELL_OP_SPARSIFY, y, {x}, {mode}, {p});
        EXPECT_TRUE(g.check(0)) << mode << " " << p;
    }
}

// In a graph: MATMUL over a SPARSIFY output (sparse kernel, column layout)
// equals MATMUL over the same zeroed values given as a plain input (dense
// kernel), and reads fewer weight bytes.
TEST(SparseMatmul, SparsifyFedMatmulEqualsDenseOnZeroedInput) {
    if (sparse_kernel(DWELL_Q4_0) == nullptr) GTEST_SKIP() << "no sparse kernel at this level";
    const int64_t k = 512, n = 512;
    const auto rows = random_weight_rows(DWELL_Q4_0, k, n, 77);
    const auto xs = random_floats(static_cast<size_t>(k), 78, -1.0f, 1.0f);
    std::vector<float> sparse_out, dense_out;
    WeightReadCounts sparse_reads, dense_reads;
    ThreadPool pool(2);
    {
        TestGraph g;
        const int w = g.tensor(DWELL_Q4_0, {k, n});
        g.set_raw_rows(w, rows);
        const int x = g.tensor(DWELL_F32, {k, 1});
        const int xz = g.tensor(DWELL_F32, {k, 1});
        const int y = g.tensor(DWELL_F32, {n, 1});
        g.set<float>(x, xs);
        g.node(DWELL_OP_SPARSIFY, xz, {x}, {DWELL_SPARSIFY_FRACTION}, {0.5f});
        g.node(DWELL_OP_MATMUL, y, {w, xz});
        PackedWeights packed;
        const auto p = g.run(pool, &packed, &sparse_reads);
        ASSERT_FALSE(p) << p->message;
        sparse_out = g.f32(y);
        EXPECT_EQ(sparse_reads.inputs, static_cast<uint64_t>(k));
        EXPECT_EQ(sparse_reads.inputs_zero, static_cast<uint64_t>(k / 2));
    }
    {
        TestGraph g;
        const int w = g.tensor(DWELL_Q4_0, {k, n});
        g.set_raw_rows(w, rows);
        const int xz = g.tensor(DWELL_F32, {k, 1});
        const int y = g.tensor(DWELL_F32, {n, 1});
        g.set<float>(xz, ref_sparsify(xs, 0.5));
        g.node(DWELL_OP_MATMUL, y, {w, xz});
        PackedWeights packed;
        const auto p = g.run(pool, &packed, &dense_reads);
        ASSERT_FALSE(p) << p->message;
        dense_out = g.f32(y);
    }
    for (int64_t r = 0; r < n; ++r)
        EXPECT_EQ(std::bit_cast<uint32_t>(sparse_out[static_cast<size_t>(r)]),
                  std::bit_cast<uint32_t>(dense_out[static_cast<size_t>(r)]))
            << "row " << r;
    const uint64_t file_bytes = dwell_row_bytes(DWELL_Q4_0, k) * static_cast<uint64_t>(n);
    EXPECT_EQ(dense_reads.bytes_read, file_bytes);
    EXPECT_EQ(sparse_reads.bytes_dense, file_bytes);
    // Half the channels: the codes' 16 of every 18 bytes halve, the scales
    // stay: 10 / 18 of the file.
    EXPECT_LT(sparse_reads.bytes_read, file_bytes * 60 / 100);
}

}  // namespace
}  // namespace dwell::cpu
