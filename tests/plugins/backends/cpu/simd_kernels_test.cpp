// SIMD dots against their scalar references: integer K-quant dots must be
// bit-identical (exact int32 sums, same float epilogue); f32-activation dots
// may differ only by summation order, so they are compared relative to
// sum |w * x|, the scale float rounding error grows with (relative to the
// result itself, cancellation could make any reordering look wrong).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cpu_test_graph.hpp"
#include "quant/activation_quant.hpp"
#include "simd/simd_dots.hpp"
#include "simd/weight_rows.hpp"
#include "test_paths.hpp"

namespace dwell::cpu {
namespace {

using test::OffsetBuffer;
using test::random_floats;
using test::random_weight_rows;

bool level_supported(SimdLevel level) {
    return simd_level_supported(level, detect_cpu_features());
}

// Element counts: one block, whole multiples, odd block counts, and for F16
// lengths that leave a scalar tail.
const int64_t kBlockCounts[] = {1, 2, 3, 7, 16, 17};
const size_t kOffsets[] = {0, 1, 3};

double abs_dot(const void* row, dwell_dtype t, const float* x, int64_t n) {
    std::vector<float> w(static_cast<size_t>(n));
    dequantize_row(t, row, w.data(), n);
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::fabs(double(w[size_t(i)]) * x[i]);
    return s;
}

void check_f32_dot(SimdLevel level, dwell_dtype t, int64_t block, DotF32Fn DotKernels::*fn) {
    if (!level_supported(level)) {
        GTEST_SKIP() << "CPU lacks " << simd_level_name(level);
    }
    const DotKernels simd = dot_kernels_for(level);
    const DotKernels scalar = dot_kernels_for(SimdLevel::Scalar);
    ASSERT_EQ(simd.level, level);
    uint32_t seed = 1;
    for (int64_t blocks : kBlockCounts) {
        for (int64_t extra : {int64_t{0}, int64_t{5}}) {
            // Element formats also meet lengths that leave a scalar tail.
            if (extra != 0 && t != DWELL_F16 && t != DWELL_F32 && t != DWELL_BF16) continue;
            const int64_t n = blocks * block + extra;
            const auto bytes = random_weight_rows(t, n, 1, seed++);
            const auto x = random_floats(static_cast<size_t>(n), seed++);
            for (size_t off : kOffsets) {
                OffsetBuffer row(bytes, off);
                const float want = (scalar.*fn)(row.data(), x.data(), n);
                const float got = (simd.*fn)(row.data(), x.data(), n);
                const double scale = abs_dot(row.data(), t, x.data(), n);
                EXPECT_NEAR(got, want, 1e-5 * scale)
                    << dwell_dtype_name(t) << " n=" << n << " offset=" << off;
            }
        }
    }
}

// Element formats at every length 0..67 (every remainder of the widest
// unrolled step, 64 elements, so each tail width), a whole number of steps
// and a long odd row, with misaligned rows and activations.
void check_element_dot(SimdLevel level, dwell_dtype t, DotF32Fn DotKernels::*fn) {
    if (!level_supported(level)) {
        GTEST_SKIP() << "CPU lacks " << simd_level_name(level);
    }
    const DotKernels simd = dot_kernels_for(level);
    const DotKernels scalar = dot_kernels_for(SimdLevel::Scalar);
    ASSERT_EQ(simd.level, level);
    std::vector<int64_t> lengths;
    for (int64_t n = 0; n <= 67; ++n) lengths.push_back(n);
    lengths.push_back(256);
    lengths.push_back(4096 + 3);
    uint32_t seed = 500;
    for (int64_t n : lengths) {
        const auto bytes = random_weight_rows(t, n, 1, seed++);
        const auto xs = random_floats(static_cast<size_t>(n) + 1, seed++);
        for (size_t off : {size_t{0}, size_t{1}, size_t{2}, size_t{3}}) {
            OffsetBuffer row(bytes, off);
            for (size_t xoff : {size_t{0}, size_t{1}}) {
                const float* x = xs.data() + xoff;
                const float want = (scalar.*fn)(row.data(), x, n);
                const float got = (simd.*fn)(row.data(), x, n);
                const double scale = abs_dot(row.data(), t, x, n);
                EXPECT_NEAR(got, want, 1e-5 * scale)
                    << dwell_dtype_name(t) << " n=" << n << " offset=" << off << " x+" << xoff;
            }
        }
    }
}

// A row that ends a mapped file is followed by nothing: rows and
// activations that end exactly at an inaccessible page must not fault, so
// tails may not read whole vectors past n.
void check_element_dot_at_page_end(SimdLevel level, dwell_dtype t, DotF32Fn DotKernels::*fn) {
    if (!level_supported(level)) {
        GTEST_SKIP() << "CPU lacks " << simd_level_name(level);
    }
    const DotKernels simd = dot_kernels_for(level);
    const DotKernels scalar = dot_kernels_for(SimdLevel::Scalar);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    auto* map = static_cast<unsigned char*>(
        mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(map, MAP_FAILED);
    // Pages 1 and 3 are guards; the row ends page 0, the activations page 2.
    ASSERT_EQ(mprotect(map + page, page, PROT_NONE), 0);
    ASSERT_EQ(mprotect(map + 3 * page, page, PROT_NONE), 0);
    uint32_t seed = 900;
    for (int64_t n = 1; n <= 67; ++n) {
        const auto bytes = random_weight_rows(t, n, 1, seed++);
        const auto xs = random_floats(static_cast<size_t>(n), seed++);
        unsigned char* row = map + page - bytes.size();
        std::memcpy(row, bytes.data(), bytes.size());
        auto* x = reinterpret_cast<float*>(map + 3 * page) - n;
        std::memcpy(x, xs.data(), xs.size() * sizeof(float));
        const float want = (scalar.*fn)(row, x, n);
        const float got = (simd.*fn)(row, x, n);
        EXPECT_NEAR(got, want, 1e-5 * abs_dot(row, t, x, n)) << dwell_dtype_name(t) << " n=" << n;
    }
    munmap(map, 4 * page);
}

// One dot kernel of `level` against the scalar one, bit for bit: random
// rows of type t over kBlockCounts blocks of `qk` values at every offset,
// wide-range activations (some blocks at the int8 extremes) in `format`.
template <typename ActBlock, typename Fn>
void check_dot(SimdLevel level, dwell_dtype t, Fn DotKernels::*fn, int64_t qk, ActFormat format,
               uint32_t seed) {
    if (!level_supported(level)) GTEST_SKIP() << "CPU lacks " << simd_level_name(level);
    const DotKernels simd = dot_kernels_for(level);
    const DotKernels scalar = dot_kernels_for(SimdLevel::Scalar);
    for (int64_t blocks : kBlockCounts) {
        const int64_t n = blocks * qk;
        auto bytes = random_weight_rows(t, n, 1, seed++);
        if (t == DWELL_Q8_0 && blocks > 1) {
            // A hostile file's -128 codes, which a sign trick would get wrong.
            auto* b1 = reinterpret_cast<dwell_block_q8_0*>(bytes.data()) + 1;
            for (auto& q : b1->qs) q = -128;
        }
        const auto xf = random_floats(static_cast<size_t>(n), seed++, -4.0f, 3.0f);
        ActivationRows acts(format, n, 1);
        acts.set(0, xf.data());
        const auto* x = static_cast<const ActBlock*>(acts.row(0));
        for (size_t off : kOffsets) {
            OffsetBuffer row(bytes, off);
            const float want = (scalar.*fn)(row.data(), x, n);
            const float got = (simd.*fn)(row.data(), x, n);
            EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0)
                << dwell_dtype_name(t) << " n=" << n << " offset=" << off << ": " << got << " vs "
                << want;
        }
    }
}

void check_q8_K_dot(SimdLevel level, dwell_dtype t, DotQ8KFn DotKernels::*fn) {
    check_dot<ActBlockQ8_K>(level, t, fn, DWELL_QK_K, ActFormat::Q8_K, 100);
}

void check_q8_0_dot(SimdLevel level, dwell_dtype t, DotQ80Fn DotKernels::*fn) {
    check_dot<dwell_block_q8_0>(level, t, fn, DWELL_QK8_0, ActFormat::Q8_0, 300);
}

// Extreme codes and activations: all-max nibbles against -128/127 bytes,
// where a saturating 16-bit step would show.
void check_k_quant_extremes(SimdLevel level) {
    if (!level_supported(level)) GTEST_SKIP() << "CPU lacks " << simd_level_name(level);
    const DotKernels simd = dot_kernels_for(level);
    const DotKernels scalar = dot_kernels_for(SimdLevel::Scalar);
    alignas(ActBlockQ8_K) ActBlockQ8_K x{};
    x.d = 0.5f;
    for (int i = 0; i < DWELL_QK_K; ++i) x.qs[i] = static_cast<int8_t>(i % 2 ? 127 : -128);
    for (int s = 0; s < DWELL_QK_K / 16; ++s) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += x.qs[16 * s + i];
        x.bsums[s] = static_cast<int16_t>(sum);
    }
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x5a}}) {
        dwell_block_q4_K q4{};
        std::memset(&q4, fill, sizeof q4);
        q4.d = dwell_fp32_to_fp16(0.01f);
        q4.dmin = dwell_fp32_to_fp16(0.02f);
        EXPECT_EQ(simd.q4_K_q8_K(&q4, &x, DWELL_QK_K), scalar.q4_K_q8_K(&q4, &x, DWELL_QK_K));
        dwell_block_q6_K q6{};
        std::memset(&q6, fill, sizeof q6);
        for (auto& sc : q6.scales) sc = fill == 0xff ? int8_t{-128} : int8_t{127};
        q6.d = dwell_fp32_to_fp16(0.01f);
        EXPECT_EQ(simd.q6_K_q8_K(&q6, &x, DWELL_QK_K), scalar.q6_K_q8_K(&q6, &x, DWELL_QK_K));
    }
}

