// MATMUL: W [K, N] (weight dtype), x [K, M...] F32 -> [N, M...] F32,
// out[m][n] = W[n] . x[m]. Split over threads by weight rows (n), so every
// output value is computed by the same code whatever the thread count.
// x rows are first converted to the weight dtype's activation format (see
// activation_quant.hpp), once per call, so the per-row dot matches ggml's.
#include <algorithm>

#include "activation_quant.hpp"
#include "integer_dot.hpp"
#include "kernels.hpp"
#include "tensor_access.hpp"
#include "weight_rows.hpp"

namespace dwell::cpu {

OpVerdict check_matmul(const NodeArgs& a) {
    const dwell_tensor& w = a.input(0);
    const dwell_tensor& x = a.input(1);
    const dwell_tensor& out = a.output();
    if (!is_weight_dtype(w.dtype)) {
        return unsupported(std::string("weight dtype ") + dwell_dtype_name(w.dtype) +
                           " is not supported");
    }
    if (w.ne[2] != 1 || w.ne[3] != 1) {
        return invalid("weight must be [K, N], got " + shape_string(w));
    }
    if (x.dtype != DWELL_F32) return unsupported("x must be F32");
    if (x.ne[0] != w.ne[0]) {
        return invalid("x " + shape_string(x) + " does not match weight " + shape_string(w));
    }
    if (out.dtype != DWELL_F32 || out.ne[0] != w.ne[1] || out.ne[1] != x.ne[1] ||
        out.ne[2] != x.ne[2] || out.ne[3] != x.ne[3]) {
        return invalid("output must be F32 [N, M] = [" + std::to_string(w.ne[1]) + ", ...] " +
                       "with x's rows, got " + shape_string(out));
    }
    return std::nullopt;
}

void run_matmul(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& w = a.input(0);
    const dwell_tensor& x = a.input(1);
    const dwell_tensor& out = a.output();
    const int64_t k = w.ne[0];
    const int64_t n_rows = w.ne[1];
    const int64_t m_rows = dwell_tensor_nrows(&x);
    // Keep each range big enough that waking a thread pays off.
    const int64_t min_chunk = std::max<int64_t>(1, 16384 / (k * m_rows));
    const ActFormat format = activation_format(w.dtype);
    if (format == ActFormat::F32) {
        pool.parallel_for(
            n_rows,
            [&](int64_t begin, int64_t end) {
                for (int64_t n = begin; n < end; ++n) {
                    // One weight row against every x row while it is hot in cache.
                    const unsigned char* wrow = row_at(w, n);
                    for (int64_t m = 0; m < m_rows; ++m) {
                        f32_row_flat(out, m)[n] = dot_row(w.dtype, wrow, f32_row_flat(x, m), k);
                    }
                }
            },
            min_chunk);
        return;
    }
    ActivationRows acts(format, k, m_rows);
    pool.parallel_for(
        m_rows,
        [&](int64_t begin, int64_t end) {
            for (int64_t m = begin; m < end; ++m) acts.set(m, f32_row_flat(x, m));
        },
        std::max<int64_t>(1, 16384 / k));
    pool.parallel_for(
        n_rows,
        [&](int64_t begin, int64_t end) {
            for (int64_t n = begin; n < end; ++n) {
                const unsigned char* wrow = row_at(w, n);
                for (int64_t m = 0; m < m_rows; ++m) {
                    f32_row_flat(out, m)[n] =
                        dot_row_prepared(w.dtype, format, wrow, acts.row(m), k);
                }
            }
        },
        min_chunk);
}

}  // namespace dwell::cpu
