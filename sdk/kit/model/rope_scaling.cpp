#include "model/rope_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace dwell::model_kit {

namespace {

// The pair index below which a pair turns more than `turns` times over the
// original context.
float correction_dim(int32_t n_rot, int64_t n_ctx_orig, float turns, float base) {
    return static_cast<float>(n_rot) *
           std::log(static_cast<float>(n_ctx_orig) / (turns * 2.0f * std::numbers::pi_v<float>)) /
           (2.0f * std::log(base));
}

float ramp(float lo, float hi, int32_t pair) {
    // A range of one pair would divide by zero: a step there instead.
    const float y = (static_cast<float>(pair) - lo) / std::max(0.001f, hi - lo);
    return 1.0f - std::clamp(y, 0.0f, 1.0f);
}

float finite_or(const MetadataReader& m, const std::string& key, float fallback, float lo, float hi,
                const char* range) {
    const float v = m.float_or(key, fallback);
    if (!(v >= lo && v <= hi))
        throw std::runtime_error("metadata key " + key + " = " + std::to_string(v) +
                                 " is out of range (" + range + ")");
    return v;
}

}  // namespace

std::vector<float> yarn_frequency_factors(const YarnParams& p, int32_t n_rot, float freq_base) {
    const float lo =
        std::max(0.0f, std::floor(correction_dim(n_rot, p.n_ctx_orig, p.beta_fast, freq_base)));
    const float hi =
        std::min(static_cast<float>(n_rot - 1),
                 std::ceil(correction_dim(n_rot, p.n_ctx_orig, p.beta_slow, freq_base)));
    const float s = 1.0f / p.factor;
    std::vector<float> f(static_cast<size_t>(n_rot / 2));
    for (int32_t i = 0; i < n_rot / 2; ++i) {
        const float r = ramp(lo, hi, i) * p.ext_factor;
        f[static_cast<size_t>(i)] = 1.0f / (s * (1.0f - r) + r);
    }
    return f;
}

float yarn_attn_factor(const YarnParams& p) {
    if (p.ext_factor == 0.0f) return p.attn_factor;
    if (p.factor <= 1.0f) return 1.0f;
    const float mscale = 1.0f + 0.1f * std::log(p.factor);
    if (p.log_multiplier == 0.0f) return mscale;
    return mscale / (1.0f + p.log_multiplier * std::log(p.factor));
}

RopeScaling read_rope_scaling(const MetadataReader& m, int32_t n_rot, float freq_base) {
    const auto key = [&](const char* suffix) { return m.arch_key(suffix); };
    RopeScaling r;
    r.attn_factor = m.positive_float_or(key("rope.scaling.attn_factor"), 1.0f);
    const std::string type = m.string(key("rope.scaling.type")).value_or("");
    const float factor = m.float_or(key("rope.scaling.factor"), 0.0f);
    if (type.empty() || type == "none") return r;
    if (type == "linear" || type == "longrope") {
        // LongRoPE's scaling is its factor tensors (the family reads them); a
        // factor beside it scales positions linearly, as for "linear".
        if (factor > 0) {
            r.freq_scale = 1.0f / factor;
            if (!std::isfinite(r.freq_scale))
                throw std::runtime_error("metadata key " + key("rope.scaling.factor") +
                                         " is too small to divide by");
        }
        return r;
    }
    if (type != "yarn") {
        throw std::runtime_error("metadata key " + key("rope.scaling.type") + " = '" + type +
                                 "' is not supported (none, linear, longrope and yarn are)");
    }

    YarnParams p;
    if (!m.has(key("rope.scaling.factor")))
        throw std::runtime_error("metadata key " + key("rope.scaling.factor") +
                                 " is missing; YaRN needs it");
    p.factor = finite_or(m, key("rope.scaling.factor"), 1.0f, 1.0f, 1e6f, "1 to 1e6");
    const std::string orig = key("rope.scaling.original_context_length");
    if (!m.has(orig))
        throw std::runtime_error("metadata key " + orig + " is missing; YaRN needs it");
    p.n_ctx_orig = m.require_int(orig, 1, int64_t{1} << 24);
    p.beta_fast =
        finite_or(m, key("rope.scaling.yarn_beta_fast"), p.beta_fast, 1e-3f, 1e6f, "1e-3 to 1e6");
    p.beta_slow =
        finite_or(m, key("rope.scaling.yarn_beta_slow"), p.beta_slow, 1e-3f, 1e6f, "1e-3 to 1e6");
    p.ext_factor =
        finite_or(m, key("rope.scaling.yarn_ext_factor"), p.ext_factor, 0.0f, 1.0f, "0 to 1");
    p.attn_factor = finite_or(m, key("rope.scaling.yarn_attn_factor"), p.attn_factor, 1e-3f, 1e3f,
                              "1e-3 to 1e3");
    p.log_multiplier = finite_or(m, key("rope.scaling.yarn_log_multiplier"), p.log_multiplier, 0.0f,
                                 10.0f, "0 to 10");

    r.yarn = true;
    r.attn_factor *= yarn_attn_factor(p);
    if (p.ext_factor == 0.0f) {
        // No ramp: plain interpolation of every pair.
        r.freq_scale = 1.0f / p.factor;
    } else {
        r.freq_factors = yarn_frequency_factors(p, n_rot, freq_base);
    }
    return r;
}

}  // namespace dwell::model_kit