// x86-64: Avx512 has its own element-format dots and shares the integer
// ones with Avx2, so both tables are checked entry by entry.
class X86Levels : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(X86Levels, F16) {
    check_f32_dot(GetParam(), DWELL_F16, 32, &DotKernels::f16_f32);
}

TEST_P(X86Levels, F32) {
    check_f32_dot(GetParam(), DWELL_F32, 32, &DotKernels::f32_f32);
}

TEST_P(X86Levels, BF16) {
    check_f32_dot(GetParam(), DWELL_BF16, 32, &DotKernels::bf16_f32);
}

TEST_P(X86Levels, F16AllLengths) {
    check_element_dot(GetParam(), DWELL_F16, &DotKernels::f16_f32);
}

TEST_P(X86Levels, F32AllLengths) {
    check_element_dot(GetParam(), DWELL_F32, &DotKernels::f32_f32);
}

TEST_P(X86Levels, BF16AllLengths) {
    check_element_dot(GetParam(), DWELL_BF16, &DotKernels::bf16_f32);
}

TEST_P(X86Levels, ElementDotsStopAtRowEnd) {
    check_element_dot_at_page_end(GetParam(), DWELL_F16, &DotKernels::f16_f32);
    check_element_dot_at_page_end(GetParam(), DWELL_F32, &DotKernels::f32_f32);
    check_element_dot_at_page_end(GetParam(), DWELL_BF16, &DotKernels::bf16_f32);
}

