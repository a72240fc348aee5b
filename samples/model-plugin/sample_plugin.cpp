// The sample-llama model-architecture plugin: a Llama-style decoder
// (RMSNorm, grouped-query attention over the host's KV cache, RoPE, SwiGLU)
// serving GGUF files whose general.architecture is "sample-llama", built
// out of tree on the installed SDK's model kit (KIT model in CMakeLists.txt).
//
// The kit does what every model plugin must and this file need not repeat:
// dwell_plugin_query and the dwell_model_plugin table, no exception across
// the C boundary (each becomes a status and a one-line message), metadata
// reads with range checks that name the key at fault, the tensor
// declarations and the decoder's graph. What is left here is what makes
// the family its own: the rules its files follow, and one block of its
// graph written out.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/model_kit.hpp"

namespace {

namespace kit = dwell::model_kit;

// The kit reads the "<architecture>.*" keys every decoder shares
// (sample-llama.embedding_length, .block_count, ...); a family then checks
// what it alone requires, naming the key, and throws to refuse the file.
kit::TransformerHParams read_hparams(const kit::MetadataReader& meta) {
    kit::TransformerHParams h = kit::read_transformer_hparams(meta);
    if (h.head_dim * h.n_head != h.n_embd) {
        throw std::runtime_error("metadata key " + meta.arch_key("attention.key_length") + " = " +
                                 std::to_string(h.head_dim) +
                                 " differs from embedding_length / head_count, which the "
                                 "sample-llama plugin requires");
    }
    const std::string scaling = meta.string(meta.arch_key("rope.scaling.type")).value_or("none");
    if (scaling != "none") {
        throw std::runtime_error("metadata key " + meta.arch_key("rope.scaling.type") + " = '" +
                                 scaling + "' is not supported by the sample-llama plugin");
    }
    return h;
}

// The kit's decoder (embedding, layers of attention and feed-forward with
// residuals, output head) with the feed-forward block written out in graph
// IR: the place to put a block of your own. Activations are [width, T].
class SampleDecoder : public kit::DecoderFamily {
public:
    explicit SampleDecoder(const kit::TransformerHParams& h)
        : DecoderFamily(h, {.attention = {.rope_mode = DWELL_ROPE_NORM}}) {}

protected:
    // down(SiLU(gate x) * up x), SiLU-times-up as the one SWIGLU op.
    int32_t feed_forward(const kit::Builder& b, int32_t layer, int32_t x, int64_t) const override {
        const auto w = [&](const char* what) { return b.weight(kit::layer_tensor(layer, what)); };
        const int32_t gate = b.op(DWELL_OP_MATMUL, {w("ffn_gate"), x});
        const int32_t up = b.op(DWELL_OP_MATMUL, {w("ffn_up"), x});
        return b.op(DWELL_OP_MATMUL, {w("ffn_down"), b.op(DWELL_OP_SWIGLU, {gate, up})});
    }
    // The tensors that block reads, with the shapes the host checks against
    // the file before the first step (ne[0] is the row length).
    void add_feed_forward_tensors(std::vector<kit::TensorSpec>& t, int32_t layer) const override {
        const auto& h = hparams();
        t.push_back({kit::layer_tensor(layer, "ffn_gate"), {h.n_embd, h.n_ff}});
        t.push_back({kit::layer_tensor(layer, "ffn_up"), {h.n_embd, h.n_ff}});
        t.push_back({kit::layer_tensor(layer, "ffn_down"), {h.n_ff, h.n_embd}});
    }
};

std::unique_ptr<kit::ModelFamily> make(const kit::MetadataReader& meta) {
    return std::make_unique<SampleDecoder>(read_hparams(meta));
}

constexpr const char* kArchitectures[] = {"sample-llama"};
constexpr kit::PluginDescription kPlugin{
    "sample-llama", "0.1.0", "sample Llama-style decoder (RMSNorm, GQA attention, RoPE, SwiGLU)",
    kArchitectures, 1,       make};

}  // namespace

// The one exported symbol; the kit answers with the ABI version of the
// headers this file was compiled against.
extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    return kit::answer_query<kPlugin>(host, info);
}
