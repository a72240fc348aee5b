// Dot products of a weight row with an activation row already converted by
// quantize_activation to activation_format(weight dtype). For the ggml block
// formats these are integer block dots following ggml's scalar reference
// (ggml_vec_dot_<w>_<act>): per block an exact int32 sum of q_w * q_x, scaled
// once by the product of the two block scales, plus the weight-offset term
// (Q4_1/Q5_1: m_w * s_x; K-quants: -dmin * sum(mins * bsums)). Other dtypes
// fall back to dot_row on the (rounded) f32 activations.
//
// Weight rows may be unaligned (mapped files); activation rows must be
// aligned for ActBlockQ8_K.
//
// Thread-safety: pure functions. Ownership: callers own every buffer.
#pragma once

#include <cstdint>

#include "dwell/tensor.h"
#include "quant/activation_quant.hpp"

namespace dwell::cpu {

// sum over n elements of weight row (dtype t) times activations prepared in
// format f, which must be F32 or activation_format / ggml_activation_format
// of t.
float dot_row_prepared(dwell_dtype t, ActFormat f, const void* row, const void* act, int64_t n);

// The integer dots themselves, one per weight format.
float dot_q4_0_q8_0(const void* row, const dwell_block_q8_0* x, int64_t n);
float dot_q5_0_q8_0(const void* row, const dwell_block_q8_0* x, int64_t n);
float dot_q8_0_q8_0(const void* row, const dwell_block_q8_0* x, int64_t n);
float dot_q4_1_q8_1(const void* row, const ActBlockQ8_1* x, int64_t n);
float dot_q5_1_q8_1(const void* row, const ActBlockQ8_1* x, int64_t n);
float dot_q4_K_q8_K(const void* row, const ActBlockQ8_K* x, int64_t n);
float dot_q5_K_q8_K(const void* row, const ActBlockQ8_K* x, int64_t n);
float dot_q6_K_q8_K(const void* row, const ActBlockQ8_K* x, int64_t n);

}  // namespace dwell::cpu
