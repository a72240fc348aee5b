// GATED_DELTA_NET (ABI 1.7): the gated delta rule of linear-attention
// layers over the batch, carrying each value head's [Dv x Dk] state across
// calls (graph.h). Parallel over value heads: each head's state and output
// rows depend on no other head.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"

namespace dwell::cpu {

namespace {

bool shaped(const dwell_tensor& t, int64_t n0, int64_t n1, int64_t n2) {
    return t.dtype == DWELL_F32 && t.ne[0] == n0 && t.ne[1] == n1 && t.ne[2] == n2 && t.ne[3] == 1;
}

float dot(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

// x / sqrt(sum x^2 + eps), into out (graph.h).
void l2_normalised(const float* x, int64_t n, float eps, float* out) {
    double ss = 0.0;  // a double sum, as the reference's RMS norm keeps
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss + eps));
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv;
}

}  // namespace

OpVerdict check_gated_delta_net(const NodeArgs& a) {
    const dwell_tensor& q = a.input(0);
    const dwell_tensor& v = a.input(2);
    const int64_t dk = q.ne[0], hk = q.ne[1], T = q.ne[2];
    const int64_t dv = v.ne[0], hv = v.ne[1];
    if (!shaped(q, dk, hk, T) || !shaped(a.input(1), dk, hk, T))
        return invalid("q and k must be F32 [Dk, Hk, T], got " + shape_string(q) + " and " +
                       shape_string(a.input(1)));
    if (!shaped(v, dv, hv, T) || hv % hk != 0)
        return invalid("v must be F32 [Dv, Hv, " + std::to_string(T) +
                       "] with Hv a multiple of Hk = " + std::to_string(hk) + ", got " +
                       shape_string(v));
    if (!shaped(a.input(3), hv, T, 1) || !shaped(a.input(4), hv, T, 1))
        return invalid("g and beta must be F32 [" + std::to_string(hv) + ", " + std::to_string(T) +
                       "], got " + shape_string(a.input(3)) + " and " + shape_string(a.input(4)));
    const dwell_tensor& st = a.input(5);
    if (!shaped(st, dk, dv, hv))
        return invalid("state must be F32 [" + std::to_string(dk) + ", " + std::to_string(dv) +
                       ", " + std::to_string(hv) + "], got " + shape_string(st));
    if (!shaped(a.output(), dv, hv, T))
        return invalid("output must be F32 " + shape_string(v) + ", got " +
                       shape_string(a.output()));
    const int32_t l2 = a.node->iparams[0];
    if (l2 != 0 && l2 != 1) return invalid("iparams[0] must be 0 or 1");
    const float scale = a.node->fparams[0], eps = a.node->fparams[1];
    if (!std::isfinite(scale) || !std::isfinite(eps) || eps < 0.0f || (l2 == 1 && eps == 0.0f))
        return invalid(
            "the scale and epsilon must be finite, the epsilon > 0 with L2 (>= 0 without)");
    // The state is written while the others are read: no shared memory.
    for (int i = 0; i < 5; ++i)
        if (st.data != nullptr && a.input(i).data == st.data)
            return unsupported("the state shares memory with input " + std::to_string(i));
    return std::nullopt;
}

void run_gated_delta_net(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& q = a.input(0);
    const dwell_tensor& k = a.input(1);
    const dwell_tensor& v = a.input(2);
    const dwell_tensor& g = a.input(3);
    const dwell_tensor& beta = a.input(4);
    const dwell_tensor& st = a.input(5);
    const dwell_tensor& out = a.output();
    const int64_t dk = q.ne[0], hk = q.ne[1], T = q.ne[2];
    const int64_t dv = v.ne[0], hv = v.ne[1];
    const bool l2 = a.node->iparams[0] == 1;
    const float scale = a.node->fparams[0];
    const float eps = a.node->fparams[1];

    pool.parallel_for(
        hv,
        [&](int64_t begin, int64_t end) {
            std::vector<float> qn(static_cast<size_t>(dk)), kn(static_cast<size_t>(dk));
            std::vector<float> d(static_cast<size_t>(dv));
            for (int64_t h = begin; h < end; ++h) {
                const int64_t hq = h % hk;
                for (int64_t t = 0; t < T; ++t) {
                    const float* qr = f32_row(q, hq, t);
                    const float* kr = f32_row(k, hq, t);
                    if (l2) {
                        l2_normalised(qr, dk, eps, qn.data());
                        l2_normalised(kr, dk, eps, kn.data());
                        qr = qn.data();
                        kr = kn.data();
                    }
                    const float* vr = f32_row(v, h, t);
                    const float decay = std::exp(f32_row(g, t)[h]);
                    const float b = f32_row(beta, t)[h];
                    // Row j of the state is value dim j: decay, then the
                    // delta against what the state recalls for this key.
                    for (int64_t j = 0; j < dv; ++j) {
                        float* s = f32_row(st, j, h);
                        for (int64_t i = 0; i < dk; ++i) s[i] *= decay;
                        d[static_cast<size_t>(j)] = (vr[j] - dot(s, kr, dk)) * b;
                    }
                    float* o = f32_row(out, h, t);
                    for (int64_t j = 0; j < dv; ++j) {
                        float* s = f32_row(st, j, h);
                        const float dj = d[static_cast<size_t>(j)];
                        for (int64_t i = 0; i < dk; ++i) s[i] += kr[i] * dj;
                        o[j] = dot(s, qr, dk) * scale;
                    }
                }
            }
        },
        1);
}

}  // namespace dwell::cpu