TEST_P(X86Levels, Q8_0) {
    check_f32_dot(GetParam(), DWELL_Q8_0, DWELL_QK8_0, &DotKernels::q8_0_f32);
}

TEST_P(X86Levels, Q4_0) {
    check_f32_dot(GetParam(), DWELL_Q4_0, DWELL_QK4_0, &DotKernels::q4_0_f32);
}

TEST_P(X86Levels, Q4_0ByQ8_0IsBitIdentical) {
    check_q8_0_dot(GetParam(), DWELL_Q4_0, &DotKernels::q4_0_q8_0);
}

TEST_P(X86Levels, Q8_0ByQ8_0IsBitIdentical) {
    check_q8_0_dot(GetParam(), DWELL_Q8_0, &DotKernels::q8_0_q8_0);
}

TEST_P(X86Levels, Q4_KIsBitIdentical) {
    check_q8_K_dot(GetParam(), DWELL_Q4_K, &DotKernels::q4_K_q8_K);
}

TEST_P(X86Levels, Q6_KIsBitIdentical) {
    check_q8_K_dot(GetParam(), DWELL_Q6_K, &DotKernels::q6_K_q8_K);
}

TEST_P(X86Levels, KQuantExtremes) {
    check_k_quant_extremes(GetParam());
}

INSTANTIATE_TEST_SUITE_P(SimdKernels, X86Levels,
                         ::testing::Values(SimdLevel::Avx2, SimdLevel::Avx512),
                         [](const auto& info) { return simd_level_name(info.param); });

