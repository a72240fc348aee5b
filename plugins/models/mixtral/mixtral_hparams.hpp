// Mixture-of-experts Llama hyper-parameters (Mixtral): the Llama keys plus
// "<arch>.expert_count" (experts per layer) and "<arch>.expert_used_count"
// (experts each token is routed to).
#pragma once

#include <cstdint>

#include "model/metadata_reader.hpp"
#include "model/transformer_hparams.hpp"

namespace dwell::mixtral {

struct HParams : model_kit::TransformerHParams {
    int64_t n_expert = 0;       // 1..256
    int64_t n_expert_used = 0;  // 1..n_expert
};

// Throws model_kit::Decline for a dense file (no experts: the llama plugin's),
// std::runtime_error with a one-line reason naming the key at fault otherwise.
HParams read_hparams(const model_kit::MetadataReader& meta);

}  // namespace dwell::mixtral
