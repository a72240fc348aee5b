// The NNRt test double's libneural_network_runtime.so: model construction
// (OH_NNModel_*) and quantization parameters (OH_NNQuantParam_*), with the
// contract checked at every call — tensors exist before an operation names
// them, parameters carry their documented types, shapes and types agree,
// data sizes match descriptions, nothing changes after Finish, handles are
// live. Violations go to the core's record (fake_nnrt_violations()).
#include <algorithm>
#include <cstring>

#include "fake_nnrt_state.hpp"

using fake_nnrt::Desc;
using fake_nnrt::ModelTensor;
using fake_nnrt::State;

namespace {

State& st() {
    return *fake_nnrt_state();
}

// A live, unfinished model, or a violation naming `call`.
int32_t editable(State& s, OH_NNModel* m, const char* call) {
    if (m == nullptr || !s.models.count(m)) {
        s.violate(std::string(call) + " with a handle that is not a live model");
        return fake_nnrt::kInvalidParameter;
    }
    if (m->finished) {
        s.violate(std::string(call) + " after OH_NNModel_Finish: a finished model is immutable");
        return fake_nnrt::kOperationForbidden;
    }
    return fake_nnrt::kSuccess;
}

bool is_float(int32_t t) {
    return t == fake_nnrt::kFloat16 || t == fake_nnrt::kFloat32;
}

// FULL_CONNECTION as the double's device takes it: input [m, K], weight
// [N, K] constant (same float type as the input, or INT8 quantized per
// output channel: weight-only quantization), bias [N] of the input type,
// output [m, N] of the input type, one activationType parameter (INT8, one
// element, an OH_NN_FuseType value). "" when it holds.
std::string check_full_connection(const OH_NNModel& m, const fake_nnrt::Operation& op) {
    if (op.inputs.size() != 3 || op.outputs.size() != 1)
        return "needs inputs {input, weight, bias} and one output";
    if (op.params.size() != 1) return "needs exactly one parameter, activationType";
    const ModelTensor& a = m.tensors[op.params[0]];
    if (a.type != fake_nnrt::kFullConnectionActivationType || a.desc.dtype != fake_nnrt::kInt8 ||
        a.desc.elements() != 1 || !a.has_data || static_cast<int8_t>(a.data[0]) < 0 ||
        static_cast<int8_t>(a.data[0]) > 2)
        return "its parameter must be an INT8 [1] constant of type "
               "OH_NN_FULL_CONNECTION_ACTIVATIONTYPE holding an OH_NN_FuseType";
    const ModelTensor& x = m.tensors[op.inputs[0]];
    const ModelTensor& w = m.tensors[op.inputs[1]];
    const ModelTensor& b = m.tensors[op.inputs[2]];
    const ModelTensor& o = m.tensors[op.outputs[0]];
    for (const ModelTensor* t : {&x, &w, &b, &o})
        if (t->type != fake_nnrt::kTensorData) return "a data operand has a parameter type";
    if (!is_float(x.desc.dtype)) return "input must be FLOAT16 or FLOAT32, is " + x.desc.str();
    if (x.desc.shape.size() != 2 || w.desc.shape.size() != 2 || b.desc.shape.size() != 1 ||
        o.desc.shape.size() != 2)
        return "shapes must be input [m, K], weight [N, K], bias [N], output [m, N]";
    const int32_t mm = x.desc.shape[0], k = x.desc.shape[1], n = w.desc.shape[0];
    if (w.desc.shape[1] != k || b.desc.shape[0] != n || o.desc.shape[0] != mm ||
        o.desc.shape[1] != n)
        return "shapes disagree: input " + x.desc.str() + ", weight " + w.desc.str() + ", bias " +
               b.desc.str() + ", output " + o.desc.str();
    if (!w.has_data) return "the weight must be a constant (OH_NNModel_SetTensorData)";
    if (!b.has_data) return "the bias must be a constant";
    if (w.desc.dtype == fake_nnrt::kInt8) {
        if (w.scales.size() != static_cast<size_t>(n))
            return "INT8 weights need per-channel quantization parameters (" + std::to_string(n) +
                   " scales), have " + std::to_string(w.scales.size());
        for (size_t i = 0; i < w.scales.size(); ++i)
            if (w.zero_points[i] != 0 || w.num_bits[i] != 8 || !(w.scales[i] > 0))
                return "INT8 weights must be symmetric 8-bit with positive scales";
    } else if (w.desc.dtype != x.desc.dtype) {
        return "weight " + w.desc.str() + " and input " + x.desc.str() + " differ in type";
    }
    if (b.desc.dtype != x.desc.dtype || o.desc.dtype != x.desc.dtype)
        return "bias and output must have the input's type";
    if (o.has_data) return "the output tensor holds constant data";
    return "";
}

}  // namespace

FAKE_NNRT_EXPORT OH_NNModel* OH_NNModel_Construct() {
    State& s = st();
    std::lock_guard lock(s.mutex);
    auto* m = new OH_NNModel();
    s.models.insert(m);
    return m;
}