// A table that silently kept the AVX2 entries would pass X86Levels too.
TEST(SimdKernels, Avx512TableHasAvx512ElementDots) {
#if defined(__x86_64__)
    const DotKernels k = dot_kernels_for(SimdLevel::Avx512);
    EXPECT_EQ(k.level, SimdLevel::Avx512);
    EXPECT_EQ(k.f32_f32, &dot_f32_f32_avx512);
    EXPECT_EQ(k.f16_f32, &dot_f16_f32_avx512);
    EXPECT_EQ(k.bf16_f32, &dot_bf16_f32_avx512);
    EXPECT_EQ(k.q4_K_q8_K, &dot_q4_K_q8_K_avx2);
    EXPECT_EQ(dot_kernels_for(SimdLevel::Avx2).f16_f32, &dot_f16_f32_avx2);
#else
    GTEST_SKIP() << "not x86-64";
#endif
}

// aarch64: every level has its own table entries (Neon: widening
// multiplies; NeonDotprod and NeonI8mm: SDOT for the K-quant dots).
class NeonLevels : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(NeonLevels, F16) {
    check_f32_dot(GetParam(), DWELL_F16, 32, &DotKernels::f16_f32);
}

TEST_P(NeonLevels, F32) {
    check_f32_dot(GetParam(), DWELL_F32, 32, &DotKernels::f32_f32);
}

TEST_P(NeonLevels, BF16) {
    check_f32_dot(GetParam(), DWELL_BF16, 32, &DotKernels::bf16_f32);
}

TEST_P(NeonLevels, Q8_0) {
    check_f32_dot(GetParam(), DWELL_Q8_0, DWELL_QK8_0, &DotKernels::q8_0_f32);
}

TEST_P(NeonLevels, Q4_0) {
    check_f32_dot(GetParam(), DWELL_Q4_0, DWELL_QK4_0, &DotKernels::q4_0_f32);
}

TEST_P(NeonLevels, Q4_KIsBitIdentical) {
    check_q8_K_dot(GetParam(), DWELL_Q4_K, &DotKernels::q4_K_q8_K);
}

TEST_P(NeonLevels, Q6_KIsBitIdentical) {
    check_q8_K_dot(GetParam(), DWELL_Q6_K, &DotKernels::q6_K_q8_K);
}

TEST_P(NeonLevels, KQuantExtremes) {
    check_k_quant_extremes(GetParam());
}

INSTANTIATE_TEST_SUITE_P(SimdKernels, NeonLevels,
                         ::testing::Values(SimdLevel::Neon, SimdLevel::NeonDotprod,
                                           SimdLevel::NeonI8mm),
                         [](const auto& info) { return simd_level_name(info.param); });

// Every aarch64 Linux CPU has Advanced SIMD; the rest depends on the core
// (qemu -cpu max has them all), so it is only reported.
TEST(SimdKernels, DetectsAarch64Features) {
#if defined(__aarch64__)
    const CpuFeatures f = detect_cpu_features();
    EXPECT_TRUE(f.neon);
    std::printf("neon %d dotprod %d i8mm %d fp16 %d: best level %s\n", f.neon, f.dotprod, f.i8mm,
                f.fp16, simd_level_name(best_simd_level(f)));
#else
    GTEST_SKIP() << "not aarch64";
#endif
}

