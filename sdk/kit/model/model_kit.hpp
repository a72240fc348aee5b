// model_kit: what every dwell model-architecture plugin shares (the SDK's
// model kit, sdk/kit/model, installed as share/dwell/kit/model), so that a
// family's plugin is only its hyper-parameters, its tensor list and the
// parts of its graph that differ.
//
//   metadata_reader.hpp     MetadataReader: typed, range-checked reads of the
//                           file's metadata; every failure is one line naming
//                           the key at fault.
//   transformer_hparams.hpp TransformerHParams + read_transformer_hparams():
//                           the "<arch>.*" keys decoder-only transformers share
//                           (sizes, heads, head_dim, RoPE, norm epsilon, tied
//                           output, vocabulary size).
//   graph_builder.hpp       Builder: the host's dwell_graph_builder with every
//                           call checked (throws with the host's reason), an
//                           optional-weight lookup, and layer_tensor() names.
//   transformer_blocks.hpp  The blocks several families share: RMSNorm times
//                           a weight, a linear layer with optional bias,
//                           self-attention over the KV cache and the dense
//                           gated (SwiGLU, GeGLU) feed-forward block, each with
//                           the tensors it reads.
//   moe_feed_forward.hpp    The mixture-of-experts feed-forward block (router,
//                           top-k, renormalised weights, SwiGLU experts; only
//                           the chosen experts read) and its tensors.
//   decoder_family.hpp      DecoderFamily: the whole decoder (embedding, the
//                           layers, output head) and its tensor list, shaped
//                           by a DecoderLayout; a family whose feed-forward
//                           block differs derives and overrides it.
//   model_plugin_entry.hpp  ModelFamily (the per-file object a plugin makes),
//                           PluginDescription, Decline, and answer_query<>(),
//                           which implements the whole dwell_model_plugin
//                           table and dwell_plugin_query around them.
//
// A plugin (see plugins/models/qwen2 or samples/model-plugin for a complete
// one):
//
//   // Throws to refuse the file; throws Decline when it is another variant.
//   std::unique_ptr<model_kit::ModelFamily> make(const model_kit::MetadataReader& m) {
//       return std::make_unique<model_kit::DecoderFamily>(read_hparams(m), kLayout);
//   }
//   constexpr const char* kArchitectures[] = {"qwen2"};
//   constexpr model_kit::PluginDescription kPlugin{"qwen2", "0.1.0", "Qwen2 ...",
//                                                  kArchitectures, 1, make};
//   extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(
//       const dwell_host_services* host, dwell_plugin_info* info) {
//       return model_kit::answer_query<kPlugin>(host, info);
//   }
//
// Compiled into each plugin: dwell_add_plugin(NAME SOURCES ... KIT model)
// adds the kit's sources to the plugin's own (hidden symbols, the plugin's
// flags), so only the C ABI crosses its boundary; include it as
// "model/model_kit.hpp". Errors inside are exceptions; the entry turns them
// into status codes and one-line messages at the ABI.
#pragma once

#include "model/decoder_family.hpp"
#include "model/graph_builder.hpp"
#include "model/metadata_reader.hpp"
#include "model/model_plugin_entry.hpp"
#include "model/moe_feed_forward.hpp"
#include "model/transformer_blocks.hpp"
#include "model/transformer_hparams.hpp"
