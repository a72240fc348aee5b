#include "apu_network.hpp"

#include <algorithm>

namespace dwell::apu {

namespace {

constexpr size_t kAlign = 64;

size_t align_up(size_t v) {
    return (v + kAlign - 1) / kAlign * kAlign;
}

// Builds operands and operations on one model, numbering operands as the
// library does (in the order they are added).
class ModelBuilder {
public:
    ModelBuilder(const NeuronAdapterApi& api, NeuronModel* model) : api_(api), model_(model) {}

    uint32_t operand(int32_t type, std::vector<uint32_t> dims) {
        const NeuronOperandType t{type, static_cast<uint32_t>(dims.size()),
                                  dims.empty() ? nullptr : dims.data(), 0.0f, 0};
        check_neuron(api_.NeuronModel_addOperand(model_, &t), "NeuronModel_addOperand");
        return next_++;
    }
    void value(uint32_t index, const void* data, size_t bytes) {
        check_neuron(
            api_.NeuronModel_setOperandValue(model_, static_cast<int32_t>(index), data, bytes),
            "NeuronModel_setOperandValue");
    }
    void per_channel(uint32_t index, const std::vector<float>& scales) {
        const NeuronSymmPerChannelQuantParams q{0, static_cast<uint32_t>(scales.size()),
                                                scales.data()};
        check_neuron(api_.NeuronModel_setOperandSymmPerChannelQuantParams(
                         model_, static_cast<int32_t>(index), &q),
                     "NeuronModel_setOperandSymmPerChannelQuantParams");
    }
    void operation(int32_t type, const std::vector<uint32_t>& in, uint32_t out) {
        check_neuron(api_.NeuronModel_addOperation(model_, type, static_cast<uint32_t>(in.size()),
                                                   in.data(), 1, &out),
                     "NeuronModel_addOperation");
    }

private:
    const NeuronAdapterApi& api_;
    NeuronModel* model_;
    uint32_t next_ = 0;
};

}  // namespace

ApuNetwork::ApuNetwork(const NeuronAdapterApi& api, const NetworkPlan& plan,
                       const CompileSettings& settings)
    : api_(&api),
      model_(nullptr, api.NeuronModel_free),
      compilation_(nullptr, api.NeuronCompilation_free),
      memory_(nullptr, api.NeuronMemory_free),
      execution_(nullptr, api.NeuronExecution_free) {
    model_ = make_model(api);
    ModelBuilder b(api, model_.get());
    const uint32_t rows = plan.rows;

    std::vector<uint32_t> inputs, outputs;
    for (uint32_t k : plan.input_k) inputs.push_back(b.operand(NEURON_TENSOR_FLOAT32, {rows, k}));
    const int32_t no_activation = NEURON_FUSED_NONE;
    const uint32_t activation = b.operand(NEURON_INT32, {});
    b.value(activation, &no_activation, sizeof no_activation);

    for (const NetworkPlan::Matmul& op : plan.ops) {
        const ConvertedWeight& w = *op.weight;
        weights_.push_back(op.weight);
        uint32_t weight = b.operand(w.operand_type, {w.n, w.k});
        if (w.operand_type == NEURON_TENSOR_QUANT8_SYMM_PER_CHANNEL)
            b.per_channel(weight, w.scales);
        b.value(weight, w.values, w.value_bytes);
        if (w.operand_type != NEURON_TENSOR_FLOAT32) {
            const uint32_t widened = b.operand(NEURON_TENSOR_FLOAT32, {w.n, w.k});
            b.operation(w.operand_type == NEURON_TENSOR_FLOAT16 ? NEURON_CAST : NEURON_DEQUANTIZE,
                        {weight}, widened);
            weight = widened;
        }
        biases_.emplace_back(w.n, 0.0f);
        const uint32_t bias = b.operand(NEURON_TENSOR_FLOAT32, {w.n});
        b.value(bias, biases_.back().data(), biases_.back().size() * sizeof(float));
        const uint32_t x = op.from_op >= 0 ? outputs[static_cast<size_t>(op.from_op)]
                                           : inputs[static_cast<size_t>(op.input)];
        const uint32_t out = b.operand(NEURON_TENSOR_FLOAT32, {rows, w.n});
        b.operation(NEURON_FULLY_CONNECTED, {x, weight, bias, activation}, out);
        outputs.push_back(out);
    }
    check_neuron(api.NeuronModel_identifyInputsAndOutputs(
                     model_.get(), static_cast<uint32_t>(inputs.size()), inputs.data(),
                     static_cast<uint32_t>(outputs.size()), outputs.data()),
                 "NeuronModel_identifyInputsAndOutputs");
    check_neuron(api.NeuronModel_finish(model_.get()), "NeuronModel_finish");

    compilation_ = make_compilation(api, model_.get());
    check_neuron(api.NeuronCompilation_setPreference(compilation_.get(), settings.preference),
                 "NeuronCompilation_setPreference");
    check_neuron(api.NeuronCompilation_setPriority(compilation_.get(), settings.priority),
                 "NeuronCompilation_setPriority");
    if (!settings.cache_dir.empty()) {
        check_neuron(api.NeuronCompilation_setCaching(
                         compilation_.get(), settings.cache_dir.c_str(), settings.token.data()),
                     "NeuronCompilation_setCaching");
    }
    check_neuron(api.NeuronCompilation_finish(compilation_.get()), "NeuronCompilation_finish");

    // One arena for every input and output, mapped once; the execution is
    // bound to it once and reused for every step.
    size_t bytes = 0;
    for (uint32_t k : plan.input_k) {
        input_offsets_.push_back(bytes);
        bytes = align_up(bytes + size_t{rows} * k * sizeof(float));
    }
    for (const NetworkPlan::Matmul& op : plan.ops) {
        output_offsets_.push_back(bytes);
        bytes = align_up(bytes + size_t{rows} * op.weight->n * sizeof(float));
    }
    arena_ = std::make_unique<FdBuffer>(std::max(bytes, kAlign), "dwell-apu-io");
    memory_ = make_memory(api, *arena_);
    execution_ = make_execution(api, compilation_.get());
    for (size_t i = 0; i < plan.input_k.size(); ++i) {
        check_neuron(api.NeuronExecution_setInputFromMemory(
                         execution_.get(), static_cast<uint32_t>(i), nullptr, memory_.get(),
                         input_offsets_[i], size_t{rows} * plan.input_k[i] * sizeof(float)),
                     "NeuronExecution_setInputFromMemory");
    }
    for (size_t j = 0; j < plan.ops.size(); ++j) {
        check_neuron(api.NeuronExecution_setOutputFromMemory(
                         execution_.get(), static_cast<uint32_t>(j), nullptr, memory_.get(),
                         output_offsets_[j], size_t{rows} * plan.ops[j].weight->n * sizeof(float)),
                     "NeuronExecution_setOutputFromMemory");
    }
}

float* ApuNetwork::input(size_t i) const {
    return reinterpret_cast<float*>(arena_->data() + input_offsets_[i]);
}

float* ApuNetwork::output(size_t j) const {
    return reinterpret_cast<float*>(arena_->data() + output_offsets_[j]);
}

void ApuNetwork::run() {
    check_neuron(api_->NeuronExecution_compute(execution_.get()), "NeuronExecution_compute");
}

bool ApuNetwork::uses_host_range(const uint8_t* begin, const uint8_t* end) const {
    return std::any_of(sources_.begin(), sources_.end(), [&](const void* p) {
        const auto* q = static_cast<const uint8_t*>(p);
        return q >= begin && q < end;
    });
}

}  // namespace dwell::apu
