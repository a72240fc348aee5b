// SOFTMAX over each row of an F32 tensor, max-subtracted, with the vector
// math table (exps in f32, their sum in double as ggml does).
#include <algorithm>

#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"
#include "simd/vec_math.hpp"

namespace dwell::cpu {

OpVerdict check_softmax(const NodeArgs& a) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    if (x.dtype != DWELL_F32) return unsupported("input must be F32");
    if (out.dtype != DWELL_F32 || !same_shape(x, out)) {
        return invalid("output must be F32 " + shape_string(x) + ", got " + shape_string(out));
    }
    return std::nullopt;
}

void run_softmax(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    const int64_t n = x.ne[0];
    const VecKernels& vk = vec_kernels();
    pool.parallel_for(
        dwell_tensor_nrows(&x),
        [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                softmax_row(vk, f32_row_flat(x, r), f32_row_flat(out, r), n);
            }
        },
        std::max<int64_t>(1, 16384 / n));
}

}  // namespace dwell::cpu
