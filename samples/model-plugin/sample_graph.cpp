#include "sample_graph.hpp"

#include <cmath>
#include <initializer_list>
#include <stdexcept>

namespace sample_llama {

namespace {

std::string layer_tensor(int32_t layer, const char* what) {
    return "blk." + std::to_string(layer) + "." + what + ".weight";
}

// The builder reports a refused call as -1 plus a message in last_error;
// this wrapper turns that into an exception, so the forward pass below
// reads as a plain sequence of ops.
class Graph {
public:
    explicit Graph(const dwell_graph_builder& b) : b_(b) {}

    int32_t input(const char* name, int64_t length) const {
        return checked(b_.input(b_.self, name, DWELL_I32, 1, &length),
                       std::string("input ") + name);
    }
    int32_t weight(const std::string& name) const {
        return checked(b_.weight(b_.self, name.c_str()), "weight " + name);
    }
    int32_t kv_cache(int32_t layer, int32_t which) const {
        return checked(b_.kv_cache(b_.self, layer, which),
                       "KV cache of layer " + std::to_string(layer));
    }
    int32_t op(dwell_op op, std::initializer_list<int32_t> inputs,
               std::initializer_list<int32_t> iparams = {},
               std::initializer_list<float> fparams = {}) const {
        return checked(b_.op(b_.self, op, inputs.begin(), static_cast<int32_t>(inputs.size()),
                             iparams.begin(), static_cast<int32_t>(iparams.size()), fparams.begin(),
                             static_cast<int32_t>(fparams.size())),
                       dwell_op_name(op));
    }
    int32_t reshape(int32_t tensor, std::initializer_list<int64_t> ne) const {
        return checked(b_.reshape(b_.self, tensor, static_cast<int32_t>(ne.size()), ne.begin()),
                       "reshape");
    }
    // Nodes added after this belong to `layer` (-1: none); backends and the
    // manifest's layer restrictions see it, and the placement log shows it.
    void set_layer(int32_t layer) const { b_.set_layer(b_.self, layer); }
    void set_output(int32_t tensor) const {
        if (b_.set_output(b_.self, tensor) != DWELL_OK) checked(-1, "set_output");
    }

private:
    int32_t checked(int32_t id, const std::string& what) const {
        if (id >= 0) return id;
        const char* why = b_.last_error(b_.self);
        throw std::runtime_error(what + ": " + (why && *why ? why : "refused by the host"));
    }

