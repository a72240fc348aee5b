// CPY: copies rows into the output's dtype. Any weight dtype converts
// through f32 to F32, F16, BF16, Q8_0, Q4_0 (quantizing like ggml) or to a
// dwell row format (with the SDK's encoders); equal dtypes,
// I32 included, copy bytes. Row i of the input goes to row i of the output
// (both walked in row-major order), so shapes may differ as long as the row
// length and row count agree.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"
#include "quant/row_quantize.hpp"
#include "simd/weight_rows.hpp"

namespace dwell::cpu {

OpVerdict check_cpy(const NodeArgs& a) {
    const dwell_tensor& src = a.input(0);
    const dwell_tensor& dst = a.output();
    const bool same = src.dtype == dst.dtype;
    const bool convertible = is_weight_dtype(src.dtype) && is_storable_dtype(dst.dtype);
    if (!same && !convertible) {
        return unsupported(std::string("copy from ") + dwell_dtype_name(src.dtype) + " to " +
                           dwell_dtype_name(dst.dtype) + " is not supported");
    }
    if (src.ne[0] != dst.ne[0] || dwell_tensor_nrows(&src) != dwell_tensor_nrows(&dst)) {
        return invalid("output " + shape_string(dst) + " does not have the rows of input " +
                       shape_string(src));
    }
    return std::nullopt;
}

void run_cpy(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& src = a.input(0);
    const dwell_tensor& dst = a.output();
    const int64_t n = src.ne[0];
    const bool same = src.dtype == dst.dtype;
    const size_t row_bytes = dwell_row_bytes(src.dtype, n);
    pool.parallel_for(
        dwell_tensor_nrows(&src),
        [&](int64_t begin, int64_t end) {
            std::vector<float> scratch(same || src.dtype == DWELL_F32 ? 0 : static_cast<size_t>(n));
            for (int64_t r = begin; r < end; ++r) {
                const unsigned char* in = row_flat(src, r);
                unsigned char* out = row_flat(dst, r);
                if (same) {
                    memcpy(out, in, row_bytes);
                    continue;
                }
                const float* values = reinterpret_cast<const float*>(in);
                if (src.dtype != DWELL_F32) {
                    dequantize_row(src.dtype, in, scratch.data(), n);
                    values = scratch.data();
                }
                store_row(dst.dtype, values, out, n);
            }
        },
        std::max<int64_t>(1, 16384 / n));
}

}  // namespace dwell::cpu
