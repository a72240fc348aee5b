#include "simd/weight_rows.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "dwell/quant.h"
#include "simd/simd_dots.hpp"

namespace dwell::cpu {

namespace {

// Element loads go through memcpy: rows of 2-byte types and quantized
// blocks may sit at any even (or odd) address inside a mapped file.
inline uint16_t load_u16(const unsigned char* p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

inline float load_f32(const unsigned char* p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

// The formats shared with ggml are decoded by the SDK's reference decoders,
// so the format is written down once. Those take aligned blocks, and a row
// inside a mapped file need not be aligned, so each block is first copied to
// a local.
template <typename Block, int kElems, void (*Decode)(const Block*, float*)>
struct SdkFormat {
    static void decode(const unsigned char* p, float* y) {
        Block b;
        memcpy(&b, p, sizeof b);
        Decode(&b, y);
    }
    static void dequantize(const unsigned char* p, float* out, int64_t n) {
        for (int64_t i = 0; i < n / kElems; ++i) decode(p + i * sizeof(Block), out + i * kElems);
    }
    static float dot(const unsigned char* p, const float* x, int64_t n) {
        float sum = 0.0f;
        float w[kElems];
        for (int64_t i = 0; i < n / kElems; ++i) {
            decode(p + i * sizeof(Block), w);
            const float* xb = x + i * kElems;
            float block_sum = 0.0f;
            for (int j = 0; j < kElems; ++j) block_sum += w[j] * xb[j];
            sum += block_sum;
        }
        return sum;
    }
};

using Q4_1 = SdkFormat<dwell_block_q4_1, DWELL_QK4_1, dwell_dequantize_block_q4_1>;
using Q5_0 = SdkFormat<dwell_block_q5_0, DWELL_QK5_0, dwell_dequantize_block_q5_0>;
using Q5_1 = SdkFormat<dwell_block_q5_1, DWELL_QK5_1, dwell_dequantize_block_q5_1>;
using Q4_K = SdkFormat<dwell_block_q4_K, DWELL_QK_K, dwell_dequantize_block_q4_K>;
using Q5_K = SdkFormat<dwell_block_q5_K, DWELL_QK_K, dwell_dequantize_block_q5_K>;
using Q6_K = SdkFormat<dwell_block_q6_K, DWELL_QK_K, dwell_dequantize_block_q6_K>;

// I4_G / I6_G: within a group sum(d * q * x + m * x) = d * (q . x) + m * sum(x),
// so the inner loop works on the raw codes and each group is scaled once.
float dot_group_row(int bits, int64_t group, const unsigned char* p, const float* x, int64_t n) {
    uint8_t q[DWELL_GROUP_SIZE];
    float sum = 0.0f;
    for (int64_t g = 0; g < n; g += group) {
        const int64_t len = std::min<int64_t>(group, n - g);
        const float d = dwell_fp16_to_fp32(dwell_load_u16le(p));
        const float m = dwell_fp16_to_fp32(dwell_load_u16le(p + 2));
        dwell_unpack_codes(bits, p + 4, q, len);
        const float* xg = x + g;
        float qx = 0.0f, sx = 0.0f;
        for (int64_t i = 0; i < len; ++i) {
            qx += static_cast<float>(q[i]) * xg[i];
            sx += xg[i];
        }
        sum += d * qx + m * sx;
        p += 4 + dwell_group_code_bytes(bits, len);
    }
    return sum;
}

float dot_i8c_row(const unsigned char* p, const float* x, int64_t n) {
    const auto* qs = reinterpret_cast<const int8_t*>(p + 4);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<float>(qs[i]) * x[i];
    return sum * dwell_load_f32le(p);
}

}  // namespace

// The backend reads every weight type through the SDK's reference decoders.
bool is_weight_dtype(dwell_dtype t) {
    return dwell_has_decoder(t) != 0;
}

void dequantize_row(dwell_dtype t, const void* row, float* out, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    switch (t) {
        case DWELL_F32:
            // An empty row may come with null pointers, which memcpy must not see.
            if (n > 0) memcpy(out, p, static_cast<size_t>(n) * sizeof(float));
            return;
        case DWELL_F16:
            for (int64_t i = 0; i < n; ++i) out[i] = dwell_fp16_to_fp32(load_u16(p + 2 * i));
            return;
        case DWELL_BF16:
            for (int64_t i = 0; i < n; ++i) out[i] = dwell_bf16_to_fp32(load_u16(p + 2 * i));
            return;
        case DWELL_Q8_0:
            for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
                const unsigned char* block = p + b * sizeof(dwell_block_q8_0);
                const float d = block_scale(block);
                const auto* qs = reinterpret_cast<const int8_t*>(block + 2);
                float* y = out + b * DWELL_QK8_0;
                for (int j = 0; j < DWELL_QK8_0; ++j) y[j] = static_cast<float>(qs[j]) * d;
            }
            return;
        case DWELL_Q4_0:
            for (int64_t b = 0; b < n / DWELL_QK4_0; ++b) {
                const unsigned char* block = p + b * sizeof(dwell_block_q4_0);
                const float d = block_scale(block);
                const unsigned char* qs = block + 2;
                float* y = out + b * DWELL_QK4_0;
                for (int j = 0; j < DWELL_QK4_0 / 2; ++j) {
                    y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
                    y[j + DWELL_QK4_0 / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
                }
            }
            return;
        case DWELL_Q4_1:
            return Q4_1::dequantize(p, out, n);
        case DWELL_Q5_0:
            return Q5_0::dequantize(p, out, n);
        case DWELL_Q5_1:
            return Q5_1::dequantize(p, out, n);
        case DWELL_Q4_K:
            return Q4_K::dequantize(p, out, n);
        case DWELL_Q5_K:
            return Q5_K::dequantize(p, out, n);
        case DWELL_Q6_K:
            return Q6_K::dequantize(p, out, n);
        // The row formats need no alignment, so their SDK decoders read the
        // mapped row in place.
        case DWELL_I4_G:
        case DWELL_I4_G64:
        case DWELL_I4_G32:
            dwell_dequantize_row(t, p, out, n);
            return;
        case DWELL_I6_G:
            return dwell_dequantize_row_i6g(p, out, n);
        case DWELL_I8_C:
            return dwell_dequantize_row_i8c(p, out, n);
        default:
            throw std::invalid_argument("dequantize_row: not a weight dtype");
    }
}

float dot_f16_f32_scalar(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += dwell_fp16_to_fp32(load_u16(p + 2 * i)) * x[i];
    return sum;
}

// Sum q * x within a block, then scale once: fewer roundings than scaling
// every product, and the shape the SIMD versions have.
float dot_q8_0_f32_scalar(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q8_0);
        const auto* qs = reinterpret_cast<const int8_t*>(block + 2);
        const float* xb = x + b * DWELL_QK8_0;
        float block_sum = 0.0f;
        for (int j = 0; j < DWELL_QK8_0; ++j) block_sum += static_cast<float>(qs[j]) * xb[j];
        sum += block_sum * block_scale(block);
    }
    return sum;
}

float dot_f32_f32_scalar(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += load_f32(p + 4 * i) * x[i];
    return sum;
}

float dot_bf16_f32_scalar(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += dwell_bf16_to_fp32(load_u16(p + 2 * i)) * x[i];
    return sum;
}

float dot_q4_0_f32_scalar(const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK4_0; ++b) {
        const unsigned char* block = p + b * sizeof(dwell_block_q4_0);
        const unsigned char* qs = block + 2;
        const float* xb = x + b * DWELL_QK4_0;
        float block_sum = 0.0f;
        for (int j = 0; j < DWELL_QK4_0 / 2; ++j) {
            block_sum += static_cast<float>((qs[j] & 0x0f) - 8) * xb[j];
            block_sum += static_cast<float>((qs[j] >> 4) - 8) * xb[j + DWELL_QK4_0 / 2];
        }
        sum += block_sum * block_scale(block);
    }
    return sum;
}

