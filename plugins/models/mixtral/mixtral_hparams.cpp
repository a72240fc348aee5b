#include "mixtral_hparams.hpp"

#include <cstdint>
#include <limits>
#include <stdexcept>

#include "model/graph_builder.hpp"
#include "model/model_plugin_entry.hpp"

namespace dwell::mixtral {

namespace {

// The most experts a layer may have (as many as any published model uses,
// and the bound other runtimes apply).
constexpr int64_t kMaxExperts = 256;

}  // namespace

HParams read_hparams(const model_kit::MetadataReader& meta) {
    // The variant is decided first, so a dense file is declined (and offered
    // to the llama plugin) whatever else is wrong with it.
    const std::string count_key = meta.arch_key("expert_count");
    const int64_t n_expert = meta.int_or(count_key, 0, std::numeric_limits<int64_t>::min(),
                                         std::numeric_limits<int64_t>::max());
    if (n_expert == 0) {
        throw model_kit::Decline(count_key +
                                 " is absent or 0: a dense model, served by the llama plugin");
    }
    model_kit::check_range(count_key, n_expert, 1, kMaxExperts);

    HParams h;
    static_cast<model_kit::TransformerHParams&>(h) = model_kit::read_transformer_hparams(meta);
    h.n_expert = n_expert;
    h.n_expert_used = meta.require_int(meta.arch_key("expert_used_count"), 1, n_expert);

    // Early conversions stored each expert as its own tensor; dwell reads the
    // experts of a layer as one [K, N, n_expert] tensor.
    if (!meta.tensor(model_kit::layer_tensor(0, "ffn_gate_exps")) &&
        meta.tensor(model_kit::layer_tensor(0, "ffn_gate.0"))) {
        throw std::runtime_error(
            "tensor blk.0.ffn_gate.0.weight: the experts are stored as separate tensors, a layout "
            "dwell does not read; convert the model again with a current GGUF converter");
    }
    return h;
}

}  // namespace dwell::mixtral
