#include "nnrt_network.hpp"

#include <dwell/tensor.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

namespace dwell::nnrt {

namespace {

size_t element_bytes(OH_NN_DataType t) {
    return t == OH_NN_FLOAT32 ? 4 : t == OH_NN_FLOAT16 ? 2 : 1;
}

// Adds tensors and operations to one model, owning it until compiled.
class ModelBuilder {
public:
    explicit ModelBuilder(const NnrtApi& api)
        : api_(api), model_(own(api, api.OH_NNModel_Construct(), "OH_NNModel_Construct")) {}

    uint32_t add_tensor(OH_NN_DataType type, const std::vector<int32_t>& shape,
                        OH_NN_Format format) {
        auto desc = own(api_, api_.OH_NNTensorDesc_Create(), "OH_NNTensorDesc_Create");
        check(api_.OH_NNTensorDesc_SetDataType(desc.get(), type), "OH_NNTensorDesc_SetDataType");
        check(api_.OH_NNTensorDesc_SetShape(desc.get(), shape.data(), shape.size()),
              "OH_NNTensorDesc_SetShape");
        check(api_.OH_NNTensorDesc_SetFormat(desc.get(), format), "OH_NNTensorDesc_SetFormat");
        check(api_.OH_NNModel_AddTensorToModel(model_.get(), desc.get()),
              "OH_NNModel_AddTensorToModel");
        return next_++;
    }
    void set_data(uint32_t index, const void* data, size_t bytes) {
        check(api_.OH_NNModel_SetTensorData(model_.get(), index, data, bytes),
              "OH_NNModel_SetTensorData");
    }
    void set_per_channel_quant(uint32_t index, const std::vector<double>& scales) {
        auto q = own(api_, api_.OH_NNQuantParam_Create(), "OH_NNQuantParam_Create");
        const std::vector<int32_t> zero(scales.size(), 0);
        const std::vector<uint32_t> bits(scales.size(), 8);
        check(api_.OH_NNQuantParam_SetScales(q.get(), scales.data(), scales.size()),
              "OH_NNQuantParam_SetScales");
        check(api_.OH_NNQuantParam_SetZeroPoints(q.get(), zero.data(), zero.size()),
              "OH_NNQuantParam_SetZeroPoints");
        check(api_.OH_NNQuantParam_SetNumBits(q.get(), bits.data(), bits.size()),
              "OH_NNQuantParam_SetNumBits");
        check(api_.OH_NNModel_SetTensorQuantParams(model_.get(), index, q.get()),
              "OH_NNModel_SetTensorQuantParams");
    }
    void set_type(uint32_t index, OH_NN_TensorType type) {
        check(api_.OH_NNModel_SetTensorType(model_.get(), index, type), "OH_NNModel_SetTensorType");
    }
    void add_operation(OH_NN_OperationType op, std::vector<uint32_t> params,
                       std::vector<uint32_t> inputs, std::vector<uint32_t> outputs) {
        const OH_NN_UInt32Array p{params.data(), static_cast<uint32_t>(params.size())};
        const OH_NN_UInt32Array i{inputs.data(), static_cast<uint32_t>(inputs.size())};
        const OH_NN_UInt32Array o{outputs.data(), static_cast<uint32_t>(outputs.size())};
        check(api_.OH_NNModel_AddOperation(model_.get(), op, &p, &i, &o),
              "OH_NNModel_AddOperation");
    }
    void finish(std::vector<uint32_t> inputs, std::vector<uint32_t> outputs) {
        const OH_NN_UInt32Array i{inputs.data(), static_cast<uint32_t>(inputs.size())};
        const OH_NN_UInt32Array o{outputs.data(), static_cast<uint32_t>(outputs.size())};
        check(api_.OH_NNModel_SpecifyInputsAndOutputs(model_.get(), &i, &o),
              "OH_NNModel_SpecifyInputsAndOutputs");
        check(api_.OH_NNModel_Finish(model_.get()), "OH_NNModel_Finish");
    }
    const OH_NNModel* model() const { return model_.get(); }

private:
    const NnrtApi& api_;
    Handle<OH_NNModel> model_;
    uint32_t next_ = 0;
};

}  // namespace

uint64_t NetworkSpec::fingerprint() const {
    std::vector<int64_t> shape = {m, activations, static_cast<int64_t>(nodes.size())};
    for (int32_t k : input_k) shape.push_back(k);
    uint64_t h = nnrt::fingerprint(shape.data(), shape.size() * sizeof(int64_t));
    for (const Node& n : nodes) {
        const int64_t words[2] = {n.source, static_cast<int64_t>(n.weight->fingerprint)};
        h = nnrt::fingerprint(words, sizeof words, h);
    }
    return h;
}

Network::Network(const NnrtApi& api, NetworkSpec spec, const CompileOptions& options)
    : api_(api), spec_(std::move(spec)), device_id_(options.device_id) {
    const OH_NN_DataType act = spec_.activations;
    const size_t act_bytes = element_bytes(act);
    ModelBuilder b(api);
    std::vector<uint32_t> model_inputs, model_outputs;
    for (int32_t k : spec_.input_k)
        model_inputs.push_back(b.add_tensor(act, {spec_.m, k}, OH_NN_FORMAT_ND));
    // Zero biases, one buffer long enough for the widest node; the model
    // may reference the data until it is compiled.
    int32_t widest = 0;
    for (const auto& n : spec_.nodes) widest = std::max(widest, n.weight->n);
    const std::vector<uint8_t> zeros(static_cast<size_t>(widest) * act_bytes, 0);
    const int8_t no_activation = OH_NN_FUSED_NONE;
    for (const auto& node : spec_.nodes) {
        const ConvertedWeight& w = *node.weight;
        const uint32_t x = node.source >= 0
                               ? model_inputs.at(static_cast<size_t>(node.source))
                               : model_outputs.at(static_cast<size_t>(-node.source - 1));
        const uint32_t wi = b.add_tensor(w.type, {w.n, w.k}, OH_NN_FORMAT_ND);
        if (w.type == OH_NN_INT8) b.set_per_channel_quant(wi, w.scales);
        b.set_data(wi, w.data.data(), w.data.size());
        const uint32_t bias = b.add_tensor(act, {w.n}, OH_NN_FORMAT_ND);
        b.set_data(bias, zeros.data(), static_cast<size_t>(w.n) * act_bytes);
        const uint32_t fuse = b.add_tensor(OH_NN_INT8, {1}, OH_NN_FORMAT_NONE);
        b.set_data(fuse, &no_activation, 1);
        b.set_type(fuse, OH_NN_FULL_CONNECTION_ACTIVATIONTYPE);
        const uint32_t out = b.add_tensor(act, {spec_.m, w.n}, OH_NN_FORMAT_ND);
        b.add_operation(OH_NN_OPS_FULL_CONNECTION, {fuse}, {x, wi, bias}, {out});
        model_outputs.push_back(out);
    }
    b.finish(model_inputs, model_outputs);

    compilation_ =
        own(api, api.OH_NNCompilation_Construct(b.model()), "OH_NNCompilation_Construct");
    check(api.OH_NNCompilation_SetDevice(compilation_.get(), options.device_id),
          "OH_NNCompilation_SetDevice");
    if (!options.cache_dir.empty()) {
        // One folder per model content: NNRt reuses whatever compiled model
        // a cache folder holds, so a folder must never serve two models.
        char name[32];
        std::snprintf(name, sizeof name, "%016llx",
                      static_cast<unsigned long long>(spec_.fingerprint()));
        const std::filesystem::path dir = std::filesystem::path(options.cache_dir) / name;
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec)
            throw NnrtError("cannot create the cache folder " + dir.string() + ": " + ec.message());
        check(api.OH_NNCompilation_SetCache(compilation_.get(), dir.c_str(), options.cache_version),
              "OH_NNCompilation_SetCache");
    }
    check(api.OH_NNCompilation_SetPerformanceMode(compilation_.get(), options.performance),
          "OH_NNCompilation_SetPerformanceMode");
    check(api.OH_NNCompilation_SetPriority(compilation_.get(), options.priority),
          "OH_NNCompilation_SetPriority");
    check(api.OH_NNCompilation_EnableFloat16(compilation_.get(), options.float16),
          "OH_NNCompilation_EnableFloat16");
    check(api.OH_NNCompilation_Build(compilation_.get()), "OH_NNCompilation_Build");

