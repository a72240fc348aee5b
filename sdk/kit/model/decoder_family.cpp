#include "model/decoder_family.hpp"

#include <cmath>

namespace dwell::model_kit {

DecoderFamily::DecoderFamily(const TransformerHParams& h, const DecoderLayout& layout)
    : h_(h), layout_(layout) {
    if (layout_.always_tied_output) h_.tied_output = true;
}

std::vector<TensorSpec> DecoderFamily::tensors() const {
    std::vector<TensorSpec> t;
    t.push_back({"token_embd.weight", {h_.n_embd, h_.n_vocab}});
    // Optional: RoPE without factors when the file lacks it.
    if (!layout_.attention.rope_factors.empty())
        t.push_back({layout_.attention.rope_factors, {h_.n_rot / 2}, false});
    for (int32_t l = 0; l < h_.n_layer; ++l) {
        t.push_back({layer_tensor(l, "attn_norm"), {h_.n_embd}});
        add_attention_tensors(t, h_, l, attention_options(l));
        t.push_back({layer_tensor(l, "ffn_norm"), {h_.n_embd}});
        add_feed_forward_tensors(t, l);
    }
    t.push_back({"output_norm.weight", {h_.n_embd}});
    // Optional: when the file lacks it, the output is tied (h_.tied_output).
    if (!layout_.always_tied_output) t.push_back({"output.weight", {h_.n_embd, h_.n_vocab}, false});
    return t;
}

void DecoderFamily::build_graph(const Builder& b, const dwell_batch& batch) const {
    const int64_t T = batch.n_tokens;
    const int64_t R = batch.n_outputs;

    const int32_t tokens = b.input("tokens", T);
    const int32_t positions = b.input("positions", T);
    const int32_t out_rows = b.input("out_rows", R);

    b.layer(-1);
    int32_t x = b.op(DWELL_OP_GET_ROWS, {b.weight("token_embd.weight"), tokens});
    if (layout_.scaled_embeddings)
        x = b.op(DWELL_OP_SCALE, {x}, {}, {std::sqrt(static_cast<float>(h_.n_embd))});
    for (int32_t l = 0; l < h_.n_layer; ++l) {
        b.layer(l);
        int32_t cur = rms_norm(b, x, b.weight(layer_tensor(l, "attn_norm")), h_.rms_eps);
        cur = self_attention(b, h_, l, cur, positions, T, attention_options(l));
        x = b.op(DWELL_OP_ADD, {x, cur});

        cur = rms_norm(b, x, b.weight(layer_tensor(l, "ffn_norm")), h_.rms_eps);
        cur = feed_forward(b, l, cur, T);
        x = b.op(DWELL_OP_ADD, {x, cur});
    }
    b.layer(-1);
    // Only the wanted rows go through the (large) output projection.
    if (R != T) x = b.op(DWELL_OP_GET_ROWS, {x, out_rows});
    x = rms_norm(b, x, b.weight("output_norm.weight"), h_.rms_eps);
    const int32_t head = b.weight(h_.tied_output ? "token_embd.weight" : "output.weight");
    b.output(b.op(DWELL_OP_MATMUL, {head, x}));
}

AttentionOptions DecoderFamily::attention_options(int32_t) const {
    return layout_.attention;
}

int32_t DecoderFamily::feed_forward(const Builder& b, int32_t layer, int32_t x, int64_t) const {
    if (layout_.fused_gate_up)
        return fused_gated_feed_forward(b, h_, layer, x, layout_.feed_forward);
    return gated_feed_forward(b, layer, x, layout_.feed_forward);
}

void DecoderFamily::add_feed_forward_tensors(std::vector<TensorSpec>& t, int32_t layer) const {
    if (layout_.fused_gate_up) return add_fused_gated_feed_forward_tensors(t, h_, layer);
    add_gated_feed_forward_tensors(t, h_, layer);
}

}  // namespace dwell::model_kit
