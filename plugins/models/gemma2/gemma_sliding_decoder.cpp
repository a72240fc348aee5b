#include "gemma_sliding_decoder.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace dwell::gemma {

namespace kit = dwell::model_kit;

std::vector<bool> swa_pattern(int32_t n_layer, int64_t n_pattern) {
    std::vector<bool> local(static_cast<size_t>(n_layer));
    for (int32_t l = 0; l < n_layer; ++l)
        local[static_cast<size_t>(l)] = n_pattern == 0 || l % n_pattern < n_pattern - 1;
    return local;
}

void read_sliding_keys(const kit::MetadataReader& m, SlidingHParams& h, int64_t default_window,
                       int64_t min_window, int64_t default_pattern, float default_base_swa) {
    const auto key = [&](const char* s) { return m.arch_key(s); };
    const kit::TransformerHParams& b = h.base;
    // This decoder's rotation takes no factors: YaRN refused, not ignored.
    if (!b.rope_freq_factors.empty() || b.rope_attn_factor != 1.0f)
        throw std::runtime_error("metadata key " + key("rope.scaling.type") +
                                 " asks for YaRN or an attention factor, which dwell does not "
                                 "support for " +
                                 b.arch);
    // Local layers with another head size or rotation would need caches of
    // another width: refused rather than misread.
    if (m.int_or(key("attention.key_length_swa"), b.head_dim, 1, 1 << 12) != b.head_dim ||
        m.int_or(key("attention.value_length_swa"), b.head_dim, 1, 1 << 12) != b.head_dim)
        throw std::runtime_error(
            key("attention.key_length_swa") +
            " differs from attention.key_length, which dwell does not support");
    if (m.int_or(key("rope.dimension_count_swa"), b.n_rot, 2, b.head_dim) != b.n_rot)
        throw std::runtime_error(
            key("rope.dimension_count_swa") +
            " differs from rope.dimension_count, which dwell does not support");
    h.n_swa =
        m.int_or(key("attention.sliding_window"), default_window, min_window, int64_t{1} << 24);
    h.is_swa.assign(static_cast<size_t>(b.n_layer), false);
    if (h.n_swa == 0) return;
    const std::string pattern = key("attention.sliding_window_pattern");
    if (const char* k = m.kind(pattern); k && std::string(k) == "an array")
        throw std::runtime_error("metadata key " + pattern +
                                 " is a per-layer array, which dwell does not read yet (an integer "
                                 "period is supported)");
    h.is_swa = swa_pattern(b.n_layer, m.int_or(pattern, default_pattern, 0, 4096));
    h.rope_base_swa = m.positive_float_or(key("rope.freq_base_swa"), default_base_swa);
}

float gemma_attention_scale(const kit::TransformerHParams& h, int32_t layers_27b) {
    const int64_t d = h.n_layer == layers_27b ? h.n_embd / h.n_head : h.head_dim;
    if (d < 1) throw std::runtime_error(h.arch + ": the attention scale's head size is 0");
    return 1.0f / std::sqrt(static_cast<float>(d));
}

SlidingDecoder::SlidingDecoder(SlidingHParams h) : h_(std::move(h)) {
    if (h_.always_tied) h_.base.tied_output = true;
}

std::vector<kit::TensorSpec> SlidingDecoder::tensors() const {
    const kit::TransformerHParams& b = h_.base;
    std::vector<kit::TensorSpec> t;
    t.push_back({"token_embd.weight", {b.n_embd, b.n_vocab}});
    for (int32_t l = 0; l < b.n_layer; ++l) {
        t.push_back({kit::layer_tensor(l, "attn_norm"), {b.n_embd}});
        kit::add_attention_tensors(t, b, l, false);
        if (h_.qk_norm) {
            t.push_back({kit::layer_tensor(l, "attn_q_norm"), {b.head_dim}});
            t.push_back({kit::layer_tensor(l, "attn_k_norm"), {b.head_dim}});
        }
        t.push_back({kit::layer_tensor(l, "post_attention_norm"), {b.n_embd}});
        t.push_back({kit::layer_tensor(l, "ffn_norm"), {b.n_embd}});
        kit::add_gated_feed_forward_tensors(t, b, l);
        t.push_back({kit::layer_tensor(l, "post_ffw_norm"), {b.n_embd}});
    }
    t.push_back({"output_norm.weight", {b.n_embd}});
    if (!h_.always_tied) t.push_back({"output.weight", {b.n_embd, b.n_vocab}, false});
    return t;
}

