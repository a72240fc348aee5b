#include "sample_hparams.hpp"

#include <stdexcept>
#include <string>

namespace sample_llama {

namespace {

// Key lookups under the architecture's prefix, with range checks. Every
// value is checked as int64 before it is narrowed or multiplied, so a
// hostile file cannot wrap a product into a plausible-looking size.
class Keys {
public:
    explicit Keys(const dwell_metadata& meta) : meta_(meta) {}

    std::string name(const char* key) const { return std::string(kArchitecture) + "." + key; }

    int64_t required_int(const char* key, int64_t lo, int64_t hi) const {
        int64_t v = 0;
        if (!meta_.get_int(meta_.self, name(key).c_str(), &v))
            throw std::runtime_error("metadata key " + name(key) + " is missing or not an integer");
        return in_range(key, v, lo, hi);
    }

    int64_t optional_int(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
        int64_t v = 0;
        if (!meta_.get_int(meta_.self, name(key).c_str(), &v)) return fallback;
        return in_range(key, v, lo, hi);
    }

    float optional_float(const char* key, float fallback) const {
        double v = 0;
        if (!meta_.get_float(meta_.self, name(key).c_str(), &v)) return fallback;
        if (!(v > 0))  // also false for NaN
            throw std::runtime_error("metadata key " + name(key) + " = " + std::to_string(v) +
                                     " must be positive");
        return static_cast<float>(v);
    }

    // Strings from the host are not NUL-terminated: copy by length.
    bool optional_string(const char* key, std::string& out) const {
        const char* s = nullptr;
        size_t len = 0;
        if (!meta_.get_string(meta_.self, name(key).c_str(), &s, &len)) return false;
        out.assign(s, len);
        return true;
    }

private:
    int64_t in_range(const char* key, int64_t v, int64_t lo, int64_t hi) const {
        if (v < lo || v > hi) {
            throw std::runtime_error("metadata key " + name(key) + " = " + std::to_string(v) +
                                     " is outside " + std::to_string(lo) + ".." +
                                     std::to_string(hi));
        }
        return v;
    }

    const dwell_metadata& meta_;
};

}  // namespace

HParams read_hparams(const dwell_metadata& meta) {
    // A host of an older minor version may hand a shorter table; this plugin
    // uses every 1.0 getter, so it needs all of them.
    if (!DWELL_HAS_FIELD(&meta, dwell_metadata, get_tensor))
        throw std::runtime_error(
            "the host's metadata table lacks get_tensor, which every ABI 1.x host has");
    const Keys keys(meta);
    HParams h;
    h.n_embd = keys.required_int("embedding_length", 1, int64_t{1} << 20);
    h.n_layer = static_cast<int32_t>(keys.required_int("block_count", 1, 4096));
    h.n_ff = keys.required_int("feed_forward_length", 1, int64_t{1} << 22);
    h.n_head = keys.required_int("attention.head_count", 1, int64_t{1} << 14);
    // Without head_count_kv every query head has its own K/V head (no GQA).
    h.n_head_kv = keys.optional_int("attention.head_count_kv", h.n_head, 1, h.n_head);
    h.n_ctx_train = keys.optional_int("context_length", 2048, 1, int64_t{1} << 24);
    if (h.n_head % h.n_head_kv != 0) {
        throw std::runtime_error("metadata key " + keys.name("attention.head_count_kv") + " = " +
                                 std::to_string(h.n_head_kv) + " does not divide " +
                                 keys.name("attention.head_count") + " = " +
                                 std::to_string(h.n_head));
    }
    if (h.n_embd % h.n_head != 0) {
        throw std::runtime_error("metadata key " + keys.name("embedding_length") + " = " +
                                 std::to_string(h.n_embd) + " is not a multiple of " +
                                 keys.name("attention.head_count") + " = " +
                                 std::to_string(h.n_head));
    }
    h.head_dim = h.n_embd / h.n_head;
    // This family keeps key and value heads at n_embd / n_head; a file that
    // says otherwise belongs to a variant this plugin does not build.
    for (const char* key : {"attention.key_length", "attention.value_length"}) {
        const int64_t length = keys.optional_int(key, h.head_dim, 1, int64_t{1} << 20);
        if (length != h.head_dim) {
            throw std::runtime_error("metadata key " + keys.name(key) + " = " +
                                     std::to_string(length) + " differs from embedding_length / " +
                                     "head_count = " + std::to_string(h.head_dim) + ", which the " +
                                     kArchitecture + " plugin requires");
        }
    }
    h.n_rot =
        static_cast<int32_t>(keys.optional_int("rope.dimension_count", h.head_dim, 2, h.head_dim));
    if (h.n_rot % 2 != 0) {
        throw std::runtime_error("metadata key " + keys.name("rope.dimension_count") + " = " +
                                 std::to_string(h.n_rot) + " must be even");
    }
    h.rms_eps = keys.optional_float("attention.layer_norm_rms_epsilon", 1e-5f);
    h.rope_freq_base = keys.optional_float("rope.freq_base", 10000.0f);
    std::string scaling;
    if (keys.optional_string("rope.scaling.type", scaling) && scaling != "none") {
        throw std::runtime_error("metadata key " + keys.name("rope.scaling.type") + " = '" +
                                 scaling + "' is not supported by the " + kArchitecture +
                                 " plugin (only 'none')");
    }

    // The vocabulary size is the embedding table's row count; the output
    // head is optional (tied to the embedding when absent).
    dwell_dtype dtype{};
    int32_t n_dims = 0;
    int64_t ne[DWELL_MAX_DIMS] = {0, 0, 0, 0};
    if (!meta.get_tensor(meta.self, "token_embd.weight", &dtype, &n_dims, ne))
        throw std::runtime_error("tensor token_embd.weight is missing");
    h.n_vocab = ne[1];
    if (h.n_vocab < 1 || h.n_vocab > (int64_t{1} << 24)) {
        throw std::runtime_error("tensor token_embd.weight has " + std::to_string(h.n_vocab) +
                                 " rows, outside 1.." + std::to_string(int64_t{1} << 24));
    }
    h.tied_output = !meta.get_tensor(meta.self, "output.weight", &dtype, &n_dims, ne);
    return h;
}

}  // namespace sample_llama