TEST(SimdKernels, EnvironmentSelectsLevel) {
    CpuFeatures all;
    all.avx2 = all.fma = all.f16c = true;
    all.avx512f = all.avx512bw = all.avx512vl = all.avx512vnni = true;
    EXPECT_EQ(select_simd_level("scalar", all), SimdLevel::Scalar);
    EXPECT_EQ(select_simd_level("scalar", CpuFeatures{}), SimdLevel::Scalar);
    // A request the CPU cannot honour falls back to what it has.
    EXPECT_EQ(select_simd_level("avx2", CpuFeatures{}), SimdLevel::Scalar);
    EXPECT_EQ(select_simd_level("avx512", CpuFeatures{}), SimdLevel::Scalar);
    EXPECT_EQ(select_simd_level("dotprod", CpuFeatures{}), SimdLevel::Scalar);
#if defined(__aarch64__)
    CpuFeatures arm;
    arm.neon = arm.dotprod = arm.i8mm = arm.fp16 = true;
    EXPECT_EQ(select_simd_level(nullptr, arm), SimdLevel::NeonI8mm);
    EXPECT_EQ(select_simd_level("neon", arm), SimdLevel::Neon);
    EXPECT_EQ(select_simd_level("dotprod", arm), SimdLevel::NeonDotprod);
    EXPECT_EQ(select_simd_level("avx2", arm), SimdLevel::NeonI8mm);  // not this architecture
    CpuFeatures no_i8mm = arm;
    no_i8mm.i8mm = false;
    EXPECT_EQ(select_simd_level(nullptr, no_i8mm), SimdLevel::NeonDotprod);
    EXPECT_EQ(select_simd_level("i8mm", no_i8mm), SimdLevel::NeonDotprod);
    CpuFeatures no_dotprod = arm;
    no_dotprod.dotprod = false;
    EXPECT_EQ(select_simd_level(nullptr, no_dotprod), SimdLevel::Neon);
    EXPECT_EQ(select_simd_level(nullptr, CpuFeatures{}), SimdLevel::Scalar);
    // x86 flags mean nothing here.
    CpuFeatures x86;
    x86.avx2 = x86.fma = x86.f16c = true;
    EXPECT_EQ(select_simd_level(nullptr, x86), SimdLevel::Scalar);
#endif
#if defined(__x86_64__)
    EXPECT_EQ(select_simd_level(nullptr, all), SimdLevel::Avx512);
    EXPECT_EQ(select_simd_level("avx2", all), SimdLevel::Avx2);
    EXPECT_EQ(select_simd_level("i8mm", all), SimdLevel::Avx512);  // not this architecture
    CpuFeatures no_vnni = all;
    no_vnni.avx512vnni = false;
    EXPECT_EQ(select_simd_level(nullptr, no_vnni), SimdLevel::Avx2);
    CpuFeatures no_f16c = all;
    no_f16c.f16c = false;
    EXPECT_EQ(select_simd_level(nullptr, no_f16c), SimdLevel::Scalar);
#endif
    const DotKernels scalar = dot_kernels_for(SimdLevel::Scalar);
    EXPECT_EQ(scalar.level, SimdLevel::Scalar);
    EXPECT_EQ(scalar.q4_0_f32, &dot_q4_0_f32_scalar);
    EXPECT_EQ(scalar.q8_0_f32, &dot_q8_0_f32_scalar);
    EXPECT_EQ(scalar.f16_f32, &dot_f16_f32_scalar);
    EXPECT_EQ(scalar.q4_K_q8_K, &dot_q4_K_q8_K_scalar);
    EXPECT_EQ(scalar.q6_K_q8_K, &dot_q6_K_q8_K_scalar);
    EXPECT_EQ(scalar.q4_0_q8_0, &dot_q4_0_q8_0_scalar);
    EXPECT_EQ(scalar.q8_0_q8_0, &dot_q8_0_q8_0_scalar);
}

