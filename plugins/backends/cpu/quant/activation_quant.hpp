// The form a matmul's f32 activation row takes before it meets a weight row
// ("vec-dot type"). llama.cpp rounds activations to a format chosen by the
// weight type and then computes integer block dot products; doing the same
// keeps dwell's logits close to llama.cpp's on quantized models, which the
// f32-activation dot does not quite achieve for K-quants.
//
//   weight                         activation
//   Q4_0, Q5_0, Q8_0               Q8_0 blocks of 32 (fp16 d, int8 q)
//   Q4_1, Q5_1                     Q8_1 blocks of 32 (Q8_0 plus fp16 s = d * sum q)
//   Q4_K, Q5_K, Q6_K               Q8_K blocks of 256 (f32 d, int8 q, 16-value sums)
//   F16 / BF16                     f32 values rounded to fp16 / bf16
//   F32, I4_G, I6_G, I8_C          f32, unchanged
//
// Thread-safety: pure functions. Ownership: callers own every buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "dwell/tensor.h"

namespace dwell::cpu {

enum class ActFormat { F32, F16, BF16, Q8_0, Q8_1, Q8_K };

// Same layout as ggml's block_q8_1.
struct ActBlockQ8_1 {
    uint16_t d;  // fp16 step
    uint16_t s;  // fp16 of (f32 step) * sum(qs), folds a weight offset into one product
    int8_t qs[DWELL_QK8_0];
};

// Same layout as ggml's block_q8_K. d carries the sign of the block's
// largest-magnitude value (negated), so q = x / d may be sign-flipped; only
// the product d * q matters.
struct ActBlockQ8_K {
    float d;
    int8_t qs[DWELL_QK_K];
    int16_t bsums[DWELL_QK_K / 16];  // sum of each run of 16 qs, for the K-quant mins
};

// The activation format ggml's vec_dot for weight dtype t uses (the table
// above).
ActFormat ggml_activation_format(dwell_dtype t);

// The format MATMUL / EXPERT_MATMUL actually use: ggml's for every block
// format (int8 activations, as the integer kernels need), f32 for F16 and
// BF16 weights (see activation_quant.cpp).
ActFormat activation_format(dwell_dtype t);

// Bytes one row of n activations takes in format f, rounded up to a multiple
// of alignof(ActBlockQ8_K) so rows packed back to back stay aligned.
size_t activation_row_bytes(ActFormat f, int64_t n);

// Writes x[0..n) in format f to out (aligned for ActBlockQ8_K). The block
// formats need n a multiple of their block size; F32/F16/BF16 write floats
// (F16/BF16: each value rounded to that type and widened back).
void quantize_activation(ActFormat f, const float* x, void* out, int64_t n);

// The individual quantizers, rounding as llama.cpp does on SIMD CPUs:
// Q8_0 and Q8_1 with q = round-half-even(x * (127 / amax)), d = amax / 127;
// Q8_K as quantize_row_q8_K_ref.
void quantize_act_q8_0(const float* x, dwell_block_q8_0* out, int64_t n);
void quantize_act_q8_1(const float* x, ActBlockQ8_1* out, int64_t n);
void quantize_act_q8_K(const float* x, ActBlockQ8_K* out, int64_t n);

// Rows of activations in one format, packed back to back in an owned,
// suitably aligned buffer: a kernel converts its x rows once and then reads
// each converted row once per weight row.
class ActivationRows {
public:
    ActivationRows(ActFormat f, int64_t n, int64_t rows)
        : format_(f),
          n_(n),
          row_bytes_(activation_row_bytes(f, n)),
          storage_((row_bytes_ * static_cast<size_t>(rows) + sizeof(ActBlockQ8_K) - 1) /
                   sizeof(ActBlockQ8_K)) {}

    ActFormat format() const { return format_; }

    // Converts x (n values) into row i.
    void set(int64_t i, const float* x) { quantize_activation(format_, x, mutable_row(i), n_); }

    const void* row(int64_t i) const {
        return reinterpret_cast<const unsigned char*>(storage_.data()) +
               static_cast<size_t>(i) * row_bytes_;
    }

private:
    void* mutable_row(int64_t i) { return const_cast<void*>(std::as_const(*this).row(i)); }

    ActFormat format_;
    int64_t n_;
    size_t row_bytes_;
    std::vector<ActBlockQ8_K> storage_;  // the element type only sets the alignment
};

}  // namespace dwell::cpu
