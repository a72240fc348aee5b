// Every VecKernels entry of every SIMD level this CPU supports against the
// scalar entry, over lengths with vector tails and unaligned pointers; plus
// the SIMD expf's accuracy against exp in double.
//
// Tolerances follow vec_math.hpp's contract: entries that perform the same
// single-rounded operations must match bit for bit; reordered float dots
// are compared relative to sum |x*y| (the quantity a summation's rounding
// error scales with, where the result itself may cancel to ~0); exp-based
// entries are compared in ulps of the result.
#include "simd/vec_math.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu_test_graph.hpp"
#include "dwell/quant.h"
#include "ops/activation_math.hpp"

namespace dwell::cpu {
namespace {

using test::random_floats;

// Lengths around the widths (4, 8, 16 lanes, 32-element unrolls) and the
// head/row sizes the ops see.
const int64_t kLengths[] = {0,  1,  2,  3,  4,  5,  7,  8,   9,   15,  16,
                            17, 31, 32, 33, 63, 64, 65, 100, 129, 1000};

constexpr double kU = 1.0 / (1 << 24);  // unit roundoff of float

size_t sz(int64_t v) {
    return static_cast<size_t>(v);
}

// Floats copied to a buffer that starts `offset` floats past a 64-byte
// boundary, so no vector load is aligned unless offset is 0.
class FloatBuf {
public:
    // Not inlined: at inlined call sites GCC 12 derives impossible negative
    // lengths from the int64 loop bounds and warns (-Wstringop-overflow).
    [[gnu::noinline]] FloatBuf(const std::vector<float>& v, size_t offset)
        : storage_(v.size() + 32) {
        const auto base = reinterpret_cast<uintptr_t>(storage_.data());
        start_ = storage_.data() + ((64 - base % 64) % 64) / sizeof(float) + offset;
        std::copy(v.begin(), v.end(), start_);
    }
    float* data() { return start_; }
    std::vector<float> vec(size_t n) const { return {start_, start_ + n}; }

private:
    std::vector<float> storage_;
    float* start_;
};

// Halves at any byte offset (cache rows are read in place).
class HalfBuf {
public:
    [[gnu::noinline]] HalfBuf(const std::vector<uint16_t>& h, size_t byte_offset)
        : storage_(2 * h.size() + 64 + byte_offset) {
        const auto base = reinterpret_cast<uintptr_t>(storage_.data());
        start_ = storage_.data() + ((64 - base % 64) % 64) + byte_offset;
        if (!h.empty()) std::memcpy(start_, h.data(), 2 * h.size());
    }
    const void* data() const { return start_; }

private:
    std::vector<unsigned char> storage_;
    unsigned char* start_;
};

std::vector<uint16_t> random_halves(size_t n, uint32_t seed) {
    std::vector<uint16_t> h(n);
    const auto f = random_floats(n, seed, -2.0f, 2.0f);
    for (size_t i = 0; i < n; ++i) h[i] = dwell_fp32_to_fp16(f[i]);
    return h;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// |got - want| in ulps of want (a float), the ulp of the subnormals below
// the normal range.
double ulps(float got, double want) {
    // Beyond FLT_MAX the correctly rounded float is inf.
    const float w = static_cast<float>(want);
    if (std::isinf(w) || std::isinf(got)) return got == w ? 0.0 : 1e30;
    const float aw = std::fabs(w);
    const double ulp = aw < std::numeric_limits<float>::min()
                           ? std::numeric_limits<float>::denorm_min()
                           : std::nextafter(aw, INFINITY) - aw;
    return std::fabs(static_cast<double>(got) - want) / ulp;
}

class VecMath : public ::testing::TestWithParam<SimdLevel> {
protected:
    void SetUp() override {
        if (!simd_level_supported(GetParam(), detect_cpu_features())) {
            GTEST_SKIP() << "CPU lacks " << simd_level_name(GetParam());
        }
        vk_ = vec_kernels_for(GetParam());
        ref_ = vec_kernels_for(SimdLevel::Scalar);
    }
    VecKernels vk_{};
    VecKernels ref_{};
};

TEST_P(VecMath, TableIsCompleteAtItsLevel) {
    EXPECT_EQ(vk_.level, GetParam());
    for (auto* p :
         {reinterpret_cast<void*>(vk_.dot_f32),       reinterpret_cast<void*>(vk_.dot_f16_f32),
          reinterpret_cast<void*>(vk_.axpy_f32),      reinterpret_cast<void*>(vk_.axpy_f16),
          reinterpret_cast<void*>(vk_.round_f16),     reinterpret_cast<void*>(vk_.scale),
          reinterpret_cast<void*>(vk_.sum_squares),   reinterpret_cast<void*>(vk_.max),
          reinterpret_cast<void*>(vk_.exp_sum),       reinterpret_cast<void*>(vk_.silu),
          reinterpret_cast<void*>(vk_.swiglu),        reinterpret_cast<void*>(vk_.add),
          reinterpret_cast<void*>(vk_.mul),           reinterpret_cast<void*>(vk_.rope_norm),
          reinterpret_cast<void*>(vk_.rope_neox),     reinterpret_cast<void*>(vk_.dot_q8_0_f32),
          reinterpret_cast<void*>(vk_.dot_fp8_f32),   reinterpret_cast<void*>(vk_.axpy_q8_0),
          reinterpret_cast<void*>(vk_.axpy_fp8),      reinterpret_cast<void*>(vk_.dots_f16_f32),
          reinterpret_cast<void*>(vk_.axpy_f16_multi)}) {
        EXPECT_NE(p, nullptr);
    }
}

// Both sides sum the same n products in float, in different orders (and
// the SIMD side fuses): each is within gamma_n = n*u/(1-n*u) of the exact
// dot times sum |x*y|, so they differ by at most twice that.
TEST_P(VecMath, DotF32) {
    uint32_t seed = 1;
    for (int64_t n : kLengths) {
        const auto x = random_floats(static_cast<size_t>(n), seed++);
        const auto y = random_floats(static_cast<size_t>(n), seed++, -3.0f, 3.0f);
        double abs_sum = 0;
        for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs(double(x[sz(i)]) * y[sz(i)]);
        for (size_t off : {0u, 1u, 3u}) {
            FloatBuf bx(x, off), by(y, off ? off + 1 : 0);
            const float want = ref_.dot_f32(bx.data(), by.data(), n);
            const float got = vk_.dot_f32(bx.data(), by.data(), n);
            EXPECT_NEAR(got, want, 2.0 * (n + 1) * kU * abs_sum) << "n=" << n << " offset=" << off;
        }
    }
}

TEST_P(VecMath, DotF16F32) {
    uint32_t seed = 50;
    for (int64_t n : kLengths) {
        const auto h = random_halves(static_cast<size_t>(n), seed++);
        const auto y = random_floats(static_cast<size_t>(n), seed++);
        double abs_sum = 0;
        for (int64_t i = 0; i < n; ++i) {
            abs_sum += std::fabs(double(dwell_fp16_to_fp32(h[sz(i)])) * y[sz(i)]);
        }
        for (size_t byte_off : {0u, 2u, 6u, 1u}) {
            HalfBuf bh(h, byte_off);
            FloatBuf by(y, byte_off % 4);
            const float want = ref_.dot_f16_f32(bh.data(), by.data(), n);
            const float got = vk_.dot_f16_f32(bh.data(), by.data(), n);
            EXPECT_NEAR(got, want, 2.0 * (n + 1) * kU * abs_sum)
                << "n=" << n << " byte offset=" << byte_off;
        }
    }
}

// One multiply and one add per element and row, rows in order, in both:
// bit-identical. Rows are padded (stride > row size) and start unaligned.
TEST_P(VecMath, AxpyRowsAreBitIdentical) {
    uint32_t seed = 100;
    for (int64_t n : kLengths) {
        for (int64_t n_rows : {1, 3, 17}) {
            const auto y0 = random_floats(sz(n), seed++);
            const auto w = random_floats(sz(n_rows), seed++);
            // f32 rows: stride n + 3 floats, starting 1 float past alignment.
            const int64_t fstride = n + 3;
            const auto x = random_floats(sz(n_rows * fstride), seed++);
            FloatBuf bx(x, 1), want(y0, 2), got(y0, 3);
            ref_.axpy_f32(w.data(), bx.data(), fstride * 4, n_rows, want.data(), n);
            vk_.axpy_f32(w.data(), bx.data(), fstride * 4, n_rows, got.data(), n);
            EXPECT_TRUE(bits_equal(got.vec(sz(n)), want.vec(sz(n))))
                << "f32 n=" << n << " rows=" << n_rows;

            // f16 rows: stride n + 5 halves, at an odd byte offset.
            const int64_t hstride = n + 5;
            const auto h = random_halves(sz(n_rows * hstride), seed++);
            HalfBuf bh(h, 1);
            FloatBuf want16(y0, 0), got16(y0, 1);
            ref_.axpy_f16(w.data(), bh.data(), hstride * 2, n_rows, want16.data(), n);
            vk_.axpy_f16(w.data(), bh.data(), hstride * 2, n_rows, got16.data(), n);
            EXPECT_TRUE(bits_equal(got16.vec(sz(n)), want16.vec(sz(n))))
                << "f16 n=" << n << " rows=" << n_rows;
        }
    }
}

// A page of key rows against the query heads sharing them: each output a
// reordered dot (as DotF16F32), whatever the head count and row count
// (blocks of 16 rows, a partial last block) and head size (fast paths at
// multiples of 16 up to 128, the row-by-row path otherwise).
TEST_P(VecMath, DotsF16SeveralHeads) {
    uint32_t seed = 700;
    for (int64_t n : {8, 16, 32, 48, 64, 80, 128, 130}) {
        for (int64_t n_q : {1, 2, 3, 4, 5, 8}) {
            for (int64_t n_rows : {1, 7, 16, 17, 40}) {
                const int64_t stride = n * 2 + 6;  // padded rows, as page rows may be
                const auto h = random_halves(sz(n_rows * stride / 2 + 1), seed++);
                const auto q = random_floats(sz(n_q * n), seed++);
                HalfBuf rows(h, 2);
                std::vector<float> want(sz(n_q * 50), 0.0f), got(sz(n_q * 50), -1.0f);
                ref_.dots_f16_f32(rows.data(), stride, n_rows, q.data(), n, n_q, n, want.data(),
                                  50);
                vk_.dots_f16_f32(rows.data(), stride, n_rows, q.data(), n, n_q, n, got.data(), 50);
                for (int64_t hh = 0; hh < n_q; ++hh) {
                    for (int64_t j = 0; j < n_rows; ++j) {
                        double abs_sum = 0;
                        const auto* r = reinterpret_cast<const uint16_t*>(
                            static_cast<const unsigned char*>(rows.data()) + j * stride);
                        for (int64_t i = 0; i < n; ++i) {
                            abs_sum +=
                                std::fabs(double(dwell_fp16_to_fp32(r[i])) * q[sz(hh * n + i)]);
                        }
                        ASSERT_NEAR(got[sz(hh * 50 + j)], want[sz(hh * 50 + j)],
                                    2.0 * (n + 1) * kU * abs_sum)
                            << "n=" << n << " heads=" << n_q << " rows=" << n_rows << " h=" << hh
                            << " j=" << j;
                    }
                    // Nothing written past the rows asked for.
                    ASSERT_EQ(got[sz(hh * 50 + n_rows)], -1.0f);
                }
            }
        }
    }
}

// Value rows shared by several heads' weights: bit-identical to one
// axpy_f16 per head.
TEST_P(VecMath, AxpyF16SeveralHeadsIsBitIdentical) {
    uint32_t seed = 800;
    for (int64_t n : {8, 16, 32, 48, 64, 65, 128}) {
        for (int64_t n_y : {1, 2, 4, 5, 8}) {
            for (int64_t n_rows : {1, 16, 23}) {
                const int64_t stride = n * 2 + 10;
                const auto h = random_halves(sz(n_rows * stride / 2 + 1), seed++);
                const auto a = random_floats(sz(n_y * 30), seed++);
                const auto y0 = random_floats(sz(n_y * n), seed++);
                HalfBuf rows(h, 4);
                std::vector<float> want = y0, got = y0;
                for (int64_t hh = 0; hh < n_y; ++hh) {
                    ref_.axpy_f16(a.data() + hh * 30, rows.data(), stride, n_rows,
                                  want.data() + hh * n, n);
                }
                vk_.axpy_f16_multi(a.data(), 30, rows.data(), stride, n_rows, got.data(), n, n_y,
                                   n);
                EXPECT_TRUE(bits_equal(got, want))
                    << "n=" << n << " heads=" << n_y << " rows=" << n_rows;
            }
        }
    }
}

// Random E4M3 codes, every finite one possible (the NaN codes excluded).
std::vector<uint8_t> random_fp8(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<uint8_t> c(n);
    for (auto& b : c) {
        b = static_cast<uint8_t>(byte(rng));
        if ((b & 0x7f) == 0x7f) --b;
    }
    return c;
}

// Element offsets into a Q8_0 row: block-aligned, inside the first block,
// at its last value, and past one block (attention head slices).
const int64_t kQ8Firsts[] = {0, 5, 8, 31, 32, 40};

// Q8_0 dots over a slice [first, first + n): against the scalar entry like
// the other dots, and the scalar entry against the values decoded in
// double (each block's float sum, then its scale, adds a rounding per block).
TEST_P(VecMath, DotQ8_0) {
    uint32_t seed = 1000;
    for (int64_t n : kLengths) {
        for (int64_t first : kQ8Firsts) {
            const int64_t n_blocks = (first + n + 31) / 32 + 1;
            const auto row = test::random_weight_rows(DWELL_Q8_0, 32 * n_blocks, 1, seed++);
            const auto x = test::ref_decode_row(DWELL_Q8_0, row.data(), 32 * n_blocks);
            const auto y = random_floats(sz(n), seed++, -3.0f, 3.0f);
            double exact = 0, abs_sum = 0;
            for (int64_t i = 0; i < n; ++i) {
                exact += x[sz(first + i)] * y[sz(i)];
                abs_sum += std::fabs(x[sz(first + i)] * y[sz(i)]);
            }
            for (size_t off : {0u, 1u, 3u}) {
                const test::OffsetBuffer bq(row, off);
                FloatBuf by(y, off);
                const float want = ref_.dot_q8_0_f32(bq.data(), first, by.data(), n);
                const float got = vk_.dot_q8_0_f32(bq.data(), first, by.data(), n);
                EXPECT_NEAR(want, exact, (n + 34) * kU * abs_sum)
                    << "n=" << n << " first=" << first;
                EXPECT_NEAR(got, want, 2.0 * (n + 34) * kU * abs_sum)
                    << "n=" << n << " first=" << first << " offset=" << off;
            }
        }
    }
}

TEST_P(VecMath, DotFp8) {
    uint32_t seed = 1100;
    for (int64_t n : kLengths) {
        const auto c = random_fp8(sz(n), seed++);
        const auto y = random_floats(sz(n), seed++, -3.0f, 3.0f);
        double exact = 0, abs_sum = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double v = dwell_fp8_e4m3_to_fp32(c[sz(i)]);
            exact += v * y[sz(i)];
            abs_sum += std::fabs(v * y[sz(i)]);
        }
        for (size_t off : {0u, 1u, 7u}) {
            const test::OffsetBuffer bc(c, off);
            FloatBuf by(y, off % 4);
            const float want = ref_.dot_fp8_f32(bc.data(), by.data(), n);
            const float got = vk_.dot_fp8_f32(bc.data(), by.data(), n);
            EXPECT_NEAR(want, exact, (n + 1) * kU * abs_sum) << "n=" << n;
            EXPECT_NEAR(got, want, 2.0 * (n + 1) * kU * abs_sum) << "n=" << n << " offset=" << off;
        }
        if (n == 0) continue;
        // A NaN code anywhere, vector body or tail, makes the dot NaN.
        for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
            auto bad = c;
            bad[sz(at)] = at % 2 ? 0xff : 0x7f;
            EXPECT_TRUE(std::isnan(vk_.dot_fp8_f32(bad.data(), y.data(), n)))
                << "n=" << n << " at=" << at;
        }
    }
}

// Every code through the vector loads and the tails: an axpy of weight 1
// onto -0 (the one start that keeps both zeros) leaves the decoded value
// itself, which must be the SDK decoder's bit for bit.
TEST_P(VecMath, Fp8DecodeIsExact) {
    std::vector<uint8_t> codes(256);
    for (int c = 0; c < 256; ++c) codes[sz(c)] = static_cast<uint8_t>(c);
    const float one = 1.0f;
    for (int64_t start : {0, 1, 3, 5}) {
        const int64_t n = 256 - start;
        std::vector<float> y(sz(n), -0.0f);
        vk_.axpy_fp8(&one, codes.data() + start, 0, 1, y.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            const auto c = static_cast<uint8_t>(start + i);
            const float want = dwell_fp8_e4m3_to_fp32(c);
            if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(y[sz(i)])) << "code " << int(c);
            } else {
                EXPECT_TRUE(bits_equal({y[sz(i)]}, {want}))
                    << "code " << int(c) << ": " << y[sz(i)];
            }
        }
    }
}

