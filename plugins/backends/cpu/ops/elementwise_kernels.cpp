// ADD, MUL (in1 same shape as in0, or broadcast along any dim where it has
// size 1 — which includes an [n] vector over all rows), SCALE, SILU, GELU,
// SWIGLU. All F32, parallel over rows. Rows go through the vector math
// table (vec_math.hpp).
#include <algorithm>
#include <cmath>

#include "ops/activation_math.hpp"
#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"
#include "simd/vec_math.hpp"

namespace dwell::cpu {

namespace {

// Rows per range: about 16K elements, so small tensors stay on one thread.
int64_t row_chunk(const dwell_tensor& t) {
    return std::max<int64_t>(1, 16384 / t.ne[0]);
}

OpVerdict check_same_f32(const dwell_tensor& in, const dwell_tensor& out, const char* role) {
    if (in.dtype != DWELL_F32) return unsupported(std::string(role) + " must be F32");
    if (out.dtype != DWELL_F32 || !same_shape(in, out)) {
        return invalid("output must be F32 " + shape_string(in) + ", got " + shape_string(out));
    }
    return std::nullopt;
}

// Calls fn(out_row, in0_row, in1_row) for every row, in1 broadcast.
template <typename Fn>
void for_each_row_pair(const NodeArgs& a, ThreadPool& pool, Fn fn) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& y = a.input(1);
    const dwell_tensor& out = a.output();
    pool.parallel_for(
        dwell_tensor_nrows(&out),
        [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                const int64_t i1 = r % out.ne[1];
                const int64_t i2 = (r / out.ne[1]) % out.ne[2];
                const int64_t i3 = r / (out.ne[1] * out.ne[2]);
                fn(f32_row(out, i1, i2, i3), f32_row(x, i1, i2, i3),
                   f32_row(y, i1 % y.ne[1], i2 % y.ne[2], i3 % y.ne[3]));
            }
        },
        row_chunk(out));
}

// Calls fn(in_row, out_row) for every row.
template <typename Fn>
void for_each_row(const NodeArgs& a, ThreadPool& pool, Fn fn) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    pool.parallel_for(
        dwell_tensor_nrows(&out),
        [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) fn(f32_row_flat(x, r), f32_row_flat(out, r));
        },
        row_chunk(out));
}

}  // namespace

OpVerdict check_binary(const NodeArgs& a) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& y = a.input(1);
    if (auto p = check_same_f32(x, a.output(), "input 0")) return p;
    if (y.dtype != DWELL_F32) return unsupported("input 1 must be F32");
    bool ok = y.ne[0] == x.ne[0];
    for (int d = 1; d < DWELL_MAX_DIMS; ++d) ok = ok && (y.ne[d] == x.ne[d] || y.ne[d] == 1);
    if (!ok) {
        return invalid("input 1 " + shape_string(y) + " does not broadcast over " +
                       shape_string(x));
    }
    return std::nullopt;
}

void run_add(const NodeArgs& a, ThreadPool& pool) {
    const int64_t n = a.output().ne[0];
    const VecKernels& vk = vec_kernels();
    for_each_row_pair(
        a, pool, [n, &vk](float* dst, const float* x, const float* y) { vk.add(x, y, dst, n); });
}

void run_mul(const NodeArgs& a, ThreadPool& pool) {
    const int64_t n = a.output().ne[0];
    const VecKernels& vk = vec_kernels();
    for_each_row_pair(
        a, pool, [n, &vk](float* dst, const float* x, const float* y) { vk.mul(x, y, dst, n); });
}

OpVerdict check_unary(const NodeArgs& a) {
    return check_same_f32(a.input(0), a.output(), "input");
}

void run_scale(const NodeArgs& a, ThreadPool& pool) {
    const float s = a.node->fparams[0];
    const int64_t n = a.output().ne[0];
    const VecKernels& vk = vec_kernels();
    for_each_row(a, pool, [s, n, &vk](const float* x, float* y) { vk.scale(x, s, y, n); });
}

