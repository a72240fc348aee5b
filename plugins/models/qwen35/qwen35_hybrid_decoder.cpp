#include "qwen35_hybrid_decoder.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace dwell::qwen35 {

namespace kit = dwell::model_kit;
using kit::layer_tensor;

namespace {

// SHORT_CONV's tap range (graph.h).
constexpr int64_t kMinTaps = 2;
constexpr int64_t kMaxTaps = 16;

std::runtime_error bad(const std::string& what) {
    return std::runtime_error(what);
}

}  // namespace

Qwen35HParams read_qwen35_hparams(const kit::MetadataReader& m) {
    const auto key = [&](const char* suffix) { return m.arch_key(suffix); };
    Qwen35HParams h;
    h.base = kit::read_transformer_hparams(m, 1e-6f);
    if (!m.has(key("attention.layer_norm_rms_epsilon")))
        throw bad("metadata key " + key("attention.layer_norm_rms_epsilon") +
                  " is missing; qwen35 files must say their norm epsilon");
    // This decoder's rotation takes no factors: YaRN refused, not ignored.
    if (!h.base.rope_freq_factors.empty() || h.base.rope_attn_factor != 1.0f)
        throw bad("metadata key " + key("rope.scaling.type") +
                  " asks for YaRN or an attention factor, which dwell does not support for " +
                  h.base.arch);
    // Multi-token-prediction blocks follow the trunk; only the trunk runs.
    const int64_t n_nextn =
        m.int_or(key("nextn_predict_layers"), 0, 0, std::max<int64_t>(0, h.base.n_layer - 1));
    h.base.n_layer -= static_cast<int32_t>(n_nextn);

    h.d_conv = m.require_int(key("ssm.conv_kernel"), kMinTaps, kMaxTaps);
    h.head_k = m.require_int(key("ssm.state_size"), 1, 1024);
    h.n_k_heads = m.require_int(key("ssm.group_count"), 1, 1024);
    h.n_v_heads = m.require_int(key("ssm.time_step_rank"), 1, 4096);
    if (h.n_v_heads % h.n_k_heads != 0)
        throw bad("metadata key " + key("ssm.time_step_rank") + " (" + std::to_string(h.n_v_heads) +
                  " value heads) must be a multiple of " + key("ssm.group_count") + " (" +
                  std::to_string(h.n_k_heads) + " key heads)");
    const int64_t d_inner = m.require_int(key("ssm.inner_size"), 1, int64_t{1} << 20);
    if (d_inner != h.value_dim())
        throw bad("metadata key " + key("ssm.inner_size") + " (" + std::to_string(d_inner) +
                  ") must be " + key("ssm.state_size") + " times " + key("ssm.time_step_rank") +
                  " (" + std::to_string(h.value_dim()) + "): value heads as wide as key heads");

    // RoPE: for text every section of the interleaved multi-section RoPE
    // rotates at the token's position, which is NEOX over n_rot dims when
    // the sections cover n_rot / 2 pairs without a fourth (always-zero)
    // section. The metadata table reads arrays' lengths, not their values.
    if (m.has(key("rope.dimension_sections"))) {
        uint64_t len = 0;
        m.raw().get_array_length(m.raw().self, key("rope.dimension_sections").c_str(), &len);
        if (len != 4)
            throw bad("metadata key " + key("rope.dimension_sections") + " has " +
                      std::to_string(len) + " entries; it needs 4");
    }

    // The layer kinds, from the tensors each layer holds.
    const int32_t n_layer = h.base.n_layer;
    const int64_t interval = m.int_or(key("full_attention_interval"), 0, 1, n_layer);
    const bool listed = m.has(key("attention.recurrent_layers"));
    h.linear_layer.resize(static_cast<size_t>(n_layer));
    for (int32_t l = 0; l < n_layer; ++l) {
        const bool linear = m.tensor(layer_tensor(l, "ssm_conv1d")).has_value();
        const bool attention = m.tensor(layer_tensor(l, "attn_q")).has_value();
        if (linear == attention)
            throw bad("layer " + std::to_string(l) + " has " + (linear ? "both" : "neither") + " " +
                      layer_tensor(l, "ssm_conv1d") + (linear ? " and " : " nor ") +
                      layer_tensor(l, "attn_q") + "; a qwen35 layer is one or the other");
        if (interval > 0 && !listed && linear == ((l + 1) % interval == 0))
            throw bad("layer " + std::to_string(l) + " is " +
                      (linear ? "a delta-net" : "an attention") + " layer, but " +
                      key("full_attention_interval") + " = " + std::to_string(interval) +
                      " makes it " + (linear ? "an attention" : "a delta-net") + " layer");
        h.linear_layer[static_cast<size_t>(l)] = linear;
        if (!linear) continue;
        for (const char* t : {"ssm_conv1d", "ssm_norm", "ssm_a"}) {
            const std::string name = std::string(t) == "ssm_a"
                                         ? "blk." + std::to_string(l) + ".ssm_a"
                                         : layer_tensor(l, t);
            const auto info = m.tensor(name);
            if (info && info->dtype != DWELL_F32 &&
                (t != std::string("ssm_conv1d") || info->dtype != DWELL_F16))
                throw bad("tensor " + name + " is " + dwell_dtype_name(info->dtype) +
                          "; it must be F32" + (t == std::string("ssm_conv1d") ? " or F16" : ""));
        }
    }
    return h;
}

