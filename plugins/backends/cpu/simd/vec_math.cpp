// Scalar references of the vector math and the level dispatch. This file is
// compiled with -ffp-contract=off (see CMakeLists.txt): the references must
// round the same on every architecture, and the SIMD axpy/scale/rope are
// promised to match them bit for bit.
#include "simd/vec_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "dwell/quant.h"

namespace dwell::cpu {

namespace {

inline float half_at(const void* x16, int64_t i) {
    uint16_t h;
    std::memcpy(&h, static_cast<const unsigned char*>(x16) + 2 * i, sizeof h);
    return dwell_fp16_to_fp32(h);
}

float dot_f32_scalar(const float* x, const float* y, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += x[i] * y[i];
    return sum;
}

float dot_f16_scalar(const void* x16, const float* y, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += half_at(x16, i) * y[i];
    return sum;
}

void axpy_f32_scalar(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                     int64_t n) {
    for (int64_t j = 0; j < n_rows; ++j) {
        const auto* x =
            reinterpret_cast<const float*>(static_cast<const unsigned char*>(rows) + j * stride);
        for (int64_t i = 0; i < n; ++i) y[i] += a[j] * x[i];
    }
}

void axpy_f16_scalar(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                     int64_t n) {
    for (int64_t j = 0; j < n_rows; ++j) {
        const void* x16 = static_cast<const unsigned char*>(rows) + j * stride;
        for (int64_t i = 0; i < n; ++i) y[i] += a[j] * half_at(x16, i);
    }
}

// The 256 E4M3 values, so the scalar entries index instead of branching.
struct Fp8Table {
    float v[256];
    Fp8Table() {
        for (int c = 0; c < 256; ++c) v[c] = dwell_fp8_e4m3_to_fp32(static_cast<uint8_t>(c));
    }
};
const Fp8Table kFp8;

inline float fp8_at(const void* x8, int64_t i) {
    return kFp8.v[static_cast<const unsigned char*>(x8)[i]];
}

inline float q8_scale(const unsigned char* block) {
    uint16_t h;
    std::memcpy(&h, block, sizeof h);
    return dwell_fp16_to_fp32(h);
}

float dot_q8_0_scalar(const void* q8, int64_t first, const float* y, int64_t n) {
    const auto* base = static_cast<const unsigned char*>(q8);
    float sum = 0.0f;
    for (int64_t i = 0; i < n;) {
        const int64_t b = (first + i) / DWELL_QK8_0;
        const int64_t in_block = (first + i) % DWELL_QK8_0;
        const int64_t len = std::min<int64_t>(DWELL_QK8_0 - in_block, n - i);
        const unsigned char* block = base + b * sizeof(dwell_block_q8_0);
        const auto* q = reinterpret_cast<const int8_t*>(block + 2) + in_block;
        float s = 0.0f;
        for (int64_t k = 0; k < len; ++k) s += static_cast<float>(q[k]) * y[i + k];
        sum += q8_scale(block) * s;
        i += len;
    }
    return sum;
}

float dot_fp8_scalar(const void* x8, const float* y, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += fp8_at(x8, i) * y[i];
    return sum;
}

void axpy_q8_0_scalar(const float* a, const void* rows, int64_t stride, int64_t n_rows,
                      int64_t first, float* y, int64_t n) {
    for (int64_t j = 0; j < n_rows; ++j) {
        const auto* base = static_cast<const unsigned char*>(rows) + j * stride;
        for (int64_t i = 0; i < n;) {
            const int64_t b = (first + i) / DWELL_QK8_0;
            const int64_t in_block = (first + i) % DWELL_QK8_0;
            const int64_t len = std::min<int64_t>(DWELL_QK8_0 - in_block, n - i);
            const unsigned char* block = base + b * sizeof(dwell_block_q8_0);
            const auto* q = reinterpret_cast<const int8_t*>(block + 2) + in_block;
            const float w = a[j] * q8_scale(block);
            for (int64_t k = 0; k < len; ++k) y[i + k] += w * static_cast<float>(q[k]);
            i += len;
        }
    }
}

void axpy_fp8_scalar(const float* a, const void* rows, int64_t stride, int64_t n_rows, float* y,
                     int64_t n) {
    for (int64_t j = 0; j < n_rows; ++j) {
        const void* x8 = static_cast<const unsigned char*>(rows) + j * stride;
        for (int64_t i = 0; i < n; ++i) y[i] += a[j] * fp8_at(x8, i);
    }
}

void round_f16_scalar(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = dwell_fp16_to_fp32(dwell_fp32_to_fp16(x[i]));
}

void scale_scalar(const float* x, float s, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

double sum_squares_scalar(const float* x, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    return sum;
}

float max_scalar(const float* x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) m = std::fmax(m, x[i]);
    return m;
}

double exp_sum_scalar(const float* x, float shift, float* y, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float e = std::exp(x[i] - shift);
        y[i] = e;
        sum += e;
    }
    return sum;
}

inline float silu1(float x) {
    return x / (1.0f + std::exp(-x));
}

void silu_scalar(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = silu1(x[i]);
}

void swiglu_scalar(const float* gate, const float* up, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = silu1(gate[i]) * up[i];
}

void gelu_scalar(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        const float u = kGeluSqrt2OverPi * v * (1.0f + kGeluCoef * (v * v));
        y[i] = v / (1.0f + std::exp(-2.0f * u));
    }
}

