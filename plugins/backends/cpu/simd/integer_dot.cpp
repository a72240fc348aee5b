#include "simd/integer_dot.hpp"

#include <cstring>

#include "dwell/quant.h"
#include "simd/simd_dots.hpp"
#include "simd/weight_rows.hpp"

namespace dwell::cpu {

namespace {

// Weight blocks inside a mapped file need not be aligned: copy each one to a
// local before reading its fields.
template <typename Block>
Block load_block(const void* row, int64_t i) {
    Block b;
    std::memcpy(&b, static_cast<const unsigned char*>(row) + i * sizeof(Block), sizeof b);
    return b;
}

// Element j (0..31) of a 5-bit block with the 32 fifth bits in qh.
inline int five_bit(const uint8_t* qs, uint32_t qh, int j) {
    const int half = DWELL_QK5_0 / 2;
    const int lo4 = j < half ? (qs[j] & 0x0f) : (qs[j - half] >> 4);
    return lo4 | static_cast<int>(((qh >> j) & 1u) << 4);
}

// The K-quant super-block sums shared by Q4_K and Q5_K: codes[256] are the
// unsigned 4/5-bit values. The result is d_w * d_x * sum_j(sc_j * q . x)
// - dmin_w * d_x * sum_j(mn_j * sum(x of sub-block j)); the second sum uses
// the activation's 16-value bsums, two per 32-value sub-block.
inline float k_block_dot(const uint8_t* codes, const uint8_t scales[DWELL_K_SCALE_SIZE], float d,
                         float dmin, const ActBlockQ8_K& x) {
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < DWELL_QK_K / 32; ++j) {
        uint8_t sc, mn;
        dwell_k_scale_min(scales, j, &sc, &mn);
        int32_t s = 0;
        for (int l = 0; l < 32; ++l) s += codes[32 * j + l] * x.qs[32 * j + l];
        sumi += sc * s;
        summ += mn * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
    }
    return d * x.d * static_cast<float>(sumi) - dmin * x.d * static_cast<float>(summ);
}

}  // namespace

float dot_q4_0_q8_0(const void* row, const dwell_block_q8_0* x, int64_t n) {
    return dot_kernels().q4_0_q8_0(row, x, n);
}

float dot_q8_0_q8_0(const void* row, const dwell_block_q8_0* x, int64_t n) {
    return dot_kernels().q8_0_q8_0(row, x, n);
}

float dot_q4_0_q8_0_scalar(const void* row, const dwell_block_q8_0* x, int64_t n) {
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK4_0; ++b) {
        const auto w = load_block<dwell_block_q4_0>(row, b);
        int32_t sumi = 0;
        for (int j = 0; j < DWELL_QK4_0 / 2; ++j) {
            sumi += ((w.qs[j] & 0x0f) - 8) * x[b].qs[j];
            sumi += ((w.qs[j] >> 4) - 8) * x[b].qs[j + DWELL_QK4_0 / 2];
        }
        sum += static_cast<float>(sumi) * dwell_fp16_to_fp32(w.d) * dwell_fp16_to_fp32(x[b].d);
    }
    return sum;
}

float dot_q5_0_q8_0(const void* row, const dwell_block_q8_0* x, int64_t n) {
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK5_0; ++b) {
        const auto w = load_block<dwell_block_q5_0>(row, b);
        const uint32_t qh = dwell_q5_high_bits(w.qh);
        int32_t sumi = 0;
        for (int j = 0; j < DWELL_QK5_0; ++j) sumi += (five_bit(w.qs, qh, j) - 16) * x[b].qs[j];
        sum += (dwell_fp16_to_fp32(w.d) * dwell_fp16_to_fp32(x[b].d)) * static_cast<float>(sumi);
    }
    return sum;
}

float dot_q8_0_q8_0_scalar(const void* row, const dwell_block_q8_0* x, int64_t n) {
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK8_0; ++b) {
        const auto w = load_block<dwell_block_q8_0>(row, b);
        int32_t sumi = 0;
        for (int j = 0; j < DWELL_QK8_0; ++j) sumi += w.qs[j] * x[b].qs[j];
        sum += static_cast<float>(sumi) * (dwell_fp16_to_fp32(w.d) * dwell_fp16_to_fp32(x[b].d));
    }
    return sum;
}

// Q4_1 / Q5_1 values are d * q + m; the m part of the dot is m * sum(x),
// which the activation block carries precomputed as s.
float dot_q4_1_q8_1(const void* row, const ActBlockQ8_1* x, int64_t n) {
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK4_1; ++b) {
        const auto w = load_block<dwell_block_q4_1>(row, b);
        int32_t sumi = 0;
        for (int j = 0; j < DWELL_QK4_1 / 2; ++j) {
            sumi += (w.qs[j] & 0x0f) * x[b].qs[j];
            sumi += (w.qs[j] >> 4) * x[b].qs[j + DWELL_QK4_1 / 2];
        }
        sum += (dwell_fp16_to_fp32(w.d) * dwell_fp16_to_fp32(x[b].d)) * static_cast<float>(sumi) +
               dwell_fp16_to_fp32(w.m) * dwell_fp16_to_fp32(x[b].s);
    }
    return sum;
}

