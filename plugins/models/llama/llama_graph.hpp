// The Llama forward pass as dwell graph IR: token embedding, per layer
// RMSNorm -> Q/K/V -> RoPE -> causal GQA attention over the KV cache ->
// output projection -> residual, RMSNorm -> SwiGLU FFN -> residual; final
// RMSNorm and the (possibly tied) output projection for the wanted rows.
#pragma once

#include <string>
#include <vector>

#include "dwell/model.h"
#include "llama_hparams.hpp"

namespace dwell::llama {

struct TensorName {
    std::string name;
    std::vector<int64_t> ne;
    bool required = true;
};

// Every tensor the forward pass reads, with its shape.
std::vector<TensorName> tensor_list(const HParams& h);

// Builds the graph; throws std::runtime_error carrying the builder's message.
void build_forward(const HParams& h, const dwell_graph_builder& b, const dwell_batch& batch);

}  // namespace dwell::llama