// As for f32/f16 rows: the same multiply (weight times block scale, then
// times the value) and add per element and row in every level. Padded,
// unaligned rows, slices starting inside a block.
TEST_P(VecMath, AxpyQ8_0AndFp8AreBitIdentical) {
    uint32_t seed = 1200;
    for (int64_t n : kLengths) {
        for (int64_t n_rows : {1, 3, 17}) {
            const auto y0 = random_floats(sz(n), seed++);
            const auto w = random_floats(sz(n_rows), seed++);
            for (int64_t first : kQ8Firsts) {
                const int64_t n_blocks = (first + n + 31) / 32;
                const int64_t stride = n_blocks * 34 + 5;
                std::vector<uint8_t> rows;
                for (int64_t j = 0; j < n_rows; ++j) {
                    const auto r = test::random_weight_rows(DWELL_Q8_0, 32 * n_blocks, 1, seed++);
                    rows.insert(rows.end(), r.begin(), r.end());
                    rows.insert(rows.end(), 5, 0xee);
                }
                const test::OffsetBuffer br(rows, 1);
                FloatBuf want(y0, 0), got(y0, 1);
                ref_.axpy_q8_0(w.data(), br.data(), stride, n_rows, first, want.data(), n);
                vk_.axpy_q8_0(w.data(), br.data(), stride, n_rows, first, got.data(), n);
                EXPECT_TRUE(bits_equal(got.vec(sz(n)), want.vec(sz(n))))
                    << "q8_0 n=" << n << " rows=" << n_rows << " first=" << first;
            }
            const int64_t stride = n + 3;
            const auto codes = random_fp8(sz(n_rows * stride), seed++);
            const test::OffsetBuffer bc(codes, 3);
            FloatBuf want(y0, 2), got(y0, 3);
            ref_.axpy_fp8(w.data(), bc.data(), stride, n_rows, want.data(), n);
            vk_.axpy_fp8(w.data(), bc.data(), stride, n_rows, got.data(), n);
            EXPECT_TRUE(bits_equal(got.vec(sz(n)), want.vec(sz(n))))
                << "fp8 n=" << n << " rows=" << n_rows;
        }
    }
}

