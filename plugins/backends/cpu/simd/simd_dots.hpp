// The hot weight-row dots, chosen once per process by CPU features: scalar
// reference versions (always present) and x86-64 SIMD versions compiled in
// their own translation units with per-file target flags, so the plugin
// still loads on any x86-64 and builds elsewhere.
//
// Results contract: the integer K-quant dots return bit-identical results to
// the scalar ones (same exact int32 block sums, same float epilogue); the
// f32-activation dots differ only by float summation order.
//
// DWELL_CPU_SIMD=scalar|avx2|avx512|neon|dotprod|i8mm overrides the choice
// (for testing and benchmarking); a level the CPU lacks falls back to the
// best it has.
//
// Thread-safety: dot_kernels() initialises once (function-local static) and
// is immutable afterwards. Ownership: callers own every buffer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "host/cpu_features.hpp"
#include "quant/activation_quant.hpp"

namespace dwell::cpu {

// Levels of one architecture are ordered, each implying the ones before it:
// x86-64 Avx2 (AVX2+FMA+F16C) < Avx512 (F, BW, VL and VNNI); aarch64 Neon <
// NeonDotprod (SDOT) < NeonI8mm (SMMLA). Levels of the other architecture
// are never supported.
enum class SimdLevel { Scalar, Avx2, Avx512, Neon, NeonDotprod, NeonI8mm };

const char* simd_level_name(SimdLevel level);

// True if this CPU (per `f`) can run kernels of `level`.
bool simd_level_supported(SimdLevel level, const CpuFeatures& f);

using DotF32Fn = float (*)(const void* row, const float* x, int64_t n);
using DotQ8KFn = float (*)(const void* row, const ActBlockQ8_K* x, int64_t n);
using DotQ80Fn = float (*)(const void* row, const dwell_block_q8_0* x, int64_t n);

struct DotKernels {
    SimdLevel level = SimdLevel::Scalar;
    DotF32Fn f32_f32 = nullptr;
    DotF32Fn f16_f32 = nullptr;
    DotF32Fn bf16_f32 = nullptr;
    DotF32Fn q8_0_f32 = nullptr;
    DotF32Fn q4_0_f32 = nullptr;
    DotQ8KFn q4_K_q8_K = nullptr;
    DotQ8KFn q6_K_q8_K = nullptr;
    // Q4_0 / Q8_0 rows against Q8_0 activations: the row dots of the
    // shapes the blocked GEMM does not tile (EXPERT_MATMUL's rows). Exact
    // int32 block sums and the scalar epilogue, so bit-identical to it.
    DotQ80Fn q4_0_q8_0 = nullptr;
    DotQ80Fn q8_0_q8_0 = nullptr;
};

// The best level the features allow (only levels that have kernels).
SimdLevel best_simd_level(const CpuFeatures& f);

// The level to use given DWELL_CPU_SIMD's value (nullptr when unset): the
// request if the CPU supports it, else the best supported one. Unknown
// values are ignored.
SimdLevel select_simd_level(const char* env, const CpuFeatures& f);

// "" when DWELL_CPU_SIMD (`env`, nullptr or "" when unset) names a level
// this CPU runs; else one line naming the variable, the value, the values
// accepted here and the level used instead.
std::string simd_env_warning(const char* env, const CpuFeatures& f);

// The plugin's description: which level runs, and why when it is not the best.
std::string simd_description(SimdLevel running, const CpuFeatures& f);

// The table for a level, which must be supported by this CPU.
DotKernels dot_kernels_for(SimdLevel level);

// The process-wide table: select_simd_level(getenv("DWELL_CPU_SIMD"),
// detect_cpu_features()), evaluated on first use.
const DotKernels& dot_kernels();

// Scalar references (weight_rows.cpp / integer_dot.cpp).
float dot_f32_f32_scalar(const void* row, const float* x, int64_t n);
float dot_f16_f32_scalar(const void* row, const float* x, int64_t n);
float dot_bf16_f32_scalar(const void* row, const float* x, int64_t n);
float dot_q8_0_f32_scalar(const void* row, const float* x, int64_t n);
float dot_q4_0_f32_scalar(const void* row, const float* x, int64_t n);
float dot_q4_K_q8_K_scalar(const void* row, const ActBlockQ8_K* x, int64_t n);
float dot_q6_K_q8_K_scalar(const void* row, const ActBlockQ8_K* x, int64_t n);
float dot_q4_0_q8_0_scalar(const void* row, const dwell_block_q8_0* x, int64_t n);
float dot_q8_0_q8_0_scalar(const void* row, const dwell_block_q8_0* x, int64_t n);

#if defined(__x86_64__)
// simd_dots_avx2.cpp: need AVX2, FMA and F16C.
float dot_f32_f32_avx2(const void* row, const float* x, int64_t n);
float dot_f16_f32_avx2(const void* row, const float* x, int64_t n);
float dot_bf16_f32_avx2(const void* row, const float* x, int64_t n);
float dot_q8_0_f32_avx2(const void* row, const float* x, int64_t n);
float dot_q4_0_f32_avx2(const void* row, const float* x, int64_t n);
float dot_q4_K_q8_K_avx2(const void* row, const ActBlockQ8_K* x, int64_t n);
float dot_q6_K_q8_K_avx2(const void* row, const ActBlockQ8_K* x, int64_t n);
float dot_q4_0_q8_0_avx2(const void* row, const dwell_block_q8_0* x, int64_t n);
float dot_q8_0_q8_0_avx2(const void* row, const dwell_block_q8_0* x, int64_t n);
// simd_dots_avx512.cpp: need SimdLevel::Avx512.
float dot_f32_f32_avx512(const void* row, const float* x, int64_t n);
float dot_f16_f32_avx512(const void* row, const float* x, int64_t n);
float dot_bf16_f32_avx512(const void* row, const float* x, int64_t n);
#endif

}  // namespace dwell::cpu
