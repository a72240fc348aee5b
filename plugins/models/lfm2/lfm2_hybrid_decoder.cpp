#include "lfm2_hybrid_decoder.hpp"

#include <stdexcept>
#include <string>

namespace dwell::lfm2 {

namespace kit = dwell::model_kit;
using kit::layer_tensor;

namespace {

// SHORT_CONV's tap range (graph.h).
constexpr int64_t kMinTaps = 2;
constexpr int64_t kMaxTaps = 16;

std::runtime_error bad(const std::string& what) {
    return std::runtime_error(what);
}

// The KV heads of attention layer `l`, from the row counts of its Q and K
// projections: the metadata table cannot read head_count_kv's elements.
int64_t kv_heads_of(const kit::MetadataReader& m, int32_t l, int64_t n_head) {
    const auto q = m.tensor(layer_tensor(l, "attn_q"));
    const auto k = m.tensor(layer_tensor(l, "attn_k"));
    if (!q || !k || q->ne.size() != 2 || k->ne.size() != 2)
        throw bad("tensors " + layer_tensor(l, "attn_q") + " and " + layer_tensor(l, "attn_k") +
                  " must both be present and 2-D in an attention layer");
    const int64_t q_rows = q->ne[1];
    const int64_t k_rows = k->ne[1];
    if (q_rows < n_head || q_rows % n_head != 0 || k_rows < 1 || k_rows % (q_rows / n_head) != 0)
        throw bad("tensor " + layer_tensor(l, "attn_k") + " has " + std::to_string(k_rows) +
                  " rows, not a whole number of the heads of " + layer_tensor(l, "attn_q") + " (" +
                  std::to_string(q_rows) + " rows for " + std::to_string(n_head) + " heads)");
    return k_rows / (q_rows / n_head);
}

}  // namespace

Lfm2HParams read_lfm2_hparams(const kit::MetadataReader& m) {
    const auto key = [&](const char* suffix) { return m.arch_key(suffix); };
    const auto n_layer = static_cast<int32_t>(m.require_int(key("block_count"), 1, 4096));
    const int64_t n_head = m.require_int(key("attention.head_count"), 1, 1 << 14);

    // The layer kinds, from the tensors each layer holds.
    Lfm2HParams h;
    h.conv_layer.resize(static_cast<size_t>(n_layer));
    int64_t n_head_kv = 0;
    int32_t first_attention = -1;
    int32_t n_conv = 0;
    for (int32_t l = 0; l < n_layer; ++l) {
        if (m.tensor(layer_tensor(l, "attn_qkv")))
            throw bad("tensor " + layer_tensor(l, "attn_qkv") +
                      ": fused Q/K/V projections are not supported in lfm2 files");
        const bool conv = m.tensor(layer_tensor(l, "shortconv.conv")).has_value();
        const bool attention = m.tensor(layer_tensor(l, "attn_q")).has_value();
        if (conv == attention)
            throw bad("layer " + std::to_string(l) + " has " + (conv ? "both" : "neither") + " " +
                      layer_tensor(l, "shortconv.conv") + (conv ? " and " : " nor ") +
                      layer_tensor(l, "attn_q") + "; an lfm2 layer is one or the other");
        h.conv_layer[static_cast<size_t>(l)] = conv;
        if (conv) {
            ++n_conv;
            continue;
        }
        const int64_t kv = kv_heads_of(m, l, n_head);
        if (first_attention < 0) {
            first_attention = l;
            n_head_kv = kv;
        } else if (kv != n_head_kv) {
            throw bad("layer " + std::to_string(l) + " has " + std::to_string(kv) +
                      " KV heads and layer " + std::to_string(first_attention) + " has " +
                      std::to_string(n_head_kv) + "; dwell needs one KV width for all layers");
        }
    }
    if (first_attention < 0) n_head_kv = n_head;  // no KV cache is read

    // head_count_kv must agree with the layer kinds as far as the table lets
    // it be read: a per-layer array of block_count entries (0 marking the
    // convolution layers), or one integer when every layer has attention.
    const std::string kv_key = key("attention.head_count_kv");
    const char* kind = m.kind(kv_key);
    if (kind != nullptr && std::string(kind) == "an array") {
        uint64_t len = 0;
        m.raw().get_array_length(m.raw().self, kv_key.c_str(), &len);
        if (len != static_cast<uint64_t>(n_layer))
            throw bad("metadata key " + kv_key + " has " + std::to_string(len) +
                      " entries; it needs one per layer (" + key("block_count") + " = " +
                      std::to_string(n_layer) + ")");
    } else if (n_conv > 0) {
        throw bad("metadata key " + kv_key + " must be a per-layer array (0 for the " +
                  std::to_string(n_conv) + " short-convolution layers), it is " +
                  (kind ? kind : "missing"));
    } else if (kind != nullptr) {
        m.require_int(kv_key, n_head_kv, n_head_kv);  // the KV heads the tensors have
    }

    h.base = kit::read_transformer_hparams(m, 1e-5f, n_head_kv);
    kit::require_full_rope_and_rms_eps(m, h.base);
    h.l_cache = m.require_int(key("shortconv.l_cache"), kMinTaps, kMaxTaps);
    if (m.int_or(key("attention.sliding_window"), 0, 0, int64_t{1} << 24) > 0)
        throw bad("metadata key " + key("attention.sliding_window") +
                  ": sliding-window lfm2 attention is not supported yet");
    if (m.tensor("dense_2_out.weight"))
        throw bad("tensor dense_2_out.weight: lfm2 embedding models (ColBERT) are not supported");
    if (h.base.q_width() != h.base.n_embd)
        throw bad(key("attention.head_count") + " times the head size (" +
                  std::to_string(h.base.q_width()) + ") must equal " + key("embedding_length") +
                  " (" + std::to_string(h.base.n_embd) + ") in lfm2 models");
    for (int32_t l = 0; l < n_layer; ++l) {
        if (!h.conv_layer[static_cast<size_t>(l)]) continue;
        const auto t = m.tensor(layer_tensor(l, "shortconv.conv"));
        if (t->dtype != DWELL_F32 && t->dtype != DWELL_F16)
            throw bad("tensor " + layer_tensor(l, "shortconv.conv") + " is " +
                      dwell_dtype_name(t->dtype) + "; the convolution taps must be F32 or F16");
    }
    return h;
}

dwell_model_info Lfm2HybridDecoder::info() const {
    dwell_model_info info = h_.base.model_info();
    info.state_elems[0] = h_.base.n_embd * (h_.l_cache - 1);
    return info;
}

std::vector<kit::TensorSpec> Lfm2HybridDecoder::tensors() const {
    const auto& h = h_.base;
    const kit::AttentionOptions attention{.rope_mode = DWELL_ROPE_NEOX, .qk_norm = true};
    std::vector<kit::TensorSpec> t;
    t.push_back({"token_embd.weight", {h.n_embd, h.n_vocab}});
    for (int32_t l = 0; l < h.n_layer; ++l) {
        t.push_back({layer_tensor(l, "attn_norm"), {h.n_embd}});
        if (h_.conv_layer[static_cast<size_t>(l)]) {
            t.push_back({layer_tensor(l, "shortconv.conv"), {h_.l_cache, h.n_embd}});
            t.push_back({layer_tensor(l, "shortconv.in_proj"), {h.n_embd, 3 * h.n_embd}});
            t.push_back({layer_tensor(l, "shortconv.out_proj"), {h.n_embd, h.n_embd}});
        } else {
            kit::add_attention_tensors(t, h, l, attention);
        }
        t.push_back({layer_tensor(l, "ffn_norm"), {h.n_embd}});
        kit::add_gated_feed_forward_tensors(t, h, l);
    }
    t.push_back({"token_embd_norm.weight", {h.n_embd}});
    // Optional: when the file lacks it, the output is tied.
    t.push_back({"output.weight", {h.n_embd, h.n_vocab}, false});
    return t;
}

int32_t Lfm2HybridDecoder::short_conv_block(const kit::Builder& b, int32_t layer, int32_t x) const {
    const int64_t C = h_.base.n_embd;
    const std::string in_proj = layer_tensor(layer, "shortconv.in_proj");
    const int32_t gate_in = kit::linear(b, b.weight_rows(in_proj, 0, C), x);
    const int32_t gate_out = kit::linear(b, b.weight_rows(in_proj, C, C), x);
    const int32_t value = kit::linear(b, b.weight_rows(in_proj, 2 * C, C), x);
    const int32_t state = b.recurrent_state(layer, 0, {C, h_.l_cache - 1});
    const int32_t conv =
        b.op(DWELL_OP_SHORT_CONV, {b.op(DWELL_OP_MUL, {gate_in, value}),
                                   b.weight(layer_tensor(layer, "shortconv.conv")), state});
    return kit::linear(b, b.weight(layer_tensor(layer, "shortconv.out_proj")),
                       b.op(DWELL_OP_MUL, {gate_out, conv}));
}

void Lfm2HybridDecoder::build_graph(const kit::Builder& b, const dwell_batch& batch) const {
    const auto& h = h_.base;
    const kit::AttentionOptions attention{.rope_mode = DWELL_ROPE_NEOX, .qk_norm = true};
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
        cur = h_.conv_layer[static_cast<size_t>(l)]
                  ? short_conv_block(b, l, cur)
                  : kit::self_attention(b, h, l, cur, positions, T, attention);
        x = b.op(DWELL_OP_ADD, {x, cur});

        cur = kit::rms_norm(b, x, b.weight(layer_tensor(l, "ffn_norm")), h.rms_eps);
        cur = kit::gated_feed_forward(b, l, cur, kit::GatedActivation::swiglu);
        x = b.op(DWELL_OP_ADD, {x, cur});
    }
    b.layer(-1);
    // Only the wanted rows go through the (large) output projection.
    if (R != T) x = b.op(DWELL_OP_GET_ROWS, {x, out_rows});
    x = kit::rms_norm(b, x, b.weight("token_embd_norm.weight"), h.rms_eps);
    const int32_t head = b.weight(h.tied_output ? "token_embd.weight" : "output.weight");
    b.output(b.op(DWELL_OP_MATMUL, {head, x}));
}

}  // namespace dwell::lfm2
