#include "dwell/core/kv/context_shift.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/quant.h"

namespace dwell {

namespace {

void row_to_f32(dwell_dtype t, const unsigned char* row, float* out, int64_t n) {
    switch (t) {
        case DWELL_F32:
            std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
            return;
        case DWELL_F16: {
            const auto* h = reinterpret_cast<const uint16_t*>(row);
            for (int64_t i = 0; i < n; ++i) out[i] = dwell_fp16_to_fp32(h[i]);
            return;
        }
        case DWELL_Q8_0:
            dwell_dequantize_row_q8_0(reinterpret_cast<const dwell_block_q8_0*>(row), out, n);
            return;
        default:
            break;
    }
    throw Error(DWELL_ERR_UNSUPPORTED,
                std::string("context shift: KV type ") + dwell_dtype_name(t) + " is not supported");
}

void f32_to_row(dwell_dtype t, const float* in, unsigned char* row, int64_t n) {
    switch (t) {
        case DWELL_F32:
            std::memcpy(row, in, static_cast<size_t>(n) * sizeof(float));
            return;
        case DWELL_F16: {
            auto* h = reinterpret_cast<uint16_t*>(row);
            for (int64_t i = 0; i < n; ++i) h[i] = dwell_fp32_to_fp16(in[i]);
            return;
        }
        case DWELL_Q8_0:
            dwell_quantize_row_q8_0(in, reinterpret_cast<dwell_block_q8_0*>(row), n);
            return;
        default:
            break;
    }
    throw Error(DWELL_ERR_UNSUPPORTED,
                std::string("context shift: KV type ") + dwell_dtype_name(t) + " is not supported");
}

// Rotates every head of a key row by `delta` positions. RoPE angles are
// linear in the position, so turning a key computed at p by delta gives the
// key at p + delta.
void rotate_row(const KeyRope& r, float* x, int64_t width, double delta) {
    const int64_t half = r.n_rot / 2;
    for (int64_t head = 0; head + r.head_dim <= width; head += r.head_dim) {
        float* h = x + head;
        for (int64_t i = 0; i < half; ++i) {
            double theta =
                delta * r.freq_scale *
                std::pow(static_cast<double>(r.freq_base), -2.0 * static_cast<double>(i) / r.n_rot);
            // The attention factor is in the stored key already: a turn by
            // delta changes only the angle.
            if (!r.freq_factors.empty()) theta /= r.freq_factors[static_cast<size_t>(i)];
            const double c = std::cos(theta), s = std::sin(theta);
            const int64_t a = r.mode == DWELL_ROPE_NEOX ? i : 2 * i;
            const int64_t b = r.mode == DWELL_ROPE_NEOX ? i + half : 2 * i + 1;
            const double x0 = h[a], x1 = h[b];
            h[a] = static_cast<float>(x0 * c - x1 * s);
            h[b] = static_cast<float>(x0 * s + x1 * c);
        }
    }
}

// The running sums behind an FP8 key cache's offsets (quant.h): `done`
// holds the decoded rows of the finished blocks, `open` those of the block
// being walked. Offsets only grow with the position, so one pass keeps them.
class Fp8KeyOffset {
public:
    explicit Fp8KeyOffset(int64_t width)
        : done_(static_cast<size_t>(width)), open_(static_cast<size_t>(width)) {}

    // Adds a row at position p; rows must come in position order.
    void add(int64_t p, const uint8_t* row) {
        if (p % DWELL_FP8_KEY_BLOCK == 0) close_block();
        for (size_t i = 0; i < open_.size(); ++i) open_[i] += dwell_fp8_e4m3_to_fp32(row[i]);
    }

    // offset(p) for the next position p (all rows before it added).
    const float* at(int64_t p) {
        if (p % DWELL_FP8_KEY_BLOCK == 0) close_block();
        offset_.resize(done_.size());
        for (size_t i = 0; i < done_.size(); ++i) {
            offset_[i] = done_[i] * (1.0f / DWELL_FP8_KEY_BLOCK);
        }
        return offset_.data();
    }

private:
    void close_block() {
        for (size_t i = 0; i < done_.size(); ++i) done_[i] += std::exchange(open_[i], 0.0f);
    }