// F16C / FCVT round to nearest even exactly like the SDK's converter,
// including overflow to inf, ties and the half subnormals.
TEST_P(VecMath, RoundF16IsBitIdentical) {
    std::vector<float> special = {
        0.0f,     -0.0f,    1.0f,     1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
        65504.0f, 65519.0f, 65520.0f, -70000.0f,          6.0e-8f,
        3.0e-8f,  2.9e-8f,  1.0e-5f,  -6.1035e-5f,        INFINITY,
        -INFINITY};
    uint32_t seed = 200;
    for (int64_t n : kLengths) {
        auto x = random_floats(static_cast<size_t>(n), seed++, -70000.0f, 70000.0f);
        const auto small = random_floats(static_cast<size_t>(n), seed++, -1e-4f, 1e-4f);
        for (int64_t i = 0; i < n; i += 2) x[sz(i)] = small[sz(i)];
        for (size_t i = 0; i < special.size() && i < x.size(); ++i) x[i] = special[i];
        FloatBuf bx(x, 1), want(x, 3), got(x, 2);
        ref_.round_f16(bx.data(), want.data(), n);
        vk_.round_f16(bx.data(), got.data(), n);
        EXPECT_TRUE(bits_equal(got.vec(sz(n)), want.vec(sz(n)))) << "n=" << n;
        vk_.round_f16(got.data(), got.data(), n);  // in place: rounding is idempotent
        EXPECT_TRUE(bits_equal(got.vec(sz(n)), want.vec(sz(n)))) << "in place n=" << n;
    }
}

