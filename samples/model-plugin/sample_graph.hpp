// The sample-llama decoder as dwell graph IR: which weight tensors it reads
// and the forward pass for one batch of tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dwell/model.h"
#include "sample_hparams.hpp"

namespace sample_llama {

struct TensorSpec {
    std::string name;
    std::vector<int64_t> ne;  // shape, row length first
    bool required = true;
};

// Every tensor the forward pass reads, with the shape the hyper-parameters
// imply; the host checks each against the file before the first step.
std::vector<TensorSpec> tensor_specs(const HParams& h);

// Adds the forward pass to the host's builder. Throws std::runtime_error
// carrying the builder's own message when a call is refused.
void build_forward(const HParams& h, const dwell_graph_builder& builder, const dwell_batch& batch);

}  // namespace sample_llama