FAKE_NNRT_EXPORT void OH_NNModel_Destroy(OH_NNModel** model) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (model == nullptr || !s.models.count(*model)) {
        s.violate("OH_NNModel_Destroy of a handle that is not a live model");
        return;
    }
    s.models.erase(*model);
    delete *model;
    *model = nullptr;
}

FAKE_NNRT_EXPORT int32_t OH_NNModel_AddTensorToModel(OH_NNModel* m, const NN_TensorDesc* d) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = editable(s, m, "OH_NNModel_AddTensorToModel")) return rc;
    if (d == nullptr || !s.descs.count(d)) {
        s.violate("OH_NNModel_AddTensorToModel with a handle that is not a live tensor desc");
        return fake_nnrt::kInvalidParameter;
    }
    if (d->desc.dtype == fake_nnrt::kUnknown || !d->desc.shape_set || d->desc.shape.empty()) {
        s.violate("OH_NNModel_AddTensorToModel of a description without data type or shape");
        return fake_nnrt::kInvalidParameter;
    }
    ModelTensor t;
    t.desc = d->desc;
    m->tensors.push_back(t);
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNModel_SetTensorData(OH_NNModel* m, uint32_t index, const void* data,
                                                  size_t length) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = editable(s, m, "OH_NNModel_SetTensorData")) return rc;
    if (index >= m->tensors.size() || data == nullptr) {
        s.violate("OH_NNModel_SetTensorData of tensor " + std::to_string(index) +
                  ", which was not added (or null data)");
        return fake_nnrt::kInvalidParameter;
    }
    ModelTensor& t = m->tensors[index];
    if (length != t.desc.bytes()) {
        s.violate("OH_NNModel_SetTensorData of " + std::to_string(length) + " bytes for " +
                  t.desc.str() + " (" + std::to_string(t.desc.bytes()) + " bytes)");
        return fake_nnrt::kInvalidParameter;
    }
    if (t.produced) {
        s.violate("OH_NNModel_SetTensorData on an operation's output");
        return fake_nnrt::kInvalidParameter;
    }
    t.data.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + length);
    t.has_data = true;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNModel_SetTensorType(OH_NNModel* m, uint32_t index, int32_t type) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = editable(s, m, "OH_NNModel_SetTensorType")) return rc;
    if (index >= m->tensors.size() || type < 0) {
        s.violate("OH_NNModel_SetTensorType of tensor " + std::to_string(index) +
                  ", which was not added");
        return fake_nnrt::kInvalidParameter;
    }
    m->tensors[index].type = type;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNModel_SetTensorQuantParams(OH_NNModel* m, uint32_t index,
                                                         NN_QuantParam* q) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = editable(s, m, "OH_NNModel_SetTensorQuantParams")) return rc;
    if (index >= m->tensors.size() || q == nullptr || !s.quant_params.count(q)) {
        s.violate("OH_NNModel_SetTensorQuantParams with a tensor not added or a dead handle");
        return fake_nnrt::kInvalidParameter;
    }
    ModelTensor& t = m->tensors[index];
    const size_t n = q->scales.size();
    if (n == 0 || q->zero_points.size() != n || q->num_bits.size() != n ||
        (n != 1 && n != static_cast<size_t>(t.desc.shape[0]))) {
        s.violate(
            "OH_NNModel_SetTensorQuantParams: scales, zero points and bits must have one "
            "entry, or one per channel of axis 0 (" +
            t.desc.str() + ")");
        return fake_nnrt::kInvalidParameter;
    }
    t.scales = q->scales;
    t.zero_points = q->zero_points;
    t.num_bits = q->num_bits;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNModel_AddOperation(OH_NNModel* m, int32_t op,
                                                 const fake_nnrt::UInt32Array* params,
                                                 const fake_nnrt::UInt32Array* inputs,
                                                 const fake_nnrt::UInt32Array* outputs) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = editable(s, m, "OH_NNModel_AddOperation")) return rc;
    if (params == nullptr || inputs == nullptr || outputs == nullptr) {
        s.violate("OH_NNModel_AddOperation with a null index array");
        return fake_nnrt::kNullPtr;
    }
    fake_nnrt::Operation o;
    o.type = op;
    const auto copy = [&](const fake_nnrt::UInt32Array* a, std::vector<uint32_t>& to) {
        for (uint32_t i = 0; i < a->size; ++i) {
            if (a->data[i] >= m->tensors.size()) {
                s.violate("OH_NNModel_AddOperation names tensor " + std::to_string(a->data[i]) +
                          " before it was added (" + std::to_string(m->tensors.size()) +
                          " tensors)");
                return false;
            }
            to.push_back(a->data[i]);
        }
        return true;
    };
    if (!copy(params, o.params) || !copy(inputs, o.inputs) || !copy(outputs, o.outputs))
        return fake_nnrt::kInvalidParameter;
    if (op != fake_nnrt::kOpFullConnection) {
        s.violate("OH_NNModel_AddOperation of operation type " + std::to_string(op) +
                  ", which the double does not implement");
        return fake_nnrt::kUnsupported;
    }
    const std::string why = check_full_connection(*m, o);
    if (!why.empty()) {
        s.violate("OH_NNModel_AddOperation(FULL_CONNECTION): " + why);
        return fake_nnrt::kInvalidParameter;
    }
    ModelTensor& out = m->tensors[o.outputs[0]];
    if (out.produced) {
        s.violate("OH_NNModel_AddOperation: tensor " + std::to_string(o.outputs[0]) +
                  " is already written by another operation");
        return fake_nnrt::kInvalidParameter;
    }
    out.produced = true;
    m->ops.push_back(o);
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNModel_SpecifyInputsAndOutputs(OH_NNModel* m,
                                                            const fake_nnrt::UInt32Array* inputs,
                                                            const fake_nnrt::UInt32Array* outputs) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = editable(s, m, "OH_NNModel_SpecifyInputsAndOutputs")) return rc;
    if (inputs == nullptr || outputs == nullptr || inputs->size == 0 || outputs->size == 0) {
        s.violate("OH_NNModel_SpecifyInputsAndOutputs without inputs or outputs");
        return fake_nnrt::kInvalidParameter;
    }
    std::vector<uint32_t> in(inputs->data, inputs->data + inputs->size);
    std::vector<uint32_t> out(outputs->data, outputs->data + outputs->size);
    for (uint32_t i : in) {
        if (i >= m->tensors.size() || m->tensors[i].has_data || m->tensors[i].produced) {
            s.violate("model input " + std::to_string(i) +
                      " is not a tensor without data that no operation writes");
            return fake_nnrt::kInvalidParameter;
        }
    }
    for (uint32_t o : out) {
        if (o >= m->tensors.size() || !m->tensors[o].produced) {
            s.violate("model output " + std::to_string(o) + " is not written by any operation");
            return fake_nnrt::kInvalidParameter;
        }
    }
    m->inputs = in;
    m->outputs = out;
    m->io_set = true;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNModel_Finish(OH_NNModel* m) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = editable(s, m, "OH_NNModel_Finish")) return rc;
    if (!m->io_set || m->ops.empty()) {
        s.violate("OH_NNModel_Finish before operations and inputs/outputs were specified");
        return fake_nnrt::kOperationForbidden;
    }
    // Operations in order: each reads model inputs, constants or what an
    // earlier operation wrote.
    std::vector<bool> ready(m->tensors.size(), false);
    for (uint32_t i : m->inputs) ready[i] = true;
    for (size_t i = 0; i < m->tensors.size(); ++i) ready[i] = ready[i] || m->tensors[i].has_data;
    for (const auto& op : m->ops) {
        for (uint32_t i : op.inputs) {
            if (!ready[i]) {
                s.violate("an operation reads tensor " + std::to_string(i) +
                          " before anything writes it");
                return fake_nnrt::kInvalidParameter;
            }
        }
        for (uint32_t o : op.outputs) ready[o] = true;
    }
    m->finished = true;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT NN_QuantParam* OH_NNQuantParam_Create() {
    State& s = st();
    std::lock_guard lock(s.mutex);
    auto* q = new NN_QuantParam();
    s.quant_params.insert(q);
    return q;
}