TEST_P(VecMath, ScaleAddMulAreBitIdentical) {
    uint32_t seed = 300;
    for (int64_t n : kLengths) {
        const auto a = random_floats(static_cast<size_t>(n), seed++, -5.0f, 5.0f);
        const auto b = random_floats(static_cast<size_t>(n), seed++, -5.0f, 5.0f);
        FloatBuf ba(a, 1), bb(b, 2);
        std::vector<float> want(sz(n)), got(sz(n));
        auto same = [&] { return bits_equal(want, got); };
        ref_.scale(ba.data(), 0.123f, want.data(), n);
        vk_.scale(ba.data(), 0.123f, got.data(), n);
        EXPECT_TRUE(same()) << "scale n=" << n;
        ref_.add(ba.data(), bb.data(), want.data(), n);
        vk_.add(ba.data(), bb.data(), got.data(), n);
        EXPECT_TRUE(same()) << "add n=" << n;
        ref_.mul(ba.data(), bb.data(), want.data(), n);
        vk_.mul(ba.data(), bb.data(), got.data(), n);
        EXPECT_TRUE(same()) << "mul n=" << n;
        // In place (y is an input), as the ops run them.
        FloatBuf inplace(a, 1);
        vk_.mul(inplace.data(), bb.data(), inplace.data(), n);
        EXPECT_TRUE(bits_equal(inplace.vec(sz(n)), want)) << "in-place mul n=" << n;
    }
}

