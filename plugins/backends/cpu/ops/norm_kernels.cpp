// RMS_NORM and LAYER_NORM over rows, F32. Sums are accumulated in double
// and the scale formed in float, as ggml does, to match its rounding. The
// SIMD tables reorder RMS_NORM's double sum of float squares, which moves it
// by ~n * 2^-53 relative: the float mean changes only when it lies that
// close to a float rounding boundary (odds ~n * 2^-29 per row).
#include <algorithm>
#include <cmath>

#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"
#include "simd/vec_math.hpp"

namespace dwell::cpu {

namespace {

template <typename RowFn>
void for_each_row(const NodeArgs& a, ThreadPool& pool, RowFn fn) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    pool.parallel_for(
        dwell_tensor_nrows(&out),
        [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) fn(f32_row_flat(x, r), f32_row_flat(out, r));
        },
        std::max<int64_t>(1, 16384 / out.ne[0]));
}

}  // namespace

OpVerdict check_norm(const NodeArgs& a) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    if (x.dtype != DWELL_F32) return unsupported("input must be F32");
    if (out.dtype != DWELL_F32 || !same_shape(x, out)) {
        return invalid("output must be F32 " + shape_string(x) + ", got " + shape_string(out));
    }
    return std::nullopt;
}

void run_rms_norm(const NodeArgs& a, ThreadPool& pool) {
    const int64_t n = a.output().ne[0];
    const float eps = a.node->fparams[0];
    const VecKernels& vk = vec_kernels();
    for_each_row(a, pool, [n, eps, &vk](const float* x, float* y) {
        const double sum = vk.sum_squares(x, n);
        const float mean = static_cast<float>(sum / static_cast<double>(n));
        const float scale = 1.0f / std::sqrt(mean + eps);
        vk.scale(x, scale, y, n);
    });
}

void run_layer_norm(const NodeArgs& a, ThreadPool& pool) {
    const int64_t n = a.output().ne[0];
    const float eps = a.node->fparams[0];
    const VecKernels& vk = vec_kernels();
    for_each_row(a, pool, [n, eps, &vk](const float* x, float* y) {
        double sum = 0.0;
        for (int64_t i = 0; i < n; ++i) sum += x[i];
        const float mean = static_cast<float>(sum / static_cast<double>(n));
        double sum2 = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            // y may be x (in place): x[i] is read before y[i] is written.
            const float v = x[i] - mean;
            y[i] = v;
            sum2 += static_cast<double>(v * v);
        }
        const float variance = static_cast<float>(sum2 / static_cast<double>(n));
        vk.scale(y, 1.0f / std::sqrt(variance + eps), y, n);
    });
}

}  // namespace dwell::cpu
