#include "llama_graph.hpp"

#include <cmath>
#include <initializer_list>
#include <stdexcept>

namespace dwell::llama {

namespace {

std::string blk(int32_t layer, const char* what) {
    return "blk." + std::to_string(layer) + "." + what + ".weight";
}

// Thin checked wrappers over the host's builder table.
class Builder {
public:
    explicit Builder(const dwell_graph_builder& b) : b_(b) {}

    int32_t check(int32_t id, const std::string& what) const {
        if (id < 0) {
            const char* e = b_.last_error(b_.self);
            throw std::runtime_error(what + ": " + (e && *e ? e : "failed"));
        }
        return id;
    }
    int32_t input(const char* name, int64_t n) const {
        return check(b_.input(b_.self, name, DWELL_I32, 1, &n), std::string("input ") + name);
    }
    int32_t weight(const std::string& name) const {
        return check(b_.weight(b_.self, name.c_str()), "weight " + name);
    }
    int32_t op(dwell_op op, std::initializer_list<int32_t> in,
               std::initializer_list<int32_t> ip = {}, std::initializer_list<float> fp = {}) const {
        return check(
            b_.op(b_.self, op, in.begin(), static_cast<int32_t>(in.size()), ip.begin(),
                  static_cast<int32_t>(ip.size()), fp.begin(), static_cast<int32_t>(fp.size())),
            dwell_op_name(op));
    }
    int32_t reshape(int32_t t, std::initializer_list<int64_t> ne) const {
        return check(b_.reshape(b_.self, t, static_cast<int32_t>(ne.size()), ne.begin()),
                     "reshape");
    }
    int32_t kv(int32_t layer, int32_t which) const {
        return check(b_.kv_cache(b_.self, layer, which),
                     "kv cache of layer " + std::to_string(layer));
    }
    void layer(int32_t l) const { b_.set_layer(b_.self, l); }
    void output(int32_t t) const {
        if (b_.set_output(b_.self, t) != DWELL_OK) check(-1, "set_output");
    }

private:
    const dwell_graph_builder& b_;
};

}  // namespace

std::vector<TensorName> tensor_list(const HParams& h) {
    std::vector<TensorName> t;
    t.push_back({"token_embd.weight", {h.n_embd, h.n_vocab}});
    for (int32_t l = 0; l < h.n_layer; ++l) {
        t.push_back({blk(l, "attn_norm"), {h.n_embd}});
        t.push_back({blk(l, "attn_q"), {h.n_embd, h.head_dim * h.n_head}});
        t.push_back({blk(l, "attn_k"), {h.n_embd, h.kv_width()}});
        t.push_back({blk(l, "attn_v"), {h.n_embd, h.kv_width()}});
        t.push_back({blk(l, "attn_output"), {h.head_dim * h.n_head, h.n_embd}});
        t.push_back({blk(l, "ffn_norm"), {h.n_embd}});
        t.push_back({blk(l, "ffn_gate"), {h.n_embd, h.n_ff}});
        t.push_back({blk(l, "ffn_up"), {h.n_embd, h.n_ff}});
        t.push_back({blk(l, "ffn_down"), {h.n_ff, h.n_embd}});
    }
    t.push_back({"output_norm.weight", {h.n_embd}});
    t.push_back({"output.weight", {h.n_embd, h.n_vocab}, false});
    return t;
}

void build_forward(const HParams& h, const dwell_graph_builder& gb, const dwell_batch& batch) {
    const Builder b(gb);
    const int64_t T = batch.n_tokens;
    const int64_t R = batch.n_outputs;
    if (T <= 0 || R <= 0 || R > T)
        throw std::runtime_error("batch needs 1 <= n_outputs <= n_tokens");
    const int64_t q_width = h.head_dim * h.n_head;
    const float attn_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));

    const int32_t tokens = b.input("tokens", T);
    const int32_t positions = b.input("positions", T);
    const int32_t out_rows = b.input("out_rows", R);

    b.layer(-1);
    int32_t x = b.op(DWELL_OP_GET_ROWS, {b.weight("token_embd.weight"), tokens});
    for (int32_t l = 0; l < h.n_layer; ++l) {
        b.layer(l);
        int32_t cur = b.op(DWELL_OP_RMS_NORM, {x}, {}, {h.rms_eps});
        cur = b.op(DWELL_OP_MUL, {cur, b.weight(blk(l, "attn_norm"))});

        int32_t q = b.op(DWELL_OP_MATMUL, {b.weight(blk(l, "attn_q")), cur});
        int32_t k = b.op(DWELL_OP_MATMUL, {b.weight(blk(l, "attn_k")), cur});
        int32_t v = b.op(DWELL_OP_MATMUL, {b.weight(blk(l, "attn_v")), cur});
        q = b.reshape(q, {h.head_dim, h.n_head, T});
        k = b.reshape(k, {h.head_dim, h.n_head_kv, T});
        v = b.reshape(v, {h.head_dim, h.n_head_kv, T});
        q = b.op(DWELL_OP_ROPE, {q, positions}, {DWELL_ROPE_NORM, h.n_rot},
                 {h.rope_freq_base, h.rope_freq_scale});
        k = b.op(DWELL_OP_ROPE, {k, positions}, {DWELL_ROPE_NORM, h.n_rot},
                 {h.rope_freq_base, h.rope_freq_scale});

        int32_t attn = b.op(DWELL_OP_ATTENTION, {q, k, v, b.kv(l, 0), b.kv(l, 1), positions}, {},
                            {attn_scale});
        attn = b.reshape(attn, {q_width, T});
        attn = b.op(DWELL_OP_MATMUL, {b.weight(blk(l, "attn_output")), attn});
        x = b.op(DWELL_OP_ADD, {x, attn});

        cur = b.op(DWELL_OP_RMS_NORM, {x}, {}, {h.rms_eps});
        cur = b.op(DWELL_OP_MUL, {cur, b.weight(blk(l, "ffn_norm"))});
        const int32_t gate = b.op(DWELL_OP_MATMUL, {b.weight(blk(l, "ffn_gate")), cur});
        const int32_t up = b.op(DWELL_OP_MATMUL, {b.weight(blk(l, "ffn_up")), cur});
        cur = b.op(DWELL_OP_SWIGLU, {gate, up});
        cur = b.op(DWELL_OP_MATMUL, {b.weight(blk(l, "ffn_down")), cur});
        x = b.op(DWELL_OP_ADD, {x, cur});
    }
    b.layer(-1);
    // Only the wanted rows go through the (large) output projection.
    if (R != T) x = b.op(DWELL_OP_GET_ROWS, {x, out_rows});
    x = b.op(DWELL_OP_RMS_NORM, {x}, {}, {h.rms_eps});
    x = b.op(DWELL_OP_MUL, {x, b.weight("output_norm.weight")});
    const int32_t head = b.weight(h.tied_output ? "token_embd.weight" : "output.weight");
    b.output(b.op(DWELL_OP_MATMUL, {head, x}));
}

}  // namespace dwell::llama