    executor_ =
        own(api, api.OH_NNExecutor_Construct(compilation_.get()), "OH_NNExecutor_Construct");
    // The executor's own descriptions, checked against what run() will
    // write and read, so a disagreement fails here and not as bad numbers.
    const auto make = [&](NN_TensorDesc* d, const char* call, int32_t row) {
        auto desc = own(api, d, call);
        size_t bytes = 0;
        check(api.OH_NNTensorDesc_GetByteSize(desc.get(), &bytes), "OH_NNTensorDesc_GetByteSize");
        const size_t want = static_cast<size_t>(spec_.m) * static_cast<size_t>(row) * act_bytes;
        if (bytes != want)
            throw NnrtError(std::string(call) + " describes " + std::to_string(bytes) +
                            " bytes where the lowering expects " + std::to_string(want));
        return own(api, api.OH_NNTensor_Create(device_id_, desc.get()), "OH_NNTensor_Create");
    };
    for (size_t i = 0; i < model_inputs.size(); ++i)
        inputs_.push_back(make(api.OH_NNExecutor_CreateInputTensorDesc(executor_.get(), i),
                               "OH_NNExecutor_CreateInputTensorDesc", spec_.input_k[i]));
    for (size_t i = 0; i < model_outputs.size(); ++i)
        outputs_.push_back(make(api.OH_NNExecutor_CreateOutputTensorDesc(executor_.get(), i),
                                "OH_NNExecutor_CreateOutputTensorDesc", spec_.nodes[i].weight->n));
}

