// Llama-family hyper-parameters, read from the model's metadata
// ("<arch>.embedding_length" and friends, as GGUF names them).
#pragma once

#include "model/metadata_reader.hpp"
#include "model/transformer_hparams.hpp"

namespace dwell::llama {

using HParams = model_kit::TransformerHParams;

// Throws std::runtime_error with a one-line reason naming the key at fault.
HParams read_hparams(const model_kit::MetadataReader& meta);

}  // namespace dwell::llama