// A value the CPU cannot honour is one line naming the variable, the values
// accepted on this CPU and the level used; accepted values and an unset
// variable say nothing.
TEST(SimdKernels, BadEnvironmentValueWarningNamesTheAcceptedValues) {
    const CpuFeatures none{};
    EXPECT_EQ(simd_env_warning(nullptr, none), "");
    EXPECT_EQ(simd_env_warning("", none), "");
    EXPECT_EQ(simd_env_warning("scalar", none), "");
    EXPECT_EQ(simd_env_warning("bogus", none),
              "DWELL_CPU_SIMD=bogus is not a SIMD level (accepted: scalar); using scalar");
    EXPECT_EQ(simd_env_warning("bad\x01\n", none).find('\n'), std::string::npos);
#if defined(__x86_64__)
    EXPECT_EQ(simd_env_warning("avx512", none),
              "DWELL_CPU_SIMD=avx512 is a level this CPU cannot run (accepted: scalar); using "
              "scalar");
    CpuFeatures avx2{};
    avx2.avx2 = avx2.fma = avx2.f16c = true;
    EXPECT_EQ(simd_env_warning("avx2", avx2), "");
    EXPECT_EQ(simd_env_warning("neon", avx2),
              "DWELL_CPU_SIMD=neon is a level this CPU cannot run (accepted: scalar, avx2); using "
              "avx2");
    EXPECT_EQ(simd_description(SimdLevel::Avx2, avx2), "CPU backend: avx2 kernels");
    EXPECT_EQ(simd_description(SimdLevel::Scalar, avx2),
              "CPU backend: scalar kernels (DWELL_CPU_SIMD; this CPU runs up to avx2)");
#endif
}

// The process-wide table honours DWELL_CPU_SIMD as this process saw it.
TEST(SimdKernels, ProcessTableFollowsEnvironment) {
    const char* env = std::getenv("DWELL_CPU_SIMD");
    const SimdLevel want = select_simd_level(env, detect_cpu_features());
    EXPECT_EQ(dot_kernels().level, want);
    if (env != nullptr && std::string_view(env) == "scalar") {
        EXPECT_EQ(dot_kernels().q4_0_f32, &dot_q4_0_f32_scalar);
    }
}

// DWELL_CPU_SIMD=scalar really reaches the process-wide table: checked in a
// re-executed child (threadsafe death-test style), where the table has not
// been initialised yet.
TEST(SimdKernels, ScalarOverrideForcesScalarPath) {
    if (const auto emulator = ::dwell::test::emulator_prefix(); !emulator.empty()) {
        // Without binfmt_misc the death test's re-execution of this binary
        // fails; run ProcessTableFollowsEnvironment in a fresh copy through
        // the emulator instead, which checks the same with the variable set.
        std::string cmd = "DWELL_CPU_SIMD=scalar";
        for (const auto& w : emulator) cmd += " '" + w + "'";
        cmd += " '" + std::filesystem::read_symlink("/proc/self/exe").string() +
               "' --gtest_filter=SimdKernels.ProcessTableFollowsEnvironment 2>&1";
        FILE* p = popen(cmd.c_str(), "r");
        ASSERT_NE(p, nullptr) << cmd;
        std::string out;
        std::array<char, 512> buf{};
        while (fgets(buf.data(), buf.size(), p)) out += buf.data();
        EXPECT_EQ(pclose(p), 0) << cmd << "\n" << out;
        EXPECT_NE(out.find("[  PASSED  ] 1 test."), std::string::npos) << cmd << "\n" << out;
        return;
    }
    ::testing::FLAGS_gtest_death_test_style = "threadsafe";
    const char* old = std::getenv("DWELL_CPU_SIMD");
    const std::string saved = old ? old : "";
    setenv("DWELL_CPU_SIMD", "scalar", 1);
    EXPECT_EXIT(
        {
            const DotKernels& k = dot_kernels();
            const bool ok = k.level == SimdLevel::Scalar && k.q4_0_f32 == &dot_q4_0_f32_scalar &&
                            k.q4_K_q8_K == &dot_q4_K_q8_K_scalar;
            std::exit(ok ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
    if (old) {
        setenv("DWELL_CPU_SIMD", saved.c_str(), 1);
    } else {
        unsetenv("DWELL_CPU_SIMD");
    }
}

}  // namespace
}  // namespace dwell::cpu