float dot_row(dwell_dtype t, const void* row, const float* x, int64_t n) {
    const auto* p = static_cast<const unsigned char*>(row);
    switch (t) {
        case DWELL_F32:
            return dot_kernels().f32_f32(p, x, n);
        case DWELL_F16:
            return dot_kernels().f16_f32(p, x, n);
        case DWELL_BF16:
            return dot_kernels().bf16_f32(p, x, n);
        case DWELL_Q8_0:
            return dot_kernels().q8_0_f32(p, x, n);
        case DWELL_Q4_0:
            return dot_kernels().q4_0_f32(p, x, n);
        case DWELL_Q4_1:
            return Q4_1::dot(p, x, n);
        case DWELL_Q5_0:
            return Q5_0::dot(p, x, n);
        case DWELL_Q5_1:
            return Q5_1::dot(p, x, n);
        case DWELL_Q4_K:
            return Q4_K::dot(p, x, n);
        case DWELL_Q5_K:
            return Q5_K::dot(p, x, n);
        case DWELL_Q6_K:
            return Q6_K::dot(p, x, n);
        case DWELL_I4_G:
        case DWELL_I4_G64:
        case DWELL_I4_G32:
            return dot_group_row(4, dwell_group_size(t), p, x, n);
        case DWELL_I6_G:
            return dot_group_row(6, DWELL_GROUP_SIZE, p, x, n);
        case DWELL_I8_C:
            return dot_i8c_row(p, x, n);
        default:
            throw std::invalid_argument("dot_row: not a weight dtype");
    }
}

}  // namespace dwell::cpu