// Nonnegative float terms summed in double in another order: each sum is
// within n * 2^-53 of the exact one, relative (no cancellation).
TEST_P(VecMath, SumSquares) {
    uint32_t seed = 400;
    for (int64_t n : kLengths) {
        const auto x = random_floats(static_cast<size_t>(n), seed++, -30.0f, 30.0f);
        for (size_t off : {0u, 1u, 3u}) {
            FloatBuf bx(x, off);
            const double want = ref_.sum_squares(bx.data(), n);
            const double got = vk_.sum_squares(bx.data(), n);
            EXPECT_NEAR(got, want, 2.0 * (n + 1) * 0x1p-53 * want) << "n=" << n;
        }
    }
}

TEST_P(VecMath, MaxIsExact) {
    uint32_t seed = 500;
    for (int64_t n : kLengths) {
        // Every position in turn holds the maximum, tails included.
        for (int64_t at = 0; at < n; at += (n > 40 ? 7 : 1)) {
            auto x = random_floats(static_cast<size_t>(n), seed++, -1000.0f, -1.0f);
            x[sz(at)] = -0.5f;
            FloatBuf bx(x, 1);
            EXPECT_EQ(vk_.max(bx.data(), n), -0.5f) << "n=" << n << " at=" << at;
            EXPECT_EQ(vk_.max(bx.data(), n), ref_.max(bx.data(), n));
        }
    }
    EXPECT_EQ(vk_.max(nullptr, 0), -INFINITY);
    std::vector<float> all_inf(19, -INFINITY);
    EXPECT_EQ(vk_.max(all_inf.data(), 19), -INFINITY);
}