void add_scalar(const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void mul_scalar(const float* a, const float* b, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void rope_norm_scalar(const float* x, const float* cos, const float* sin, float* y,
                      int64_t n_pairs) {
    for (int64_t i = 0; i < n_pairs; ++i) {
        const float x0 = x[2 * i];
        const float x1 = x[2 * i + 1];
        y[2 * i] = x0 * cos[i] - x1 * sin[i];
        y[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
}

void rope_neox_scalar(const float* x, const float* cos, const float* sin, float* y,
                      int64_t n_pairs) {
    for (int64_t i = 0; i < n_pairs; ++i) {
        const float x0 = x[i];
        const float x1 = x[i + n_pairs];
        y[i] = x0 * cos[i] - x1 * sin[i];
        y[i + n_pairs] = x0 * sin[i] + x1 * cos[i];
    }
}

}  // namespace

VecKernels vec_kernels_for(SimdLevel level) {
    VecKernels k{};
    k.level = SimdLevel::Scalar;
    k.dot_f32 = dot_f32_scalar;
    k.dot_f16_f32 = dot_f16_scalar;
    k.axpy_f32 = axpy_f32_scalar;
    k.axpy_f16 = axpy_f16_scalar;
    k.dots_f16_f32 = dots_by_rows<dot_f16_scalar>;
    k.axpy_f16_multi = axpy_multi_by_rows<axpy_f16_scalar>;
    k.dot_q8_0_f32 = dot_q8_0_scalar;
    k.dot_fp8_f32 = dot_fp8_scalar;
    k.axpy_q8_0 = axpy_q8_0_scalar;
    k.axpy_fp8 = axpy_fp8_scalar;
    k.round_f16 = round_f16_scalar;
    k.scale = scale_scalar;
    k.sum_squares = sum_squares_scalar;
    k.max = max_scalar;
    k.exp_sum = exp_sum_scalar;
    k.silu = silu_scalar;
    k.gelu = gelu_scalar;
    k.swiglu = swiglu_scalar;
    k.add = add_scalar;
    k.mul = mul_scalar;
    k.rope_norm = rope_norm_scalar;
    k.rope_neox = rope_neox_scalar;
#if defined(__x86_64__)
    if (level == SimdLevel::Avx2 || level == SimdLevel::Avx512) {
        fill_vec_kernels_avx2(k);
        k.level = SimdLevel::Avx2;
    }
    if (level == SimdLevel::Avx512) {
        fill_vec_kernels_avx512(k);
        k.level = SimdLevel::Avx512;
    }
#elif defined(__aarch64__)
    if (level == SimdLevel::Neon || level == SimdLevel::NeonDotprod ||
        level == SimdLevel::NeonI8mm) {
        fill_vec_kernels_neon(k);
        k.level = level;
    }
#else
    (void)level;
#endif
    return k;
}

const VecKernels& vec_kernels() {
    static const VecKernels kernels =
        vec_kernels_for(select_simd_level(std::getenv("DWELL_CPU_SIMD"), detect_cpu_features()));
    return kernels;
}

void softmax_row(const VecKernels& vk, const float* x, float* y, int64_t n) {
    const float max = vk.max(x, n);
    const double sum = vk.exp_sum(x, max, y, n);
    vk.scale(y, static_cast<float>(1.0 / sum), y, n);
}

}  // namespace dwell::cpu