    const dwell_graph_builder& b_;
};

}  // namespace

std::vector<TensorSpec> tensor_specs(const HParams& h) {
    const int64_t q_width = h.head_dim * h.n_head;
    std::vector<TensorSpec> t;
    t.push_back({"token_embd.weight", {h.n_embd, h.n_vocab}});
    for (int32_t l = 0; l < h.n_layer; ++l) {
        t.push_back({layer_tensor(l, "attn_norm"), {h.n_embd}});
        t.push_back({layer_tensor(l, "attn_q"), {h.n_embd, q_width}});
        t.push_back({layer_tensor(l, "attn_k"), {h.n_embd, h.kv_width()}});
        t.push_back({layer_tensor(l, "attn_v"), {h.n_embd, h.kv_width()}});
        t.push_back({layer_tensor(l, "attn_output"), {q_width, h.n_embd}});
        t.push_back({layer_tensor(l, "ffn_norm"), {h.n_embd}});
        t.push_back({layer_tensor(l, "ffn_gate"), {h.n_embd, h.n_ff}});
        t.push_back({layer_tensor(l, "ffn_up"), {h.n_embd, h.n_ff}});
        t.push_back({layer_tensor(l, "ffn_down"), {h.n_ff, h.n_embd}});
    }
    t.push_back({"output_norm.weight", {h.n_embd}});
    // Optional: small models reuse the embedding table as the output head.
    t.push_back({"output.weight", {h.n_embd, h.n_vocab}, false});
    return t;
}

void build_forward(const HParams& h, const dwell_graph_builder& builder, const dwell_batch& batch) {
    const Graph g(builder);
    const int64_t T = batch.n_tokens;
    const int64_t R = batch.n_outputs;
    if (T <= 0 || R <= 0 || R > T)
        throw std::runtime_error("batch needs 1 <= n_outputs <= n_tokens");

    // The host fills these three inputs for every step (model.h): token ids,
    // their positions in the sequence, and which rows' logits it wants.
    const int32_t tokens = g.input("tokens", T);
    const int32_t positions = g.input("positions", T);
    const int32_t out_rows = g.input("out_rows", R);

    const float attn_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));
    g.set_layer(-1);
    int32_t x = g.op(DWELL_OP_GET_ROWS, {g.weight("token_embd.weight"), tokens});  // [n_embd, T]

    for (int32_t l = 0; l < h.n_layer; ++l) {
        g.set_layer(l);
        // Attention block: pre-norm, Q/K/V projections, RoPE on Q and K.
        int32_t cur = g.op(DWELL_OP_RMS_NORM, {x}, {}, {h.rms_eps});
        cur = g.op(DWELL_OP_MUL, {cur, g.weight(layer_tensor(l, "attn_norm"))});
        int32_t q = g.op(DWELL_OP_MATMUL, {g.weight(layer_tensor(l, "attn_q")), cur});
        int32_t k = g.op(DWELL_OP_MATMUL, {g.weight(layer_tensor(l, "attn_k")), cur});
        int32_t v = g.op(DWELL_OP_MATMUL, {g.weight(layer_tensor(l, "attn_v")), cur});
        // Views as [head_dim, heads, T]: the layout ROPE and ATTENTION take.
        q = g.reshape(q, {h.head_dim, h.n_head, T});
        k = g.reshape(k, {h.head_dim, h.n_head_kv, T});
        v = g.reshape(v, {h.head_dim, h.n_head_kv, T});
        q = g.op(DWELL_OP_ROPE, {q, positions}, {DWELL_ROPE_NORM, h.n_rot},
                 {h.rope_freq_base, 1.0f});
        k = g.op(DWELL_OP_ROPE, {k, positions}, {DWELL_ROPE_NORM, h.n_rot},
                 {h.rope_freq_base, 1.0f});
        // One op does the KV-cache write and the causal attention over it;
        // n_head / n_head_kv query heads share each K/V head (GQA). The host
        // owns the caches: the plugin only names them by layer.
        int32_t attn =
            g.op(DWELL_OP_ATTENTION, {q, k, v, g.kv_cache(l, 0), g.kv_cache(l, 1), positions}, {},
                 {attn_scale});
        attn = g.reshape(attn, {h.head_dim * h.n_head, T});
        attn = g.op(DWELL_OP_MATMUL, {g.weight(layer_tensor(l, "attn_output")), attn});
        x = g.op(DWELL_OP_ADD, {x, attn});  // residual

        // Feed-forward block: pre-norm, SwiGLU, down projection.
        cur = g.op(DWELL_OP_RMS_NORM, {x}, {}, {h.rms_eps});
        cur = g.op(DWELL_OP_MUL, {cur, g.weight(layer_tensor(l, "ffn_norm"))});
        const int32_t gate = g.op(DWELL_OP_MATMUL, {g.weight(layer_tensor(l, "ffn_gate")), cur});
        const int32_t up = g.op(DWELL_OP_MATMUL, {g.weight(layer_tensor(l, "ffn_up")), cur});
        cur = g.op(DWELL_OP_SWIGLU, {gate, up});
        cur = g.op(DWELL_OP_MATMUL, {g.weight(layer_tensor(l, "ffn_down")), cur});
        x = g.op(DWELL_OP_ADD, {x, cur});  // residual
    }

    g.set_layer(-1);
    // Only the rows whose logits are wanted (usually the last token) go
    // through the output head, the largest matmul of a small model.
    if (R != T) x = g.op(DWELL_OP_GET_ROWS, {x, out_rows});
    x = g.op(DWELL_OP_RMS_NORM, {x}, {}, {h.rms_eps});
    x = g.op(DWELL_OP_MUL, {x, g.weight("output_norm.weight")});
    const int32_t head = g.weight(h.tied_output ? "token_embd.weight" : "output.weight");
    g.set_output(g.op(DWELL_OP_MATMUL, {head, x}));  // logits [n_vocab, R] F32
}

}  // namespace sample_llama