Network::~Network() {
    outputs_.clear();
    inputs_.clear();
    executor_.reset();
    compilation_.reset();
}

void Network::run(const std::vector<const float*>& inputs, int32_t rows,
                  const std::vector<float*>& outputs) {
    const bool half = spec_.activations == OH_NN_FLOAT16;
    const size_t m = static_cast<size_t>(spec_.m), used = static_cast<size_t>(rows);
    for (size_t i = 0; i < inputs_.size(); ++i) {
        void* buf = api_.OH_NNTensor_GetDataBuffer(inputs_[i].get());
        if (buf == nullptr) throw NnrtError("OH_NNTensor_GetDataBuffer returned null");
        const size_t n = used * static_cast<size_t>(spec_.input_k[i]);
        const size_t total = m * static_cast<size_t>(spec_.input_k[i]);
        if (half) {
            auto* h = static_cast<uint16_t*>(buf);
            for (size_t e = 0; e < n; ++e) h[e] = dwell_fp32_to_fp16(inputs[i][e]);
            std::memset(h + n, 0, (total - n) * 2);
        } else {
            auto* f = static_cast<float*>(buf);
            std::memcpy(f, inputs[i], n * 4);
            std::memset(f + n, 0, (total - n) * 4);
        }
    }
    std::vector<NN_Tensor*> in, out;
    for (auto& t : inputs_) in.push_back(t.get());
    for (auto& t : outputs_) out.push_back(t.get());
    check(api_.OH_NNExecutor_RunSync(executor_.get(), in.data(), in.size(), out.data(), out.size()),
          "OH_NNExecutor_RunSync");
    for (size_t j = 0; j < outputs_.size(); ++j) {
        const void* buf = api_.OH_NNTensor_GetDataBuffer(outputs_[j].get());
        if (buf == nullptr) throw NnrtError("OH_NNTensor_GetDataBuffer returned null");
        const size_t n = used * static_cast<size_t>(spec_.nodes[j].weight->n);
        if (half) {
            const auto* h = static_cast<const uint16_t*>(buf);
            for (size_t e = 0; e < n; ++e) outputs[j][e] = dwell_fp16_to_fp32(h[e]);
        } else {
            std::memcpy(outputs[j], buf, n * 4);
        }
    }
}

}  // namespace dwell::nnrt