dwell_model_info Qwen35HybridDecoder::info() const {
    dwell_model_info info = h_.base.model_info();
    info.state_elems[0] = h_.conv_dim() * (h_.d_conv - 1);
    info.state_elems[1] = h_.head_k * h_.head_k * h_.n_v_heads;
    // The delta-rule state sums up every token seen (model.h).
    info.flags = DWELL_MODEL_STATE_SPANS_CONTEXT;
    return info;
}

std::vector<kit::TensorSpec> Qwen35HybridDecoder::tensors() const {
    const auto& h = h_.base;
    std::vector<kit::TensorSpec> t;
    t.push_back({"token_embd.weight", {h.n_embd, h.n_vocab}});
    for (int32_t l = 0; l < h.n_layer; ++l) {
        t.push_back({layer_tensor(l, "attn_norm"), {h.n_embd}});
        t.push_back({layer_tensor(l, "post_attention_norm"), {h.n_embd}});
        if (h_.linear_layer[static_cast<size_t>(l)]) {
            const int64_t hv = h_.n_v_heads;
            t.push_back({layer_tensor(l, "attn_qkv"), {h.n_embd, h_.conv_dim()}});
            t.push_back({layer_tensor(l, "attn_gate"), {h.n_embd, h_.value_dim()}});
            t.push_back({layer_tensor(l, "ssm_conv1d"), {h_.d_conv, h_.conv_dim()}});
            t.push_back({layer_tensor(l, "ssm_dt", "bias"), {hv}});
            t.push_back({"blk." + std::to_string(l) + ".ssm_a", {hv}});
            t.push_back({layer_tensor(l, "ssm_beta"), {h.n_embd, hv}});
            t.push_back({layer_tensor(l, "ssm_alpha"), {h.n_embd, hv}});
            t.push_back({layer_tensor(l, "ssm_norm"), {h_.head_k}});
            t.push_back({layer_tensor(l, "ssm_out"), {h_.value_dim(), h.n_embd}});
        } else {
            t.push_back({layer_tensor(l, "attn_q"), {h.n_embd, 2 * h.q_width()}});
            t.push_back({layer_tensor(l, "attn_k"), {h.n_embd, h.kv_width()}});
            t.push_back({layer_tensor(l, "attn_v"), {h.n_embd, h.kv_width()}});
            t.push_back({layer_tensor(l, "attn_output"), {h.q_width(), h.n_embd}});
            t.push_back({layer_tensor(l, "attn_q_norm"), {h.head_dim}});
            t.push_back({layer_tensor(l, "attn_k_norm"), {h.head_dim}});
        }
        kit::add_gated_feed_forward_tensors(t, h, l);
    }
    t.push_back({"output_norm.weight", {h.n_embd}});
    // Optional: when the file lacks it, the output is tied.
    t.push_back({"output.weight", {h.n_embd, h.n_vocab}, false});
    return t;
}

int32_t Qwen35HybridDecoder::delta_net_block(const kit::Builder& b, int32_t layer, int32_t x,
                                             int64_t T) const {
    const auto& h = h_.base;
    const int64_t dk = h_.head_k, hk = h_.n_k_heads, hv = h_.n_v_heads;
    const int64_t key_dim = h_.key_dim(), value_dim = h_.value_dim();
    const auto w = [&](const char* what) { return b.weight(layer_tensor(layer, what)); };

    const int32_t mixed = b.op(DWELL_OP_MATMUL, {w("attn_qkv"), x});
    const int32_t z = b.op(DWELL_OP_MATMUL, {w("attn_gate"), x});
    const int32_t beta = b.op(DWELL_OP_SIGMOID, {b.op(DWELL_OP_MATMUL, {w("ssm_beta"), x})});
    const int32_t alpha = b.op(DWELL_OP_MATMUL, {w("ssm_alpha"), x});
    const int32_t dt = b.weight(layer_tensor(layer, "ssm_dt", "bias"));
    const int32_t a = b.weight("blk." + std::to_string(layer) + ".ssm_a");
    const int32_t g =
        b.op(DWELL_OP_MUL, {b.op(DWELL_OP_SOFTPLUS, {b.op(DWELL_OP_ADD, {alpha, dt})}), a});

    const int32_t conv_state = b.recurrent_state(layer, 0, {h_.conv_dim(), h_.d_conv - 1});
    const int32_t conv =
        b.op(DWELL_OP_SILU, {b.op(DWELL_OP_SHORT_CONV, {mixed, w("ssm_conv1d"), conv_state})});
    const auto part = [&](int64_t first, int64_t n, int64_t heads) {
        return b.reshape(
            b.op(DWELL_OP_SLICE, {conv}, {static_cast<int32_t>(first), static_cast<int32_t>(n)}),
            {dk, heads, T});
    };
    const int32_t q = part(0, key_dim, hk);
    const int32_t k = part(key_dim, key_dim, hk);
    const int32_t v = part(2 * key_dim, value_dim, hv);

    const int32_t state = b.recurrent_state(layer, 1, {dk, dk, hv});
    const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
    int32_t o = b.op(DWELL_OP_GATED_DELTA_NET, {q, k, v, g, beta, state}, {1}, {scale, h.rms_eps});
    o = kit::per_head_rms_norm(b, o, w("ssm_norm"), dk, hv, T, h.rms_eps);
    o = b.op(DWELL_OP_MUL, {b.reshape(o, {value_dim, T}), b.op(DWELL_OP_SILU, {z})});
    return b.op(DWELL_OP_MATMUL, {w("ssm_out"), o});
}

