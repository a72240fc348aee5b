// Mixture-of-experts: EXPERT_MATMUL and MOE_COMBINE.
//
// EXPERT_MATMUL takes x as [K, T] (one input per token, shared by its k
// experts, as for gate/up projections) or as [K, k, T] (one input per
// selected expert, as for the down projection after them). The two forms
// cannot be confused: [K, k, T] with T > 1 has ne[2] > 1, and with T == 1
// the forms coincide only when k == 1, where they mean the same.
#include <algorithm>

#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"
#include "quant/activation_quant.hpp"
#include "simd/integer_dot.hpp"
#include "simd/weight_rows.hpp"

namespace dwell::cpu {

namespace {

// True when x holds one row per (slot, token) rather than one per token;
// assumes check_expert_matmul accepted x.
bool x_per_slot(const dwell_tensor& x, int64_t n_tokens) {
    return !(x.ne[1] == n_tokens && x.ne[2] == 1);
}

}  // namespace

OpVerdict check_expert_matmul(const NodeArgs& a) {
    const dwell_tensor& w = a.input(0);
    const dwell_tensor& x = a.input(1);
    const dwell_tensor& ids = a.input(2);
    const dwell_tensor& out = a.output();
    if (!is_weight_dtype(w.dtype)) {
        return unsupported(std::string("weight dtype ") + dwell_dtype_name(w.dtype) +
                           " is not supported");
    }
    if (w.ne[3] != 1) return invalid("weights must be [K, N, E], got " + shape_string(w));
    if (ids.dtype != DWELL_I32 || ids.ne[2] != 1 || ids.ne[3] != 1) {
        return invalid("ids must be I32 [k, T], got " + shape_string(ids));
    }
    const int64_t k = ids.ne[0];
    const int64_t n_tokens = ids.ne[1];
    if (x.dtype != DWELL_F32) return unsupported("x must be F32");
    const bool per_token = x.ne[1] == n_tokens && x.ne[2] == 1;
    const bool per_slot = x.ne[1] == k && x.ne[2] == n_tokens;
    if (x.ne[0] != w.ne[0] || x.ne[3] != 1 || !(per_token || per_slot)) {
        return invalid("x must be [" + std::to_string(w.ne[0]) + ", T] or [" +
                       std::to_string(w.ne[0]) + ", k, T], got " + shape_string(x));
    }
    if (out.dtype != DWELL_F32 || out.ne[0] != w.ne[1] || out.ne[1] != k || out.ne[2] != n_tokens ||
        out.ne[3] != 1) {
        return invalid("output must be F32 [" + std::to_string(w.ne[1]) + ", " + std::to_string(k) +
                       ", " + std::to_string(n_tokens) + "], got " + shape_string(out));
    }
    return std::nullopt;
}

void run_expert_matmul(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& w = a.input(0);
    const dwell_tensor& x = a.input(1);
    const dwell_tensor& ids = a.input(2);
    const dwell_tensor& out = a.output();
    const int64_t kdim = w.ne[0];
    const int64_t n_out = w.ne[1];
    const int64_t n_experts = w.ne[2];
    const int64_t k = ids.ne[0];
    const int64_t n_tokens = ids.ne[1];
    const bool per_slot = x_per_slot(x, n_tokens);

    for (int64_t t = 0; t < n_tokens; ++t) {
        const int32_t* id = i32_row(ids, t);
        for (int64_t i = 0; i < k; ++i) {
            if (id[i] < 0 || id[i] >= n_experts) {
                throw KernelError(DWELL_ERR_INVALID_ARGUMENT, "expert id " + std::to_string(id[i]) +
                                                                  " of token " + std::to_string(t) +
                                                                  " is outside [0, " +
                                                                  std::to_string(n_experts) + ")");
            }
        }
    }

    // Each x row is converted to the weight dtype's activation format once,
    // not once per expert row that reads it (an f32 copy when no conversion
    // is needed, small next to the dots).
    const int64_t x_rows = per_slot ? n_tokens * k : n_tokens;
    ActivationRows acts(activation_format(w.dtype), kdim, x_rows);
    pool.parallel_for(
        x_rows,
        [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                acts.set(r, per_slot ? f32_row(x, r % k, r / k) : f32_row(x, r));
            }
        },
        std::max<int64_t>(1, 16384 / kdim));

    // Items are (token, slot, output row), output rows fastest, so a range
    // walks one expert's weight rows in order.
    pool.parallel_for(
        n_tokens * k * n_out,
        [&](int64_t begin, int64_t end) {
            for (int64_t item = begin; item < end; ++item) {
                const int64_t n = item % n_out;
                const int64_t slot = item / n_out;
                const int64_t i = slot % k;
                const int64_t t = slot / k;
                const int32_t expert = i32_row(ids, t)[i];
                const void* xrow = acts.row(per_slot ? slot : t);
                f32_row(out, i, t)[n] =
                    dot_row_prepared(w.dtype, acts.format(), row_at(w, n, expert), xrow, kdim);
            }
        },
        std::max<int64_t>(1, 16384 / kdim));
}

OpVerdict check_moe_combine(const NodeArgs& a) {
    const dwell_tensor& y = a.input(0);
    const dwell_tensor& w = a.input(1);
    const dwell_tensor& out = a.output();
    if (y.dtype != DWELL_F32 || w.dtype != DWELL_F32) return unsupported("inputs must be F32");
    if (y.ne[3] != 1) return invalid("y must be [N, k, T], got " + shape_string(y));
    if (w.ne[0] != y.ne[1] || w.ne[1] != y.ne[2] || w.ne[2] != 1 || w.ne[3] != 1) {
        return invalid("weights must be [" + std::to_string(y.ne[1]) + ", " +
                       std::to_string(y.ne[2]) + "], got " + shape_string(w));
    }
    if (out.dtype != DWELL_F32 || out.ne[0] != y.ne[0] || out.ne[1] != y.ne[2] || out.ne[2] != 1 ||
        out.ne[3] != 1) {
        return invalid("output must be F32 [" + std::to_string(y.ne[0]) + ", " +
                       std::to_string(y.ne[2]) + "], got " + shape_string(out));
    }
    return std::nullopt;
}

void run_moe_combine(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& y = a.input(0);
    const dwell_tensor& w = a.input(1);
    const dwell_tensor& out = a.output();
    const int64_t n = y.ne[0];
    const int64_t k = y.ne[1];
    pool.parallel_for(
        y.ne[2],
        [&](int64_t begin, int64_t end) {
            for (int64_t t = begin; t < end; ++t) {
                const float* wt = f32_row(w, t);
                float* dst = f32_row(out, t);
                std::fill(dst, dst + n, 0.0f);
                for (int64_t i = 0; i < k; ++i) {
                    const float* src = f32_row(y, i, t);
                    for (int64_t j = 0; j < n; ++j) dst[j] += wt[i] * src[j];
                }
            }
        },
        std::max<int64_t>(1, 4096 / (n * k)));
}

}  // namespace dwell::cpu