float dot_q5_1_q8_1(const void* row, const ActBlockQ8_1* x, int64_t n) {
    float sum = 0.0f;
    for (int64_t b = 0; b < n / DWELL_QK5_1; ++b) {
        const auto w = load_block<dwell_block_q5_1>(row, b);
        const uint32_t qh = dwell_q5_high_bits(w.qh);
        int32_t sumi = 0;
        for (int j = 0; j < DWELL_QK5_1; ++j) sumi += five_bit(w.qs, qh, j) * x[b].qs[j];
        sum += (dwell_fp16_to_fp32(w.d) * dwell_fp16_to_fp32(x[b].d)) * static_cast<float>(sumi) +
               dwell_fp16_to_fp32(w.m) * dwell_fp16_to_fp32(x[b].s);
    }
    return sum;
}

float dot_q4_K_q8_K_scalar(const void* row, const ActBlockQ8_K* x, int64_t n) {
    float sum = 0.0f;
    uint8_t codes[DWELL_QK_K];
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b) {
        const auto w = load_block<dwell_block_q4_K>(row, b);
        for (int p = 0; p < DWELL_QK_K / 64; ++p) {
            for (int l = 0; l < 32; ++l) {
                codes[64 * p + l] = w.qs[32 * p + l] & 0x0f;
                codes[64 * p + 32 + l] = w.qs[32 * p + l] >> 4;
            }
        }
        sum +=
            k_block_dot(codes, w.scales, dwell_fp16_to_fp32(w.d), dwell_fp16_to_fp32(w.dmin), x[b]);
    }
    return sum;
}

float dot_q5_K_q8_K(const void* row, const ActBlockQ8_K* x, int64_t n) {
    float sum = 0.0f;
    uint8_t codes[DWELL_QK_K];
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b) {
        const auto w = load_block<dwell_block_q5_K>(row, b);
        for (int p = 0; p < DWELL_QK_K / 64; ++p) {
            for (int l = 0; l < 32; ++l) {
                const int lo_hi = ((w.qh[l] >> (2 * p)) & 1) << 4;
                const int hi_hi = ((w.qh[l] >> (2 * p + 1)) & 1) << 4;
                codes[64 * p + l] = static_cast<uint8_t>((w.qs[32 * p + l] & 0x0f) | lo_hi);
                codes[64 * p + 32 + l] = static_cast<uint8_t>((w.qs[32 * p + l] >> 4) | hi_hi);
            }
        }
        sum +=
            k_block_dot(codes, w.scales, dwell_fp16_to_fp32(w.d), dwell_fp16_to_fp32(w.dmin), x[b]);
    }
    return sum;
}

// Q6_K has no mins: the -32 offset is applied to each code, and its 16
// sub-blocks of 16 have signed 8-bit scales.
float dot_q6_K_q8_K_scalar(const void* row, const ActBlockQ8_K* x, int64_t n) {
    float sum = 0.0f;
    int8_t codes[DWELL_QK_K];
    for (int64_t b = 0; b < n / DWELL_QK_K; ++b) {
        const auto w = load_block<dwell_block_q6_K>(row, b);
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = w.ql + 64 * h;
            const uint8_t* qh = w.qh + 32 * h;
            int8_t* c = codes + 128 * h;
            for (int l = 0; l < 32; ++l) {
                c[l] = static_cast<int8_t>(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
                c[l + 32] =
                    static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
                c[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                c[l + 96] =
                    static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int32_t sumi = 0;
        for (int s = 0; s < DWELL_QK_K / 16; ++s) {
            int32_t part = 0;
            for (int l = 0; l < 16; ++l) part += codes[16 * s + l] * x[b].qs[16 * s + l];
            sumi += w.scales[s] * part;
        }
        sum += dwell_fp16_to_fp32(w.d) * x[b].d * static_cast<float>(sumi);
    }
    return sum;
}

float dot_q4_K_q8_K(const void* row, const ActBlockQ8_K* x, int64_t n) {
    return dot_kernels().q4_K_q8_K(row, x, n);
}

float dot_q6_K_q8_K(const void* row, const ActBlockQ8_K* x, int64_t n) {
    return dot_kernels().q6_K_q8_K(row, x, n);
}

float dot_row_prepared(dwell_dtype t, ActFormat f, const void* row, const void* act, int64_t n) {
    if (f == ActFormat::F32 || f == ActFormat::F16 || f == ActFormat::BF16) {
        // F16/BF16 activations were rounded in place and stay floats.
        return dot_row(t, row, static_cast<const float*>(act), n);
    }
    const auto* q8_0 = static_cast<const dwell_block_q8_0*>(act);
    const auto* q8_1 = static_cast<const ActBlockQ8_1*>(act);
    const auto* q8_K = static_cast<const ActBlockQ8_K*>(act);
    switch (t) {
        case DWELL_Q4_0:
            return dot_q4_0_q8_0(row, q8_0, n);
        case DWELL_Q5_0:
            return dot_q5_0_q8_0(row, q8_0, n);
        case DWELL_Q8_0:
            return dot_q8_0_q8_0(row, q8_0, n);
        case DWELL_Q4_1:
            return dot_q4_1_q8_1(row, q8_1, n);
        case DWELL_Q5_1:
            return dot_q5_1_q8_1(row, q8_1, n);
        case DWELL_Q4_K:
            return dot_q4_K_q8_K(row, q8_K, n);
        case DWELL_Q5_K:
            return dot_q5_K_q8_K(row, q8_K, n);
        case DWELL_Q6_K:
            return dot_q6_K_q8_K(row, q8_K, n);
        default:
            return dot_row(t, row, static_cast<const float*>(act), n);
    }
}

}  // namespace dwell::cpu
