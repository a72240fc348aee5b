// GET_ROWS: table [n, R] (weight dtype), ids I32 [k] -> [n, k] F32.
#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"
#include "simd/weight_rows.hpp"

namespace dwell::cpu {

OpVerdict check_get_rows(const NodeArgs& a) {
    const dwell_tensor& table = a.input(0);
    const dwell_tensor& ids = a.input(1);
    const dwell_tensor& out = a.output();
    if (!is_weight_dtype(table.dtype)) {
        return unsupported(std::string("table dtype ") + dwell_dtype_name(table.dtype) +
                           " is not supported");
    }
    if (table.ne[2] != 1 || table.ne[3] != 1) {
        return invalid("table must be [n, R], got " + shape_string(table));
    }
    if (ids.dtype != DWELL_I32 || ids.ne[1] != 1 || ids.ne[2] != 1 || ids.ne[3] != 1) {
        return invalid("ids must be I32 [k], got " + shape_string(ids));
    }
    if (out.dtype != DWELL_F32 || out.ne[0] != table.ne[0] || out.ne[1] != ids.ne[0] ||
        out.ne[2] != 1 || out.ne[3] != 1) {
        return invalid("output must be F32 [" + std::to_string(table.ne[0]) + ", " +
                       std::to_string(ids.ne[0]) + "], got " + shape_string(out));
    }
    return std::nullopt;
}

void run_get_rows(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& table = a.input(0);
    const dwell_tensor& ids = a.input(1);
    const dwell_tensor& out = a.output();
    const int32_t* id = i32_row(ids, 0);
    const int64_t k = ids.ne[0];
    for (int64_t i = 0; i < k; ++i) {
        if (id[i] < 0 || id[i] >= table.ne[1]) {
            throw KernelError(DWELL_ERR_INVALID_ARGUMENT,
                              "row id " + std::to_string(id[i]) + " at " + std::to_string(i) +
                                  " is outside the table's " + std::to_string(table.ne[1]) +
                                  " rows");
        }
    }
    pool.parallel_for(
        k,
        [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) {
                dequantize_row(table.dtype, row_at(table, id[i]), f32_row(out, i), table.ne[0]);
            }
        },
        16);
}

}  // namespace dwell::cpu