void run_silu(const NodeArgs& a, ThreadPool& pool) {
    const int64_t n = a.output().ne[0];
    const VecKernels& vk = vec_kernels();
    for_each_row(a, pool, [n, &vk](const float* x, float* y) { vk.silu(x, y, n); });
}

void run_gelu(const NodeArgs& a, ThreadPool& pool) {
    const int64_t n = a.output().ne[0];
    const VecKernels& vk = vec_kernels();
    for_each_row(a, pool, [n, &vk](const float* x, float* y) { vk.gelu(x, y, n); });
}

OpVerdict check_softcap(const NodeArgs& a) {
    const float c = a.node->fparams[0];
    if (!(c > 0.0f) || !std::isfinite(c))
        return invalid("the soft-cap fparams[0] = " + std::to_string(c) + " must be > 0");
    return check_unary(a);
}

// As llama.cpp: scaled by 1/c (a multiply, not a divide), tanh, scaled by c.
void run_softcap(const NodeArgs& a, ThreadPool& pool) {
    const float c = a.node->fparams[0];
    const float inv = 1.0f / c;
    const int64_t n = a.output().ne[0];
    for_each_row(a, pool, [c, inv, n](const float* x, float* y) {
        for (int64_t i = 0; i < n; ++i) y[i] = c * std::tanh(x[i] * inv);
    });
}

// As llama.cpp: 1 / (1 + exp(-x)) in float.
void run_sigmoid(const NodeArgs& a, ThreadPool& pool) {
    const int64_t n = a.output().ne[0];
    for_each_row(a, pool, [n](const float* x, float* y) {
        for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
    });
}

// Above 20, log(1 + exp(x)) rounds to x in F32; exp would overflow soon after.
void run_softplus(const NodeArgs& a, ThreadPool& pool) {
    const int64_t n = a.output().ne[0];
    for_each_row(a, pool, [n](const float* x, float* y) {
        for (int64_t i = 0; i < n; ++i)
            y[i] = x[i] > 20.0f ? x[i] : std::log(1.0f + std::exp(x[i]));
    });
}

OpVerdict check_slice(const NodeArgs& a) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    if (x.dtype != DWELL_F32) return unsupported("input must be F32");
    const int64_t first = a.node->iparams[0];
    const int64_t n = a.node->iparams[1];
    if (first < 0 || n < 1 || first + n > x.ne[0])
        return invalid("columns " + std::to_string(first) + " + " + std::to_string(n) +
                       " do not fit in rows of " + shape_string(x));
    bool ok = out.dtype == DWELL_F32 && out.ne[0] == n;
    for (int d = 1; d < DWELL_MAX_DIMS; ++d) ok = ok && out.ne[d] == x.ne[d];
    if (!ok)
        return invalid("output must be F32 [" + std::to_string(n) + ", ...] over the rows of " +
                       shape_string(x) + ", got " + shape_string(out));
    return std::nullopt;
}

void run_slice(const NodeArgs& a, ThreadPool& pool) {
    const int64_t first = a.node->iparams[0];
    const int64_t n = a.output().ne[0];
    for_each_row(a, pool,
                 [first, n](const float* x, float* y) { std::copy(x + first, x + first + n, y); });
}

OpVerdict check_swiglu(const NodeArgs& a) {
    const dwell_tensor& gate = a.input(0);
    const dwell_tensor& up = a.input(1);
    if (auto p = check_same_f32(gate, a.output(), "gate")) return p;
    if (up.dtype != DWELL_F32 || !same_shape(up, gate)) {
        return invalid("up must be F32 " + shape_string(gate) + ", got " + shape_string(up));
    }
    return std::nullopt;
}

void run_swiglu(const NodeArgs& a, ThreadPool& pool) {
    const int64_t n = a.output().ne[0];
    const VecKernels& vk = vec_kernels();
    for_each_row_pair(a, pool, [n, &vk](float* dst, const float* gate, const float* up) {
        vk.swiglu(gate, up, dst, n);
    });
}

}  // namespace dwell::cpu