int32_t Qwen35HybridDecoder::attention_block(const kit::Builder& b, int32_t layer, int32_t x,
                                             int32_t positions, int64_t T) const {
    const auto& h = h_.base;
    const int64_t hd = h.head_dim;
    const auto w = [&](const char* what) { return b.weight(layer_tensor(layer, what)); };

    // attn_q's rows hold, per head, the query then the output gate.
    const int32_t qg = b.reshape(b.op(DWELL_OP_MATMUL, {w("attn_q"), x}), {2 * hd, h.n_head * T});
    const auto half = [&](int64_t first) {
        return b.op(DWELL_OP_SLICE, {qg}, {static_cast<int32_t>(first), static_cast<int32_t>(hd)});
    };
    int32_t q = b.reshape(half(0), {hd, h.n_head, T});
    const int32_t gate = b.reshape(half(hd), {h.q_width(), T});
    int32_t k = b.reshape(b.op(DWELL_OP_MATMUL, {w("attn_k"), x}), {hd, h.n_head_kv, T});
    const int32_t v = b.reshape(b.op(DWELL_OP_MATMUL, {w("attn_v"), x}), {hd, h.n_head_kv, T});
    q = kit::per_head_rms_norm(b, q, w("attn_q_norm"), hd, h.n_head, T, h.rms_eps);
    k = kit::per_head_rms_norm(b, k, w("attn_k_norm"), hd, h.n_head_kv, T, h.rms_eps);
    const auto rope = [&](int32_t t) {
        return b.op(DWELL_OP_ROPE, {t, positions}, {DWELL_ROPE_NEOX, h.n_rot},
                    {h.rope_freq_base, h.rope_freq_scale});
    };
    q = rope(q);
    k = rope(k);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    int32_t attn =
        b.op(DWELL_OP_ATTENTION, {q, k, v, b.kv(layer, 0), b.kv(layer, 1), positions}, {}, {scale});
    attn = b.op(DWELL_OP_MUL, {b.reshape(attn, {h.q_width(), T}), b.op(DWELL_OP_SIGMOID, {gate})});
    return b.op(DWELL_OP_MATMUL, {w("attn_output"), attn});
}

void Qwen35HybridDecoder::build_graph(const kit::Builder& b, const dwell_batch& batch) const {
    const auto& h = h_.base;
    const int64_t T = batch.n_tokens;
    const int64_t R = batch.n_outputs;

    const int32_t tokens = b.input("tokens", T);
    const int32_t positions = b.input("positions", T);
    const int32_t out_rows = b.input("out_rows", R);

    b.layer(-1);
    int32_t x = b.op(DWELL_OP_GET_ROWS, {b.weight("token_embd.weight"), tokens});
    for (int32_t l = 0; l < h.n_layer; ++l) {
        b.layer(l);
        int32_t cur = kit::rms_norm(b, x, b.weight(layer_tensor(l, "attn_norm")), h.rms_eps);
        cur = h_.linear_layer[static_cast<size_t>(l)] ? delta_net_block(b, l, cur, T)
                                                      : attention_block(b, l, cur, positions, T);
        x = b.op(DWELL_OP_ADD, {x, cur});

        cur = kit::rms_norm(b, x, b.weight(layer_tensor(l, "post_attention_norm")), h.rms_eps);
        cur = kit::gated_feed_forward(b, l, cur, kit::GatedActivation::swiglu);
        x = b.op(DWELL_OP_ADD, {x, cur});
    }
    b.layer(-1);
    // Only the wanted rows go through the (large) output projection.
    if (R != T) x = b.op(DWELL_OP_GET_ROWS, {x, out_rows});
    x = kit::rms_norm(b, x, b.weight("output_norm.weight"), h.rms_eps);
    const int32_t head = b.weight(h.tied_output ? "token_embd.weight" : "output.weight");
    b.output(b.op(DWELL_OP_MATMUL, {head, x}));
}

}  // namespace dwell::qwen35