// The SIMD expf against exp in double over its whole range, finite results
// included down to the subnormals. vec_math_exp.hpp derives ~1.05 ulp for
// normal results; 2 ulp is the documented bound (plus one subnormal ulp,
// where the quantum is coarser than the relative error).
TEST_P(VecMath, ExpAccuracy) {
    std::vector<float> x;
    for (float v = -104.0f; v <= 89.0f; v += 0.0009765625f * 7.3f) x.push_back(v);
    for (float v = -0.5f; v <= 0.5f; v += 1.0f / 4096) x.push_back(v);
    const auto near_one = random_floats(4096, 1, -1e-3f, 1e-3f);
    x.insert(x.end(), near_one.begin(), near_one.end());
    for (float v : {88.72f, 88.7228f, 88.7229f, -87.33f, -87.34f, -103.9f, -103.97f})
        x.push_back(v);
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<float> y(x.size());
    const double sum = vk_.exp_sum(x.data(), 0.0f, y.data(), n);
    double max_ulps = 0, want_sum = 0;
    float worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double want = std::exp(static_cast<double>(x[i]));
        want_sum += y[i];
        const double e = ulps(y[i], want);
        if (e > max_ulps) {
            max_ulps = e;
            worst = x[i];
        }
    }
    EXPECT_LE(max_ulps, 2.0) << "worst at x=" << worst;
    EXPECT_DOUBLE_EQ(sum, want_sum);
    RecordProperty("max_ulps", std::to_string(max_ulps));

    // Edges: exact 1 at 0, overflow to inf, underflow to 0, NaN passes.
    const std::vector<float> edge = {0.0f,    -0.0f,    89.0f,     1000.0f, INFINITY,
                                     -104.0f, -1000.0f, -INFINITY, NAN};
    std::vector<float> ey(edge.size());
    vk_.exp_sum(edge.data(), 0.0f, ey.data(), static_cast<int64_t>(edge.size()));
    EXPECT_EQ(ey[0], 1.0f);
    EXPECT_EQ(ey[1], 1.0f);
    EXPECT_EQ(ey[2], INFINITY);
    EXPECT_EQ(ey[3], INFINITY);
    EXPECT_EQ(ey[4], INFINITY);
    EXPECT_EQ(ey[5], 0.0f);
    EXPECT_EQ(ey[6], 0.0f);
    EXPECT_EQ(ey[7], 0.0f);
    EXPECT_TRUE(std::isnan(ey[8]));
}

