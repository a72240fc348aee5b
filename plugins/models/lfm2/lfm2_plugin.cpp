// Entry point of the lfm2 model-architecture plugin. Serves GGUF files whose
// general.architecture is "lfm2" (Liquid's LFM2 dense models, 350M to 2.6B):
// a hybrid of gated short-convolution layers, each carrying the last
// L_cache - 1 inputs of its convolution per sequence (ABI 1.6 recurrent
// state), and GQA attention layers with QK-norm and NEOX RoPE
// (lfm2_hybrid_decoder.hpp has the layer).
#include <memory>

#include "lfm2_hybrid_decoder.hpp"
#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    return std::make_unique<dwell::lfm2::Lfm2HybridDecoder>(dwell::lfm2::read_lfm2_hparams(meta));
}

constexpr const char* kArchitectures[] = {"lfm2"};
constexpr kit::PluginDescription kPlugin{
    "lfm2",
    "0.1.0",
    "LFM2 hybrid (gated short convolutions with carried state, GQA attention with QK-norm, "
    "NEOX RoPE, RMSNorm, SwiGLU)",
    kArchitectures,
    1,
    make};

}  // namespace

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
