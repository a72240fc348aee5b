// ROPE: x [head_dim, n_head, T] F32, positions I32 [T], optional frequency
// factors F32 [n_rot/2] (ABI 1.5) -> same shape.
//
// The angles follow ggml exactly, since reference outputs come from
// llama.cpp: theta_scale = freq_base^(-2/n_rot) in float, and the angle of
// pair i is freq_scale * (pos * theta_scale^i) with the power built by
// repeated float multiplication, not by powf per pair; a frequency factor
// divides pos * theta_scale^i before freq_scale multiplies it, and the
// attention factor multiplies cos and sin, both in that order as ggml
// rounds them. The angles' cos/sin
// stay scalar (once per token, shared by all heads); the rotation itself
// goes through the vector math table, which rounds it exactly as the scalar
// formula does.
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"
#include "simd/vec_math.hpp"

namespace dwell::cpu {

OpVerdict check_rope(const NodeArgs& a) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& pos = a.input(1);
    const dwell_tensor& out = a.output();
    if (x.dtype != DWELL_F32) return unsupported("input must be F32");
    if (x.ne[3] != 1) return invalid("input must be [head_dim, n_head, T], got " + shape_string(x));
    if (pos.dtype != DWELL_I32 || pos.ne[0] != x.ne[2] || pos.ne[1] != 1 || pos.ne[2] != 1 ||
        pos.ne[3] != 1) {
        return invalid("positions must be I32 [" + std::to_string(x.ne[2]) + "], got " +
                       shape_string(pos));
    }
    if (out.dtype != DWELL_F32 || !same_shape(x, out)) {
        return invalid("output must be F32 " + shape_string(x) + ", got " + shape_string(out));
    }
    const int32_t mode = a.node->iparams[0];
    const int32_t n_rot = a.node->iparams[1];
    if (mode != DWELL_ROPE_NORM && mode != DWELL_ROPE_NEOX) {
        return unsupported("rope mode " + std::to_string(mode) + " is not supported");
    }
    if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > x.ne[0]) {
        return invalid("n_rot " + std::to_string(n_rot) + " must be even and in (0, " +
                       std::to_string(x.ne[0]) + "]");
    }
    const float base = a.node->fparams[0];
    const float scale = a.node->fparams[1];
    if (!(base > 0.0f) || !std::isfinite(base) || !std::isfinite(scale)) {
        return invalid("freq_base must be positive and freq_scale finite");
    }
    if (!std::isfinite(a.node->fparams[2])) return invalid("attn_factor must be finite");
    if (a.node->n_inputs > 2) {
        const dwell_tensor& f = a.input(2);
        if (f.dtype != DWELL_F32 || f.ne[0] != n_rot / 2 || f.ne[1] != 1 || f.ne[2] != 1 ||
            f.ne[3] != 1 || !dwell_tensor_is_contiguous(&f)) {
            return invalid("frequency factors must be F32 [" + std::to_string(n_rot / 2) +
                           "], got " + shape_string(f));
        }
    }
    return std::nullopt;
}

void run_rope(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& positions = a.input(1);
    const dwell_tensor& out = a.output();
    const bool neox = a.node->iparams[0] == DWELL_ROPE_NEOX;
    const int64_t n_rot = a.node->iparams[1];
    const int64_t half = n_rot / 2;
    const int64_t head_dim = x.ne[0];
    const float freq_base = a.node->fparams[0];
    const float freq_scale = a.node->fparams[1];
    const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
    // 0 is what a plugin that passes two fparams leaves: no scaling.
    const float attn_factor = a.node->fparams[2] == 0.0f ? 1.0f : a.node->fparams[2];
    const float* factors = a.node->n_inputs > 2 ? f32_row(a.input(2), 0) : nullptr;
    const int32_t* pos = i32_row(positions, 0);
    const VecKernels& vk = vec_kernels();
    const auto rotate = neox ? vk.rope_neox : vk.rope_norm;

    // One token per item: its cos/sin table is shared by all of its heads.
    pool.parallel_for(x.ne[2], [&](int64_t begin, int64_t end) {
        std::vector<float> cos_t(static_cast<size_t>(half));
        std::vector<float> sin_t(static_cast<size_t>(half));
        for (int64_t t = begin; t < end; ++t) {
            float theta_base = static_cast<float>(pos[t]);
            for (int64_t i = 0; i < half; ++i) {
                const float theta =
                    freq_scale * (factors != nullptr ? theta_base / factors[i] : theta_base);
                cos_t[static_cast<size_t>(i)] = std::cos(theta) * attn_factor;
                sin_t[static_cast<size_t>(i)] = std::sin(theta) * attn_factor;
                theta_base *= theta_scale;
            }
            for (int64_t h = 0; h < x.ne[1]; ++h) {
                const float* src = f32_row(x, h, t);
                float* dst = f32_row(out, h, t);
                // Pair i is (2i, 2i+1) in NORM mode, (i, i + n_rot/2) in NEOX.
                rotate(src, cos_t.data(), sin_t.data(), dst, half);
                if (dst != src && n_rot < head_dim) {
                    std::memcpy(dst + n_rot, src + n_rot,
                                static_cast<size_t>(head_dim - n_rot) * sizeof(float));
                }
            }
        }
    });
}

}  // namespace dwell::cpu
