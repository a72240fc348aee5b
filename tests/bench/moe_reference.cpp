#include "moe_reference.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

#include "dwell/tensor.h"

namespace dwell::bench {

namespace {

int64_t int_key(const dwell_metadata& m, const std::string& key, std::optional<int64_t> fallback) {
    int64_t v = 0;
    if (m.get_int(m.self, key.c_str(), &v)) return v;
    if (fallback) return *fallback;
    throw std::runtime_error("metadata key " + key + " is missing");
}

double float_key(const dwell_metadata& m, const std::string& key, double fallback) {
    double v = 0;
    return m.get_float(m.self, key.c_str(), &v) ? v : fallback;
}

// Elements [first, first + count) of a tensor, as doubles.
std::vector<double> values(const ModelSource& src, const std::string& name, int64_t first = 0,
                           int64_t count = -1) {
    const SourceTensor* t = src.find_tensor(name);
    if (t == nullptr || t->data == nullptr)
        throw std::runtime_error("tensor " + name + " is missing");
    const int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (count < 0) count = n - first;
    std::vector<double> out(static_cast<size_t>(count));
    if (t->dtype == DWELL_F32) {
        const auto* p = reinterpret_cast<const float*>(t->data) + first;
        std::copy(p, p + count, out.begin());
    } else if (t->dtype == DWELL_F16) {
        const auto* p = reinterpret_cast<const uint16_t*>(t->data) + first;
        for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = dwell_fp16_to_fp32(p[i]);
    } else {
        throw std::runtime_error("tensor " + name + " is " + t->type_name +
                                 "; the reference reads f32 and f16 only");
    }
    return out;
}

std::string blk(int64_t l, const char* what) {
    return "blk." + std::to_string(l) + "." + what + ".weight";
}

// y[r] = sum_c W[r][c] x[c]; W has x.size() columns.
std::vector<double> matvec(const std::vector<double>& w, const std::vector<double>& x) {
    const size_t cols = x.size();
    std::vector<double> y(w.size() / cols);
    for (size_t r = 0; r < y.size(); ++r) {
        double s = 0;
        for (size_t c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
        y[r] = s;
    }
    return y;
}

std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& w,
                             double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
    return y;
}

// Rotates pairs (2i, 2i + 1) of each head's first n_rot values.
void rope(std::vector<double>& v, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
          double base) {
    for (int64_t h = 0; h < n_heads; ++h) {
        for (int64_t i = 0; i < n_rot / 2; ++i) {
            const double theta =
                static_cast<double>(pos) *
                std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
            const double c = std::cos(theta), s = std::sin(theta);
            double& a = v[static_cast<size_t>(h * head_dim + 2 * i)];
            double& b = v[static_cast<size_t>(h * head_dim + 2 * i + 1)];
            const double a0 = a, b0 = b;
            a = a0 * c - b0 * s;
            b = a0 * s + b0 * c;
        }
    }
}

}  // namespace

MoeReference::MoeReference(const ModelSource& src) {
    const dwell_metadata& m = src.metadata();
    const std::string p = "llama.";
    n_embd_ = int_key(m, p + "embedding_length", std::nullopt);
    n_layer_ = int_key(m, p + "block_count", std::nullopt);
    n_ff_ = int_key(m, p + "feed_forward_length", std::nullopt);
    n_head_ = int_key(m, p + "attention.head_count", std::nullopt);
    n_head_kv_ = int_key(m, p + "attention.head_count_kv", n_head_);
    head_dim_ = int_key(m, p + "attention.key_length", n_embd_ / n_head_);
    n_rot_ = int_key(m, p + "rope.dimension_count", head_dim_);
    n_expert_ = int_key(m, p + "expert_count", std::nullopt);
    n_used_ = int_key(m, p + "expert_used_count", std::nullopt);
    rms_eps_ = float_key(m, p + "attention.layer_norm_rms_epsilon", 1e-5);
    rope_base_ = float_key(m, p + "rope.freq_base", 10000.0);
    if (n_expert_ < 1 || n_used_ < 1 || n_used_ > n_expert_)
        throw std::runtime_error("the reference needs 1 <= expert_used_count <= expert_count");

    token_embd_ = values(src, "token_embd.weight");
    n_vocab_ = static_cast<int64_t>(token_embd_.size()) / n_embd_;
    output_norm_ = values(src, "output_norm.weight");
    tied_ = src.find_tensor("output.weight") == nullptr;
    if (!tied_) output_ = values(src, "output.weight");
    const int64_t slice = n_embd_ * n_ff_;  // values of one expert's matrix
    for (int64_t l = 0; l < n_layer_; ++l) {
        Layer L;
        L.attn_norm = values(src, blk(l, "attn_norm"));
        L.wq = values(src, blk(l, "attn_q"));
        L.wk = values(src, blk(l, "attn_k"));
        L.wv = values(src, blk(l, "attn_v"));
        L.wo = values(src, blk(l, "attn_output"));
        L.ffn_norm = values(src, blk(l, "ffn_norm"));
        L.router = values(src, blk(l, "ffn_gate_inp"));
        for (int64_t e = 0; e < n_expert_; ++e) {
            L.gate.push_back(values(src, blk(l, "ffn_gate_exps"), e * slice, slice));
            L.up.push_back(values(src, blk(l, "ffn_up_exps"), e * slice, slice));
            L.down.push_back(values(src, blk(l, "ffn_down_exps"), e * slice, slice));
        }
        layers_.push_back(std::move(L));
    }
}

std::vector<float> MoeReference::step(int32_t token, MoeRouting* routing) {
    if (token < 0 || token >= n_vocab_) throw std::runtime_error("token id out of range");
    const int64_t pos = n_past_++;
    const int64_t kv_width = head_dim_ * n_head_kv_;
    const auto row = token_embd_.begin() + token * n_embd_;
    std::vector<double> x(row, row + n_embd_);
    MoeRouting r;
    r.min_margin = INFINITY;

    for (auto& L : layers_) {
        std::vector<double> h = rms_norm(x, L.attn_norm, rms_eps_);
        std::vector<double> q = matvec(L.wq, h), k = matvec(L.wk, h), v = matvec(L.wv, h);
        rope(q, n_head_, head_dim_, n_rot_, pos, rope_base_);
        rope(k, n_head_kv_, head_dim_, n_rot_, pos, rope_base_);
        L.k_cache.insert(L.k_cache.end(), k.begin(), k.end());
        L.v_cache.insert(L.v_cache.end(), v.begin(), v.end());

        std::vector<double> attn(static_cast<size_t>(n_head_ * head_dim_), 0.0);
        const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
        for (int64_t hd = 0; hd < n_head_; ++hd) {
            const int64_t kvh = hd / (n_head_ / n_head_kv_);
            std::vector<double> score(static_cast<size_t>(pos + 1));
            for (int64_t t = 0; t <= pos; ++t) {
                double s = 0;
                for (int64_t d = 0; d < head_dim_; ++d) {
                    s += q[static_cast<size_t>(hd * head_dim_ + d)] *
                         L.k_cache[static_cast<size_t>(t * kv_width + kvh * head_dim_ + d)];
                }
                score[static_cast<size_t>(t)] = s * scale;
            }
            const double mx = *std::max_element(score.begin(), score.end());
            double sum = 0;
            for (double& s : score) sum += (s = std::exp(s - mx));
            for (int64_t t = 0; t <= pos; ++t) {
                for (int64_t d = 0; d < head_dim_; ++d) {
                    attn[static_cast<size_t>(hd * head_dim_ + d)] +=
                        score[static_cast<size_t>(t)] / sum *
                        L.v_cache[static_cast<size_t>(t * kv_width + kvh * head_dim_ + d)];
                }
            }
        }
        const std::vector<double> o = matvec(L.wo, attn);
        for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];

        // Router: the k largest logits (ties to the lower index), weighted by
        // the softmax over them.
        h = rms_norm(x, L.ffn_norm, rms_eps_);
        const std::vector<double> logits = matvec(L.router, h);
        std::vector<int32_t> order(logits.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
        const std::vector<int32_t> chosen(order.begin(), order.begin() + n_used_);
        if (n_used_ < n_expert_) {
            r.min_margin = std::min(
                r.min_margin, logits[chosen.back()] - logits[order[static_cast<size_t>(n_used_)]]);
        }
        double wsum = 0;
        std::vector<double> w;
        for (int32_t e : chosen) w.push_back(std::exp(logits[e] - logits[chosen.front()]));
        for (double v_ : w) wsum += v_;
        std::vector<double> moe(x.size(), 0.0);
        for (size_t i = 0; i < chosen.size(); ++i) {
            const auto e = static_cast<size_t>(chosen[i]);
            const std::vector<double> g = matvec(L.gate[e], h), u = matvec(L.up[e], h);
            std::vector<double> a(g.size());
            for (size_t j = 0; j < a.size(); ++j) a[j] = g[j] / (1.0 + std::exp(-g[j])) * u[j];
            const std::vector<double> d = matvec(L.down[e], a);
            for (size_t j = 0; j < moe.size(); ++j) moe[j] += w[i] / wsum * d[j];
        }
        for (size_t i = 0; i < x.size(); ++i) x[i] += moe[i];
        r.experts.push_back(chosen);
    }

    const std::vector<double> h = rms_norm(x, output_norm_, rms_eps_);
    const std::vector<double> logits = matvec(tied_ ? token_embd_ : output_, h);
    if (routing) *routing = std::move(r);
    return {logits.begin(), logits.end()};
}

}  // namespace dwell::bench