int32_t SlidingDecoder::attention(const kit::Builder& b, int32_t layer, int32_t x,
                                  int32_t positions, int64_t n_tokens) const {
    const kit::TransformerHParams& h = h_.base;
    const bool local = h_.is_swa[static_cast<size_t>(layer)];
    int32_t q = kit::linear(b, b.weight(kit::layer_tensor(layer, "attn_q")), x);
    int32_t k = kit::linear(b, b.weight(kit::layer_tensor(layer, "attn_k")), x);
    int32_t v = kit::linear(b, b.weight(kit::layer_tensor(layer, "attn_v")), x);
    q = b.reshape(q, {h.head_dim, h.n_head, n_tokens});
    k = b.reshape(k, {h.head_dim, h.n_head_kv, n_tokens});
    v = b.reshape(v, {h.head_dim, h.n_head_kv, n_tokens});
    if (h_.qk_norm) {
        // RMSNorm over each head's head_dim values, before the rotation.
        q = kit::rms_norm(b, q, b.weight(kit::layer_tensor(layer, "attn_q_norm")), h.rms_eps);
        k = kit::rms_norm(b, k, b.weight(kit::layer_tensor(layer, "attn_k_norm")), h.rms_eps);
    }
    const float base = local ? h_.rope_base_swa : h.rope_freq_base;
    const float scale = local ? h_.rope_scale_swa : h.rope_freq_scale;
    q = b.op(DWELL_OP_ROPE, {q, positions}, {DWELL_ROPE_NEOX, h.n_rot}, {base, scale});
    k = b.op(DWELL_OP_ROPE, {k, positions}, {DWELL_ROPE_NEOX, h.n_rot}, {base, scale});
    const int32_t window = local ? static_cast<int32_t>(h_.n_swa) : 0;
    int32_t attn = b.op(DWELL_OP_ATTENTION, {q, k, v, b.kv(layer, 0), b.kv(layer, 1), positions},
                        {window}, {h_.attn_scale, h_.attn_softcap});
    attn = b.reshape(attn, {h.q_width(), n_tokens});
    return b.op(DWELL_OP_MATMUL, {b.weight(kit::layer_tensor(layer, "attn_output")), attn});
}

void SlidingDecoder::build_graph(const kit::Builder& b, const dwell_batch& batch) const {
    const kit::TransformerHParams& h = h_.base;
    const int64_t T = batch.n_tokens;
    const int64_t R = batch.n_outputs;
    const int32_t tokens = b.input("tokens", T);
    const int32_t positions = b.input("positions", T);
    const int32_t out_rows = b.input("out_rows", R);
    const auto norm = [&](int32_t x, int32_t l, const char* what) {
        return kit::rms_norm(b, x, b.weight(kit::layer_tensor(l, what)), h.rms_eps);
    };

    b.layer(-1);
    int32_t x = b.op(DWELL_OP_GET_ROWS, {b.weight("token_embd.weight"), tokens});
    x = b.op(DWELL_OP_SCALE, {x}, {}, {std::sqrt(static_cast<float>(h.n_embd))});
    for (int32_t l = 0; l < h.n_layer; ++l) {
        b.layer(l);
        int32_t cur = attention(b, l, norm(x, l, "attn_norm"), positions, T);
        x = b.op(DWELL_OP_ADD, {x, norm(cur, l, "post_attention_norm")});
        cur = kit::gated_feed_forward(b, l, norm(x, l, "ffn_norm"), kit::GatedActivation::geglu);
        x = b.op(DWELL_OP_ADD, {x, norm(cur, l, "post_ffw_norm")});
    }
    b.layer(-1);
    if (R != T) x = b.op(DWELL_OP_GET_ROWS, {x, out_rows});
    x = kit::rms_norm(b, x, b.weight("output_norm.weight"), h.rms_eps);
    const int32_t head = b.weight(h.tied_output ? "token_embd.weight" : "output.weight");
    int32_t logits = b.op(DWELL_OP_MATMUL, {head, x});
    if (h_.final_softcap > 0.0f) logits = b.op(DWELL_OP_SOFTCAP, {logits}, {}, {h_.final_softcap});
    b.output(logits);
}

}  // namespace dwell::gemma