// Against the scalar entry (the C library's expf, within 1 ulp): values
// within 3 ulp, and the sums, of positive terms each off by at most 3 ulp
// (<= 3 * 2^-23 relative), within 3 * 2^-23 of the sum.
TEST_P(VecMath, ExpSum) {
    uint32_t seed = 600;
    for (int64_t n : kLengths) {
        const auto x = random_floats(static_cast<size_t>(n), seed++, -30.0f, 10.0f);
        FloatBuf bx(x, 1), want(x, 2), got(x, 3);
        const double ws = ref_.exp_sum(bx.data(), 2.5f, want.data(), n);
        const double gs = vk_.exp_sum(bx.data(), 2.5f, got.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            EXPECT_LE(ulps(got.data()[i], want.data()[i]), 3.0) << "n=" << n << " i=" << i;
        }
        EXPECT_NEAR(gs, ws, 3 * 0x1p-23 * ws) << "n=" << n;
        // In place, as softmax runs it.
        vk_.exp_sum(bx.data(), 2.5f, bx.data(), n);
        EXPECT_TRUE(bits_equal(bx.vec(sz(n)), got.vec(sz(n)))) << "in place n=" << n;
    }
}

// silu = x / (1 + e): e's <= 2 ulp become <= 2 ulp of 1 + e (e / (1 + e) <
// 1) plus its rounding and the division's, about 3 ulp from the exact
// value for the SIMD side and ~2 for the scalar one; swiglu adds a
// multiply. No cancellation anywhere, so the bounds are relative to the
// result.
// GELU against tanh's form in double, the independent reference: the
// x / (1 + exp(-2u)) form keeps a few ulp where 0.5 x (1 + tanh(u)) would
// cancel (negative x), and each level against the scalar table.
TEST_P(VecMath, Gelu) {
    uint32_t seed = 900;
    for (int64_t n : kLengths) {
        auto x = random_floats(static_cast<size_t>(n), seed++, -6.0f, 6.0f);
        const auto wide = random_floats(static_cast<size_t>(n), seed++, -60.0f, 60.0f);
        for (int64_t i = 0; i < n; i += 5) x[sz(i)] = wide[sz(i)];
        FloatBuf bx(x, 1);
        std::vector<float> want(sz(n)), got(sz(n));
        ref_.gelu(bx.data(), want.data(), n);
        vk_.gelu(bx.data(), got.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            const double v = x[sz(i)];
            const double u = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
            const double exact = 0.5 * v * (1.0 + std::tanh(u));
            EXPECT_LE(ulps(got[sz(i)], want[sz(i)]), 5.0) << "gelu x=" << v << " n=" << n;
            // float rounding of u, amplified by |x| and |u|.
            EXPECT_NEAR(got[sz(i)], exact,
                        1e-6 * std::max(1.0, std::fabs(v)) * std::max(1.0, std::fabs(u)))
                << "gelu x=" << v;
        }
        vk_.gelu(bx.data(), bx.data(), n);
        EXPECT_TRUE(bits_equal(bx.vec(sz(n)), got)) << "in place n=" << n;
    }
    // exp(-2u) overflows to inf for very negative x (gelu -> -0) and
    // vanishes for large x (gelu -> x).
    const std::vector<float> edge = {-100.0f, -30.0f, 30.0f, 0.0f, 1e20f, -1e20f};
    std::vector<float> ey(edge.size());
    vk_.gelu(edge.data(), ey.data(), static_cast<int64_t>(edge.size()));
    EXPECT_EQ(ey[0], 0.0f);
    EXPECT_EQ(ey[1], 0.0f);
    EXPECT_EQ(ey[2], 30.0f);
    EXPECT_EQ(ey[3], 0.0f);
    EXPECT_EQ(ey[4], 1e20f);
    EXPECT_EQ(ey[5], 0.0f);
}

