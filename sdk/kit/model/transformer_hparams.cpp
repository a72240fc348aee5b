#include "model/transformer_hparams.hpp"

#include <cmath>
#include <optional>
#include <stdexcept>

namespace dwell::model_kit {

dwell_model_info TransformerHParams::model_info() const {
    dwell_model_info info{};
    info.struct_size = sizeof(info);
    info.n_vocab = n_vocab;
    info.n_ctx_train = n_ctx_train;
    info.n_layer = n_layer;
    info.kv_width = kv_width();
    return info;
}

namespace {

TransformerHParams read_hparams(const MetadataReader& m, float default_rms_eps,
                                std::optional<int64_t> n_head_kv) {
    TransformerHParams h;
    h.arch = m.architecture();
    const auto key = [&](const char* suffix) { return m.arch_key(suffix); };

    h.n_embd = m.require_int(key("embedding_length"), 1, 1 << 20);
    h.n_layer = static_cast<int32_t>(m.require_int(key("block_count"), 1, 4096));
    h.n_ff = m.require_int(key("feed_forward_length"), 1, 1 << 22);
    h.n_head = m.require_int(key("attention.head_count"), 1, 1 << 14);
    if (n_head_kv) {
        check_range(key("attention.head_count_kv") + " (of the attention layers)", *n_head_kv, 1,
                    h.n_head);
        h.n_head_kv = *n_head_kv;
    } else {
        h.n_head_kv = m.int_or(key("attention.head_count_kv"), h.n_head, 1, h.n_head);
    }
    h.n_ctx_train = m.int_or(key("context_length"), 2048, 1, int64_t{1} << 24);
    if (h.n_head % h.n_head_kv != 0) {
        throw std::runtime_error(key("attention.head_count") + " (" + std::to_string(h.n_head) +
                                 ") is not a multiple of head_count_kv (" +
                                 std::to_string(h.n_head_kv) + ")");
    }
    const bool explicit_head_dim = m.has(key("attention.key_length"));
    h.head_dim = m.int_or(key("attention.key_length"), h.n_embd / h.n_head, 2, 1 << 12);
    if (!explicit_head_dim && (h.head_dim < 2 || h.head_dim * h.n_head != h.n_embd)) {
        throw std::runtime_error(key("embedding_length") + " (" + std::to_string(h.n_embd) +
                                 ") is not a multiple of attention.head_count (" +
                                 std::to_string(h.n_head) + ") and attention.key_length is absent");
    }
    const int64_t value_length = m.int_or(key("attention.value_length"), h.head_dim, 1, 1 << 12);
    if (value_length != h.head_dim) {
        throw std::runtime_error(key("attention.value_length") + " (" +
                                 std::to_string(value_length) + ") differs from key_length (" +
                                 std::to_string(h.head_dim) + "), which dwell does not support");
    }
    h.n_rot =
        static_cast<int32_t>(m.int_or(key("rope.dimension_count"), h.head_dim, 2, h.head_dim));
    if (h.n_rot % 2) throw std::runtime_error(key("rope.dimension_count") + " must be even");
    // Zero, negative or non-finite values make every norm or rotation
    // NaN, which would surface only as garbage logits; refused here.
    h.rms_eps = m.positive_float_or(key("attention.layer_norm_rms_epsilon"), default_rms_eps);
    h.rope_freq_base = m.positive_float_or(key("rope.freq_base"), 10000.0f);
    const RopeScaling scaling = read_rope_scaling(m, h.n_rot, h.rope_freq_base);
    h.rope_freq_scale = scaling.freq_scale;
    h.rope_attn_factor = scaling.attn_factor;
    h.rope_freq_factors = scaling.freq_factors;

    // The vocabulary size is the embedding table's row count.
    const auto embd = m.tensor("token_embd.weight");
    if (!embd || embd->ne.size() < 2)
        throw std::runtime_error("tensor token_embd.weight is missing or not 2-D");
    h.n_vocab = embd->ne[1];
    check_range("token_embd.weight rows", h.n_vocab, 1, int64_t{1} << 24);
    h.tied_output = !m.tensor("output.weight").has_value();
    return h;
}

}  // namespace

TransformerHParams read_transformer_hparams(const MetadataReader& m, float default_rms_eps) {
    return read_hparams(m, default_rms_eps, std::nullopt);
}

TransformerHParams read_transformer_hparams(const MetadataReader& m, float default_rms_eps,
                                            int64_t n_head_kv) {
    return read_hparams(m, default_rms_eps, n_head_kv);
}

void require_full_rope_and_rms_eps(const MetadataReader& m, const TransformerHParams& h) {
    if (h.n_rot != h.head_dim) {
        throw std::runtime_error(m.arch_key("rope.dimension_count") + " (" +
                                 std::to_string(h.n_rot) + ") must equal the head size (" +
                                 std::to_string(h.head_dim) + ") in " + h.arch + " models");
    }
    const std::string eps = m.arch_key("attention.layer_norm_rms_epsilon");
    if (!m.has(eps)) throw std::runtime_error("metadata key " + eps + " is missing");
}

}  // namespace dwell::model_kit