    std::vector<float> done_, open_, offset_;
};

// Moves the keys of positions first..n_past-1 down by n_discard in an FP8
// cache: each row decodes with its old offset, turns, and is stored again
// with the offset of its new position. Rows are read before any row at or
// above them is written, so one pass needs no copy of the cache.
void shift_fp8_keys(KvCache& kv, int32_t layer, const std::optional<KeyRope>& rope, int64_t n_keep,
                    int64_t n_discard, int64_t n_past) {
    const int64_t width = kv.kv_width();
    const int64_t first = n_keep + n_discard;
    const auto row = [&](int64_t p) { return static_cast<uint8_t*>(kv.row(layer, 0, p)); };
    Fp8KeyOffset old_offsets(width), new_offsets(width);
    for (int64_t p = 0; p < first; ++p) old_offsets.add(p, row(p));
    for (int64_t p = 0; p < n_keep; ++p) new_offsets.add(p, row(p));
    std::vector<float> key(static_cast<size_t>(width));
    for (int64_t pos = first; pos < n_past; ++pos) {
        const float* offset = old_offsets.at(pos);
        for (int64_t i = 0; i < width; ++i)
            key[i] = dwell_fp8_e4m3_to_fp32(row(pos)[i]) + offset[i];
        old_offsets.add(pos, row(pos));
        if (rope) rotate_row(*rope, key.data(), width, -static_cast<double>(n_discard));
        const int64_t to = pos - n_discard;
        dwell_fp8_encode_key(key.data(), new_offsets.at(to), nullptr, width, row(to));
        new_offsets.add(to, row(to));
    }
}

}  // namespace

namespace {

// The rotation of the keys an ATTENTION node stores, or nullopt.
std::optional<KeyRope> key_rope_of(const Graph& graph, const dwell_node& node) {
    const int32_t producer = graph.slots[graph.storage_of(node.inputs[1])].producer;
    if (producer < 0) return std::nullopt;
    const dwell_node& rope = graph.nodes[static_cast<size_t>(producer)];
    if (rope.op != DWELL_OP_ROPE) return std::nullopt;
    KeyRope r;
    r.mode = rope.iparams[0];
    r.n_rot = rope.iparams[1];
    r.head_dim = graph.slots[rope.inputs[0]].tensor.ne[0];
    r.freq_base = rope.fparams[0];
    r.freq_scale = rope.fparams[1];
    if (rope.n_inputs >= 3 && rope.inputs[2] >= 0) {
        const dwell_tensor& f = graph.slots[graph.storage_of(rope.inputs[2])].tensor;
        const int64_t n = dwell_tensor_nelements(&f);
        if (f.dtype == DWELL_F32 && f.data && n == r.n_rot / 2) {
            const auto* v = static_cast<const float*>(f.data);
            r.freq_factors.assign(v, v + n);
        } else {
            r.factors_unknown = true;
        }
    }
    return r;
}

}  // namespace

std::optional<KeyRope> find_key_rope(const Graph& graph) {
    for (const dwell_node& node : graph.nodes) {
        if (node.op == DWELL_OP_ATTENTION) return key_rope_of(graph, node);
    }
    return std::nullopt;
}

std::vector<std::optional<KeyRope>> find_layer_key_ropes(const Graph& graph, int32_t n_layer) {
    std::vector<std::optional<KeyRope>> ropes(static_cast<size_t>(std::max(n_layer, 0)));
    for (const dwell_node& node : graph.nodes) {
        if (node.op != DWELL_OP_ATTENTION) continue;
        // The cache says whose keys these are, whatever layer tag the node has.
        const int32_t layer = graph.slots[graph.storage_of(node.inputs[3])].layer;
        if (layer >= 0 && layer < n_layer)
            ropes[static_cast<size_t>(layer)] = key_rope_of(graph, node);
    }
    return ropes;
}

void shift_context(KvCache& kv, const std::optional<KeyRope>& rope, int64_t n_keep,
                   int64_t n_discard, int64_t n_past) {
    shift_context(kv, std::vector<std::optional<KeyRope>>(static_cast<size_t>(kv.n_layer()), rope),
                  n_keep, n_discard, n_past);
}

void shift_context(KvCache& kv, const std::vector<std::optional<KeyRope>>& ropes, int64_t n_keep,
                   int64_t n_discard, int64_t n_past) {
    if (n_keep < 0 || n_discard <= 0 || n_keep + n_discard > n_past) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "context shift: cannot drop " + std::to_string(n_discard) + " of " +
                        std::to_string(n_past) + " positions after the first " +
                        std::to_string(n_keep));
    }
    // Checked for every layer before any row moves.
    for (size_t l = 0; l < ropes.size(); ++l) {
        if (ropes[l] && ropes[l]->factors_unknown) {
            throw Error(DWELL_ERR_UNSUPPORTED,
                        "context shift: layer " + std::to_string(l) +
                            " rotates its keys with RoPE frequency factors computed during the "
                            "step, so they cannot be turned to new positions (raise --ctx, or "
                            "start a new session from a shorter prompt)");
        }
    }
    const int64_t n_after = n_past - n_discard;
    // Rows move into pages other sessions may share: those are copied first.
    if (n_after > n_keep) kv.prepare_write(n_keep, n_after);
    const int64_t width = kv.kv_width();
    std::vector<float> buf(static_cast<size_t>(width));
    for (int32_t l = 0; l < kv.n_layer(); ++l) {
        if (!kv.uses_layer(l)) continue;  // a layer without KV (a convolution's)
        const std::optional<KeyRope>& rope =
            static_cast<size_t>(l) < ropes.size() ? ropes[static_cast<size_t>(l)] : std::nullopt;
        // Values move as they are.
        for (int64_t pos = n_keep + n_discard; pos < n_past; ++pos) {
            std::memcpy(kv.row(l, 1, pos - n_discard), kv.row(l, 1, pos), kv.row_bytes());
        }
        // An FP8 key's offset depends on its position, so even unturned
        // keys are stored again.
        if (kv.dtype() == DWELL_FP8_E4M3) {
            shift_fp8_keys(kv, l, rope, n_keep, n_discard, n_past);
            continue;
        }
        for (int64_t pos = n_keep + n_discard; pos < n_past; ++pos) {
            const int64_t to = pos - n_discard;
            if (!rope) {
                std::memcpy(kv.row(l, 0, to), kv.row(l, 0, pos), kv.row_bytes());
                continue;
            }
            row_to_f32(kv.dtype(), kv.row(l, 0, pos), buf.data(), width);
            rotate_row(*rope, buf.data(), width, -static_cast<double>(n_discard));
            f32_to_row(kv.dtype(), buf.data(), kv.row(l, 0, to), width);
        }
    }
    kv.truncate(n_after);
}

}  // namespace dwell