TEST_P(VecMath, SiluAndSwiglu) {
    uint32_t seed = 700;
    for (int64_t n : kLengths) {
        auto x = random_floats(static_cast<size_t>(n), seed++, -12.0f, 12.0f);
        const auto wide = random_floats(static_cast<size_t>(n), seed++, -100.0f, 100.0f);
        for (int64_t i = 0; i < n; i += 3) x[sz(i)] = wide[sz(i)];
        const auto up = random_floats(static_cast<size_t>(n), seed++, -2.0f, 2.0f);
        FloatBuf bx(x, 1), bu(up, 2);
        std::vector<float> want(sz(n)), got(sz(n));
        ref_.silu(bx.data(), want.data(), n);
        vk_.silu(bx.data(), got.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            EXPECT_LE(ulps(got[sz(i)], want[sz(i)]), 5.0) << "silu x=" << x[sz(i)] << " n=" << n;
        }
        ref_.swiglu(bx.data(), bu.data(), want.data(), n);
        vk_.swiglu(bx.data(), bu.data(), got.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            EXPECT_LE(ulps(got[sz(i)], want[sz(i)]), 6.0) << "swiglu x=" << x[sz(i)] << " n=" << n;
        }
        // In place over the gate, as the op may be run.
        vk_.swiglu(bx.data(), bu.data(), bx.data(), n);
        EXPECT_TRUE(bits_equal(bx.vec(sz(n)), got)) << "in place n=" << n;
    }
    // Large |x|: exp(-x) overflows to inf and silu to -0, or vanishes.
    const std::vector<float> edge = {-100.0f, -89.5f, 100.0f, 0.0f};
    std::vector<float> ey(edge.size());
    vk_.silu(edge.data(), ey.data(), 4);
    EXPECT_EQ(ey[0], 0.0f);
    EXPECT_EQ(ey[1], 0.0f);
    EXPECT_EQ(ey[2], 100.0f);
    EXPECT_EQ(ey[3], 0.0f);
}

TEST_P(VecMath, RopeIsBitIdentical) {
    uint32_t seed = 800;
    for (int64_t pairs : kLengths) {
        const size_t n = 2 * static_cast<size_t>(pairs);
        const auto x = random_floats(n, seed++, -4.0f, 4.0f);
        const auto angle = random_floats(static_cast<size_t>(pairs), seed++, -50.0f, 50.0f);
        std::vector<float> c(angle.size()), s(angle.size());
        for (size_t i = 0; i < angle.size(); ++i) {
            c[i] = std::cos(angle[i]);
            s[i] = std::sin(angle[i]);
        }
        FloatBuf bc(c, 1), bs(s, 2), bx(x, 3);
        for (bool neox : {false, true}) {
            const auto ref_fn = neox ? ref_.rope_neox : ref_.rope_norm;
            const auto fn = neox ? vk_.rope_neox : vk_.rope_norm;
            std::vector<float> want(n), got(n);
            ref_fn(bx.data(), bc.data(), bs.data(), want.data(), pairs);
            fn(bx.data(), bc.data(), bs.data(), got.data(), pairs);
            EXPECT_TRUE(bits_equal(got, want)) << (neox ? "neox" : "norm") << " pairs=" << pairs;
            FloatBuf inplace(x, 1);
            fn(inplace.data(), bc.data(), bs.data(), inplace.data(), pairs);
            EXPECT_TRUE(bits_equal(inplace.vec(n), want))
                << (neox ? "neox" : "norm") << " in place pairs=" << pairs;
        }
    }
}

// The composed softmax: the scalar table must round exactly as the old
// scalar softmax_row; SIMD levels within the exp bound (3 ulp per exp, the
// normalising sum within 3 * 2^-23, one more rounding in the scale).
TEST_P(VecMath, SoftmaxRow) {
    uint32_t seed = 900;
    for (int64_t n : kLengths) {
        if (n == 0) continue;
        const auto x = random_floats(static_cast<size_t>(n), seed++, -20.0f, 20.0f);
        std::vector<float> old(sz(n)), want(sz(n)), got(sz(n));
        cpu::softmax_row(x.data(), old.data(), n);
        softmax_row(ref_, x.data(), want.data(), n);
        EXPECT_TRUE(bits_equal(want, old)) << "scalar table vs activation_math, n=" << n;
        softmax_row(vk_, x.data(), got.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            EXPECT_LE(ulps(got[sz(i)], want[sz(i)]), 8.0) << "n=" << n << " i=" << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Levels, VecMath,
                         ::testing::Values(SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512,
                                           SimdLevel::Neon, SimdLevel::NeonDotprod,
                                           SimdLevel::NeonI8mm),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

}  // namespace
}  // namespace dwell::cpu
