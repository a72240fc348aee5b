#include "llama_hparams.hpp"

#include <stdexcept>

namespace dwell::llama {

namespace {

int64_t get_int(const dwell_metadata& m, const std::string& key, int64_t fallback, bool required) {
    int64_t v = 0;
    if (m.get_int(m.self, key.c_str(), &v)) return v;
    if (required) throw std::runtime_error("metadata key " + key + " is missing or not an integer");
    return fallback;
}

float get_float(const dwell_metadata& m, const std::string& key, float fallback) {
    double v = 0;
    return m.get_float(m.self, key.c_str(), &v) ? static_cast<float>(v) : fallback;
}

void check_range(const std::string& key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) {
        throw std::runtime_error("metadata key " + key + " = " + std::to_string(v) +
                                 " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    }
}

}  // namespace

HParams read_hparams(const dwell_metadata& m) {
    HParams h;
    const char* arch = nullptr;
    size_t arch_len = 0;
    if (!m.get_string(m.self, "general.architecture", &arch, &arch_len)) {
        throw std::runtime_error("metadata key general.architecture is missing");
    }
    h.arch.assign(arch, arch_len);
    const std::string p = h.arch + ".";

    // Every value is range-checked as read (int64) before it is narrowed or
    // multiplied, so hostile metadata cannot wrap into a plausible model.
    h.n_embd = get_int(m, p + "embedding_length", 0, true);
    const int64_t n_layer = get_int(m, p + "block_count", 0, true);
    check_range(p + "block_count", n_layer, 1, 4096);
    h.n_layer = static_cast<int32_t>(n_layer);
    h.n_ff = get_int(m, p + "feed_forward_length", 0, true);
    h.n_head = get_int(m, p + "attention.head_count", 0, true);
    h.n_head_kv = get_int(m, p + "attention.head_count_kv", h.n_head, false);
    h.n_ctx_train = get_int(m, p + "context_length", 2048, false);
    check_range(p + "embedding_length", h.n_embd, 1, 1 << 20);
    check_range(p + "feed_forward_length", h.n_ff, 1, 1 << 22);
    check_range(p + "attention.head_count", h.n_head, 1, 1 << 14);
    check_range(p + "attention.head_count_kv", h.n_head_kv, 1, h.n_head);
    check_range(p + "context_length", h.n_ctx_train, 1, int64_t{1} << 24);
    if (h.n_head % h.n_head_kv != 0) {
        throw std::runtime_error(p + "attention.head_count (" + std::to_string(h.n_head) +
                                 ") is not a multiple of head_count_kv (" +
                                 std::to_string(h.n_head_kv) + ")");
    }
    h.head_dim = get_int(m, p + "attention.key_length", h.n_embd / h.n_head, false);
    check_range(p + "attention.key_length", h.head_dim, 2, 1 << 12);
    if (h.head_dim * h.n_head != h.n_embd &&
        !m.get_int(m.self, (p + "attention.key_length").c_str(), nullptr)) {
        throw std::runtime_error(p + "embedding_length (" + std::to_string(h.n_embd) +
                                 ") is not a multiple of attention.head_count (" +
                                 std::to_string(h.n_head) + ")");
    }
    const int64_t value_length = get_int(m, p + "attention.value_length", h.head_dim, false);
    if (value_length != h.head_dim) {
        throw std::runtime_error(
            p + "attention.value_length differs from key_length, which llama models do not do");
    }
    const int64_t n_rot = get_int(m, p + "rope.dimension_count", h.head_dim, false);
    check_range(p + "rope.dimension_count", n_rot, 2, h.head_dim);
    h.n_rot = static_cast<int32_t>(n_rot);
    if (h.n_rot % 2) throw std::runtime_error(p + "rope.dimension_count must be even");
    h.rms_eps = get_float(m, p + "attention.layer_norm_rms_epsilon", 1e-5f);
    h.rope_freq_base = get_float(m, p + "rope.freq_base", 10000.0f);
    const char* scaling = nullptr;
    size_t scaling_len = 0;
    std::string scaling_type;
    if (m.get_string(m.self, (p + "rope.scaling.type").c_str(), &scaling, &scaling_len)) {
        scaling_type.assign(scaling, scaling_len);
    }
    const float factor = get_float(m, p + "rope.scaling.factor", 0.0f);
    if (scaling_type == "linear" && factor > 0) {
        h.rope_freq_scale = 1.0f / factor;
    } else if (!scaling_type.empty() && scaling_type != "none" && scaling_type != "linear") {
        throw std::runtime_error(p + "rope.scaling.type '" + scaling_type +
                                 "' is not supported yet (linear and none are)");
    }
    if (!(h.rope_freq_base > 0)) throw std::runtime_error(p + "rope.freq_base must be positive");

    // The vocabulary size is the embedding table's row count.
    dwell_dtype dt{};
    int32_t nd = 0;
    int64_t ne[DWELL_MAX_DIMS] = {0, 0, 0, 0};
    if (!m.get_tensor(m.self, "token_embd.weight", &dt, &nd, ne)) {
        throw std::runtime_error("tensor token_embd.weight is missing");
    }
    h.n_vocab = ne[1];
    check_range("token_embd.weight rows", h.n_vocab, 1, int64_t{1} << 24);
    h.tied_output = !m.get_tensor(m.self, "output.weight", &dt, &nd, ne);
    return h;
}

}  // namespace dwell::llama