namespace {

template <typename T>
int32_t set_quant(NN_QuantParam* q, const T* values, size_t n, std::vector<T> NN_QuantParam::*f,
                  const char* call) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (q == nullptr || !s.quant_params.count(q) || values == nullptr || n == 0) {
        s.violate(std::string(call) + " with a dead handle or no values");
        return fake_nnrt::kInvalidParameter;
    }
    (q->*f).assign(values, values + n);
    return fake_nnrt::kSuccess;
}

}  // namespace

FAKE_NNRT_EXPORT int32_t OH_NNQuantParam_SetScales(NN_QuantParam* q, const double* v, size_t n) {
    return set_quant(q, v, n, &NN_QuantParam::scales, "OH_NNQuantParam_SetScales");
}
FAKE_NNRT_EXPORT int32_t OH_NNQuantParam_SetZeroPoints(NN_QuantParam* q, const int32_t* v,
                                                       size_t n) {
    return set_quant(q, v, n, &NN_QuantParam::zero_points, "OH_NNQuantParam_SetZeroPoints");
}
FAKE_NNRT_EXPORT int32_t OH_NNQuantParam_SetNumBits(NN_QuantParam* q, const uint32_t* v, size_t n) {
    return set_quant(q, v, n, &NN_QuantParam::num_bits, "OH_NNQuantParam_SetNumBits");
}

FAKE_NNRT_EXPORT int32_t OH_NNQuantParam_Destroy(NN_QuantParam** q) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (q == nullptr || !s.quant_params.count(*q)) {
        s.violate("OH_NNQuantParam_Destroy of a handle that is not live");
        return fake_nnrt::kInvalidParameter;
    }
    s.quant_params.erase(*q);
    delete *q;
    *q = nullptr;
    return fake_nnrt::kSuccess;
}
