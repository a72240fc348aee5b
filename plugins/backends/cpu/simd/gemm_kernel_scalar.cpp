// The portable blocked kernels: four rows per block in the weight dtype's
// own layout, activations as plain ggml blocks, and every output one call of
// the scalar integer dot. Slow but exact; SIMD kernels are tested against
// the same integer dots.
#include <cstring>

#include "quant/activation_quant.hpp"
#include "simd/gemm_kernel.hpp"
#include "simd/integer_dot.hpp"

namespace dwell::cpu {
namespace {

constexpr int kRows = 4;
constexpr int kCols = 4;

size_t round_up_64(size_t n) {
    return (n + 63) / 64 * 64;
}

template <dwell_dtype T>
size_t block_bytes(int64_t k) {
    return kRows * dwell_row_bytes(T, k);
}

template <dwell_dtype T>
void pack_block(const void* w, size_t w_row_bytes, int nr, int64_t k, void* out) {
    const size_t row = dwell_row_bytes(T, k);
    auto* dst = static_cast<unsigned char*>(out);
    for (int r = 0; r < kRows; ++r) {
        if (r < nr) {
            std::memcpy(dst + r * row, static_cast<const unsigned char*>(w) + r * w_row_bytes, row);
        } else {
            std::memset(dst + r * row, 0, row);
        }
    }
}

template <dwell_dtype T>
size_t act_row_bytes(int64_t k) {
    return round_up_64(activation_row_bytes(ggml_activation_format(T), k));
}

template <dwell_dtype T>
void quantize_act(const float* x, int64_t k, void* out) {
    quantize_activation(ggml_activation_format(T), x, out, k);
}

template <dwell_dtype T>
void tile(int64_t k, const void* block, int nr, const void* acts, size_t act_stride, int nc,
          float* out, size_t out_stride) {
    const size_t row = dwell_row_bytes(T, k);
    const auto* w = static_cast<const unsigned char*>(block);
    const auto* a = static_cast<const unsigned char*>(acts);
    for (int c = 0; c < nc; ++c) {
        for (int r = 0; r < nr; ++r) {
            out[c * out_stride + r] =
                dot_row_prepared(T, ggml_activation_format(T), w + r * row, a + c * act_stride, k);
        }
    }
}

template <dwell_dtype T>
GemmKernel make(const char* name) {
    return GemmKernel{name,
                      T,
                      kRows,
                      kCols,
                      dwell_dtype_block_elems(T),
                      &block_bytes<T>,
                      &pack_block<T>,
                      &act_row_bytes<T>,
                      &quantize_act<T>,
                      &tile<T>};
}

}  // namespace

const GemmKernel* gemm_kernel_scalar(dwell_dtype t) {
    static const GemmKernel q4_0 = make<DWELL_Q4_0>("q4_0/scalar");
    static const GemmKernel q5_0 = make<DWELL_Q5_0>("q5_0/scalar");
    static const GemmKernel q8_0 = make<DWELL_Q8_0>("q8_0/scalar");
    static const GemmKernel q4_1 = make<DWELL_Q4_1>("q4_1/scalar");
    static const GemmKernel q5_1 = make<DWELL_Q5_1>("q5_1/scalar");
    static const GemmKernel q4_K = make<DWELL_Q4_K>("q4_K/scalar");
    static const GemmKernel q5_K = make<DWELL_Q5_K>("q5_K/scalar");
    static const GemmKernel q6_K = make<DWELL_Q6_K>("q6_K/scalar");
    switch (t) {
        case DWELL_Q4_0:
            return &q4_0;
        case DWELL_Q5_0:
            return &q5_0;
        case DWELL_Q8_0:
            return &q8_0;
        case DWELL_Q4_1:
            return &q4_1;
        case DWELL_Q5_1:
            return &q5_1;
        case DWELL_Q4_K:
            return &q4_K;
        case DWELL_Q5_K:
            return &q5_K;
        case DWELL_Q6_K:
            return &q6_K;
        default:
            return nullptr;
    }
}

}  // namespace dwell::cpu
