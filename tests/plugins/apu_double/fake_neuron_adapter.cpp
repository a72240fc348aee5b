// A test double of MediaTek's NeuronAdapter library (libneuron_adapter.so):
// the API subset the apu plugin uses (plugins/backends/apu/
// neuron_adapter_api.hpp), run on the CPU with reference kernels
// (fake_neuron_kernels.hpp). It enforces the documented contract and
// records every violation for fake_neuron_violations():
//  - operands are added before an operation or the model's input/output
//    list names them; each operand is written by at most one operation,
//    before any operation reads it;
//  - operand types and shapes suit each operation: FULLY_CONNECTED takes
//    input [m, k], weights [n, k], bias [n] (all TENSOR_FLOAT32) and a
//    constant INT32 fused activation, and writes [m, n]; CAST takes
//    TENSOR_FLOAT16 to TENSOR_FLOAT32; DEQUANTIZE takes
//    TENSOR_QUANT8_SYMM_PER_CHANNEL, whose per-channel scales must be set;
//    values have exactly the operand's size;
//  - nothing changes a model after NeuronModel_finish or a compilation
//    after NeuronCompilation_finish; only a finished model is compiled and
//    only a finished compilation executed; values longer than 128 bytes are
//    referenced, not copied, and must not change before the compilation is
//    finished (the library copies them then);
//  - memory comes from a valid, large enough fd; executions bind every
//    input and output, in range and of the right size, before computing;
//    a memory is not freed while an execution is bound to it, a
//    compilation not while an execution of it lives, a model not while a
//    compilation of it lives; every object is freed by the end.
// With NeuronCompilation_setCaching, a compile writes a file named by the
// token into the cache folder and a later compile of the same network
// (another process or runtime) loads it instead: fake_neuron_cache_hits().
//
// Faults, read from DWELL_FAKE_NEURON_FAIL at each call: "compile:N" (the
// Nth NeuronCompilation_finish fails with NEURON_OP_FAILED), "execute:N"
// (the Nth NeuronExecution_compute fails with NEURON_BAD_STATE); N counts
// those calls since the variable last changed.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "fake_neuron_kernels.hpp"
#include "fault_schedule.hpp"
#include "violation_log.hpp"

// Numeric codes as NeuronAdapter documents them (NNAPI's numbering).
namespace {
enum : int {
    kNoError = 0,
    kUnexpectedNull = 3,
    kBadData = 4,
    kOpFailed = 5,
    kBadState = 7,
};
enum : int32_t {
    kInt32 = 1,
    kTensorFloat32 = 3,
    kTensorInt32 = 4,
    kTensorFloat16 = 8,
    kTensorQuant8SymmPerChannel = 11,
};
enum : int32_t { kOpDequantize = 6, kOpFullyConnected = 9, kOpCast = 45 };
constexpr size_t kImmediateBytes = 128;
constexpr size_t kTokenBytes = 32;
}  // namespace

extern "C" {
struct NeuronOperandType {
    int32_t type;
    uint32_t dimensionCount;
    const uint32_t* dimensions;
    float scale;
    int32_t zeroPoint;
};
struct NeuronSymmPerChannelQuantParams {
    uint32_t channelDim;
    uint32_t scaleCount;
    const float* scales;
};
struct NeuronRuntimeVersion {
    uint8_t major, minor, patch;
};
}

struct NeuronMemory {
    int fd = -1;
    size_t size = 0;
    uint8_t* map = nullptr;
    int bound = 0;  // execution bindings using it
};

struct Operand {
    int32_t type = 0;
    std::vector<uint32_t> dims;
    bool has_value = false;
    std::vector<uint8_t> copied;   // values up to 128 bytes
    const uint8_t* ref = nullptr;  // longer values: the caller's buffer ...
    size_t ref_len = 0;
    uint64_t ref_sum = 0;  // ... and its checksum when set
    bool per_channel = false;
    uint32_t channel_dim = 0;
    std::vector<float> scales;
    int producer = -1;  // operation index
    bool is_input = false, is_output = false;
};

struct Operation {
    int32_t type;
    std::vector<uint32_t> in, out;
};

struct NeuronModel {
    std::vector<Operand> operands;
    std::vector<Operation> ops;
    std::vector<uint32_t> inputs, outputs;
    bool io_set = false, finished = false;
    int compilations = 0;
};

struct NeuronCompilation {
    NeuronModel* model = nullptr;
    bool finished = false;
    int32_t preference = 1, priority = 100;
    std::string cache_dir;
    std::array<uint8_t, kTokenBytes> token{};
    std::vector<std::vector<uint8_t>> values;  // every constant, copied at finish
    int executions = 0;
};

struct Binding {
    NeuronMemory* memory = nullptr;
    size_t offset = 0, length = 0;
};

struct NeuronExecution {
    NeuronCompilation* compilation = nullptr;
    std::vector<Binding> in, out;
};

namespace {

struct State {
    std::mutex mutex;
    std::map<NeuronModel*, std::unique_ptr<NeuronModel>> models;
    std::map<NeuronCompilation*, std::unique_ptr<NeuronCompilation>> compilations;
    std::map<NeuronExecution*, std::unique_ptr<NeuronExecution>> executions;
    std::map<NeuronMemory*, std::unique_ptr<NeuronMemory>> memories;
    fake_vendor::ViolationLog violations;
    long compiles = 0, cache_hits = 0, computes = 0;
    // NeuronCompilation_finish and NeuronExecution_compute calls, for faults.
    fake_vendor::FaultSchedule<2> faults{"DWELL_FAKE_NEURON_FAIL"};

    int violate(const std::string& what, int rc) {
        violations.add(what);
        return rc;
    }
};

State& state() {
    static State s;
    return s;
}

uint64_t checksum(const uint8_t* p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

size_t element_bytes(int32_t type) {
    switch (type) {
        case kInt32:
        case kTensorFloat32:
        case kTensorInt32:
            return 4;
        case kTensorFloat16:
            return 2;
        case kTensorQuant8SymmPerChannel:
            return 1;
        default:
            return 0;
    }
}

size_t operand_bytes(const Operand& o) {
    size_t n = element_bytes(o.type);
    for (uint32_t d : o.dims) n *= d;
    return n;
}

std::string dims_str(const std::vector<uint32_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
}

// The kinds of call faults are counted for.
enum : size_t { kFinishCalls, kComputeCalls };

// Why operation `op` does not suit its operands, or "".
std::string check_operation(const NeuronModel& m, const Operation& op) {
    const auto t = [&](uint32_t i) -> const Operand& { return m.operands[i]; };
    switch (op.type) {
        case kOpFullyConnected: {
            if (op.in.size() != 4 || op.out.size() != 1)
                return "FULLY_CONNECTED takes 4 inputs and 1 output";
            const Operand &x = t(op.in[0]), &w = t(op.in[1]), &b = t(op.in[2]), &act = t(op.in[3]),
                          &out = t(op.out[0]);
            if (x.type != kTensorFloat32 || w.type != kTensorFloat32 || b.type != kTensorFloat32 ||
                out.type != kTensorFloat32)
                return "FULLY_CONNECTED operands must all be TENSOR_FLOAT32 here";
            if (x.dims.size() != 2 || w.dims.size() != 2 || b.dims.size() != 1 ||
                out.dims.size() != 2)
                return "FULLY_CONNECTED wants input [m, k], weights [n, k], bias [n], output "
                       "[m, n]";
            if (x.dims[1] != w.dims[1] || b.dims[0] != w.dims[0] || out.dims[0] != x.dims[0] ||
                out.dims[1] != w.dims[0])
                return "FULLY_CONNECTED shapes disagree: input " + dims_str(x.dims) + ", weights " +
                       dims_str(w.dims) + ", bias " + dims_str(b.dims) + ", output " +
                       dims_str(out.dims);
            if (act.type != kInt32 || !act.dims.empty())
                return "FULLY_CONNECTED's fused activation must be an INT32 scalar";
            return "";
        }
        case kOpCast:
            if (op.in.size() != 1 || op.out.size() != 1) return "CAST takes 1 input and 1 output";
            if (t(op.in[0]).type != kTensorFloat16 || t(op.out[0]).type != kTensorFloat32)
                return "CAST is implemented here from TENSOR_FLOAT16 to TENSOR_FLOAT32 only";
            if (t(op.in[0]).dims != t(op.out[0]).dims) return "CAST changes the shape";
            return "";
        case kOpDequantize:
            if (op.in.size() != 1 || op.out.size() != 1)
                return "DEQUANTIZE takes 1 input and 1 output";
            if (t(op.in[0]).type != kTensorQuant8SymmPerChannel ||
                t(op.out[0]).type != kTensorFloat32)
                return "DEQUANTIZE is implemented here from TENSOR_QUANT8_SYMM_PER_CHANNEL to "
                       "TENSOR_FLOAT32 only";
            if (t(op.in[0]).dims != t(op.out[0]).dims || t(op.in[0]).dims.size() != 2)
                return "DEQUANTIZE wants two equal rank-2 shapes";
            return "";
        default:
            return "operation type " + std::to_string(op.type) +
                   " is not implemented by the double";
    }
}

// What a compiled network is, for the cache file: structure and values.
std::string fingerprint(const NeuronModel& m, const NeuronCompilation& c) {
    std::ostringstream os;
    for (size_t i = 0; i < m.operands.size(); ++i) {
        const Operand& o = m.operands[i];
        os << "operand " << i << " type " << o.type << " dims " << dims_str(o.dims);
        if (o.has_value) os << " value " << checksum(c.values[i].data(), c.values[i].size());
        if (o.per_channel)
            os << " scales "
               << checksum(reinterpret_cast<const uint8_t*>(o.scales.data()), o.scales.size() * 4);
        os << "\n";
    }
    for (const Operation& op : m.ops) {
        os << "operation " << op.type << " in";
        for (uint32_t i : op.in) os << " " << i;
        os << " out";
        for (uint32_t i : op.out) os << " " << i;
        os << "\n";
    }
    return os.str();
}

std::string token_hex(const std::array<uint8_t, kTokenBytes>& t) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (uint8_t b : t) {
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

}  // namespace

#define FAKE_API extern "C" __attribute__((visibility("default")))

FAKE_API int Neuron_getVersion(NeuronRuntimeVersion* v) {
    if (v == nullptr) return kUnexpectedNull;
    *v = {5, 0, 0};
    return kNoError;
}

// ---------------------------------------------------------------------------
// Memory

FAKE_API int NeuronMemory_createFromFd(size_t size, int protect, int fd, size_t offset,
                                       NeuronMemory** memory) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (memory == nullptr) return s.violate("NeuronMemory_createFromFd: null out", kUnexpectedNull);
    *memory = nullptr;
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0)
        return s.violate("NeuronMemory_createFromFd of an invalid fd", kBadData);
    if (size == 0 || offset + size > static_cast<size_t>(st.st_size))
        return s.violate("NeuronMemory_createFromFd: size " + std::to_string(size) + " at offset " +
                             std::to_string(offset) + " exceeds the file (" +
                             std::to_string(st.st_size) + " bytes)",
                         kBadData);
    if ((protect & ~(PROT_READ | PROT_WRITE)) != 0)
        return s.violate("NeuronMemory_createFromFd: bad protection flags", kBadData);
    void* p =
        ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
    if (p == MAP_FAILED) return s.violate("NeuronMemory_createFromFd: fd not mappable", kBadData);
    auto m = std::make_unique<NeuronMemory>();
    m->fd = fd;
    m->size = size;
    m->map = static_cast<uint8_t*>(p);
    *memory = m.get();
    s.memories.emplace(m.get(), std::move(m));
    return kNoError;
}

FAKE_API void NeuronMemory_free(NeuronMemory* memory) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    auto it = s.memories.find(memory);
    if (it == s.memories.end()) {
        if (memory != nullptr) s.violate("NeuronMemory_free of an unknown memory", 0);
        return;
    }
    if (memory->bound > 0)
        s.violate("NeuronMemory_free while " + std::to_string(memory->bound) +
                      " execution binding(s) still use it",
                  0);
    ::munmap(memory->map, memory->size);
    s.memories.erase(it);
}

// ---------------------------------------------------------------------------
// Model

namespace {
// The model, or null after recording why it may not be changed now.
NeuronModel* editable(State& s, NeuronModel* m, const char* call) {
    if (s.models.count(m) == 0) {
        s.violate(std::string(call) + " on an unknown model", 0);
        return nullptr;
    }
    if (m->finished) {
        s.violate(std::string(call) + " after NeuronModel_finish", 0);
        return nullptr;
    }
    return m;
}
}  // namespace

FAKE_API int NeuronModel_create(NeuronModel** model) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (model == nullptr) return kUnexpectedNull;
    auto m = std::make_unique<NeuronModel>();
    *model = m.get();
    s.models.emplace(m.get(), std::move(m));
    return kNoError;
}

FAKE_API void NeuronModel_free(NeuronModel* model) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    auto it = s.models.find(model);
    if (it == s.models.end()) {
        if (model != nullptr) s.violate("NeuronModel_free of an unknown model", 0);
        return;
    }
    if (model->compilations > 0)
        s.violate("NeuronModel_free while a compilation of it is alive (the model must outlive it)",
                  0);
    s.models.erase(it);
}

FAKE_API int NeuronModel_addOperand(NeuronModel* model, const NeuronOperandType* type) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!editable(s, model, "NeuronModel_addOperand")) return kBadState;
    if (type == nullptr) return s.violate("NeuronModel_addOperand: null type", kUnexpectedNull);
    Operand o;
    o.type = type->type;
    if (element_bytes(o.type) == 0)
        return s.violate("NeuronModel_addOperand: operand type " + std::to_string(o.type) +
                             " is not implemented by the double",
                         kBadData);
    const bool scalar = o.type == kInt32;
    if (scalar != (type->dimensionCount == 0) ||
        (type->dimensionCount > 0 && type->dimensions == nullptr))
        return s.violate("NeuronModel_addOperand: scalars take no dimensions, tensors need them",
                         kBadData);
    for (uint32_t i = 0; i < type->dimensionCount; ++i) {
        if (type->dimensions[i] == 0)
            return s.violate("NeuronModel_addOperand: unknown (0) dimension", kBadData);
        o.dims.push_back(type->dimensions[i]);
    }
    if (type->scale != 0.0f || type->zeroPoint != 0)
        return s.violate("NeuronModel_addOperand: scale/zeroPoint must be 0 for this type",
                         kBadData);
    model->operands.push_back(std::move(o));
    return kNoError;
}

FAKE_API int NeuronModel_setOperandValue(NeuronModel* model, int32_t index, const void* buffer,
                                         size_t length) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!editable(s, model, "NeuronModel_setOperandValue")) return kBadState;
    if (index < 0 || static_cast<size_t>(index) >= model->operands.size())
        return s.violate(
            "NeuronModel_setOperandValue of operand " + std::to_string(index) + ", not added yet",
            kBadData);
    Operand& o = model->operands[static_cast<size_t>(index)];
    if (buffer == nullptr || length != operand_bytes(o))
        return s.violate("NeuronModel_setOperandValue: " + std::to_string(length) +
                             " bytes for operand " + std::to_string(index) + " of " +
                             std::to_string(operand_bytes(o)),
                         kBadData);
    if (o.is_input || o.producer >= 0)
        return s.violate("NeuronModel_setOperandValue of a model input or operation output",
                         kBadData);
    const auto* p = static_cast<const uint8_t*>(buffer);
    o.has_value = true;
    if (length <= kImmediateBytes) {
        o.copied.assign(p, p + length);
    } else {
        o.ref = p;
        o.ref_len = length;
        o.ref_sum = checksum(p, length);
    }
    return kNoError;
}

FAKE_API int NeuronModel_setOperandSymmPerChannelQuantParams(
    NeuronModel* model, int32_t index, const NeuronSymmPerChannelQuantParams* q) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!editable(s, model, "NeuronModel_setOperandSymmPerChannelQuantParams")) return kBadState;
    if (index < 0 || static_cast<size_t>(index) >= model->operands.size() || q == nullptr)
        return s.violate("NeuronModel_setOperandSymmPerChannelQuantParams: bad operand", kBadData);
    Operand& o = model->operands[static_cast<size_t>(index)];
    if (o.type != kTensorQuant8SymmPerChannel)
        return s.violate(
            "per-channel parameters on an operand that is not "
            "TENSOR_QUANT8_SYMM_PER_CHANNEL",
            kBadData);
    if (q->channelDim >= o.dims.size() || q->scaleCount != o.dims[q->channelDim] ||
        q->scales == nullptr)
        return s.violate("per-channel parameters: scaleCount must equal dimensions[channelDim]",
                         kBadData);
    for (uint32_t i = 0; i < q->scaleCount; ++i)
        if (!(q->scales[i] > 0.0f))
            return s.violate("per-channel scales must be positive", kBadData);
    o.per_channel = true;
    o.channel_dim = q->channelDim;
    o.scales.assign(q->scales, q->scales + q->scaleCount);
    return kNoError;
}

FAKE_API int NeuronModel_addOperation(NeuronModel* model, int32_t type, uint32_t inputCount,
                                      const uint32_t* inputs, uint32_t outputCount,
                                      const uint32_t* outputs) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!editable(s, model, "NeuronModel_addOperation")) return kBadState;
    if ((inputCount && !inputs) || (outputCount && !outputs)) return kUnexpectedNull;
    Operation op{type, {inputs, inputs + inputCount}, {outputs, outputs + outputCount}};
    for (uint32_t i : op.in) {
        if (i >= model->operands.size())
            return s.violate(
                "NeuronModel_addOperation reads operand " + std::to_string(i) + ", not added yet",
                kBadData);
    }
    for (uint32_t i : op.out) {
        if (i >= model->operands.size())
            return s.violate(
                "NeuronModel_addOperation writes operand " + std::to_string(i) + ", not added yet",
                kBadData);
        const Operand& o = model->operands[i];
        if (o.producer >= 0 || o.has_value)
            return s.violate(
                "operand " + std::to_string(i) + " is written twice (or is a constant)", kBadData);
    }
    const std::string why = check_operation(*model, op);
    if (!why.empty()) return s.violate("NeuronModel_addOperation: " + why, kBadData);
    for (uint32_t i : op.out) model->operands[i].producer = static_cast<int>(model->ops.size());
    model->ops.push_back(std::move(op));
    return kNoError;
}

FAKE_API int NeuronModel_identifyInputsAndOutputs(NeuronModel* model, uint32_t inputCount,
                                                  const uint32_t* inputs, uint32_t outputCount,
                                                  const uint32_t* outputs) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!editable(s, model, "NeuronModel_identifyInputsAndOutputs")) return kBadState;
    if (model->io_set)
        return s.violate("NeuronModel_identifyInputsAndOutputs called twice", kBadState);
    for (uint32_t k = 0; k < inputCount + outputCount; ++k) {
        const uint32_t i = k < inputCount ? inputs[k] : outputs[k - inputCount];
        if (i >= model->operands.size())
            return s.violate("model input/output " + std::to_string(i) + " was never added",
                             kBadData);
        Operand& o = model->operands[i];
        if (o.is_input || o.is_output)
            return s.violate("operand " + std::to_string(i) + " listed twice as input/output",
                             kBadData);
        if (k < inputCount) {
            if (o.has_value || o.producer >= 0)
                return s.violate(
                    "model input " + std::to_string(i) + " is a constant or an operation's output",
                    kBadData);
            o.is_input = true;
            model->inputs.push_back(i);
        } else {
            o.is_output = true;
            model->outputs.push_back(i);
        }
    }
    model->io_set = true;
    return kNoError;
}

FAKE_API int NeuronModel_finish(NeuronModel* model) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!editable(s, model, "NeuronModel_finish")) return kBadState;
    if (!model->io_set)
        return s.violate("NeuronModel_finish before identifyInputsAndOutputs", kBadState);
    // Every operand an operation reads exists by then: an input, a
    // constant, or the output of an earlier operation.
    for (size_t k = 0; k < model->ops.size(); ++k) {
        for (uint32_t i : model->ops[k].in) {
            const Operand& o = model->operands[i];
            if (!o.is_input && !o.has_value &&
                (o.producer < 0 || o.producer >= static_cast<int>(k)))
                return s.violate("operation " + std::to_string(k) + " reads operand " +
                                     std::to_string(i) + ", which has no value before it",
                                 kBadData);
        }
        if (model->ops[k].type == kOpFullyConnected) {
            const Operand& act = model->operands[model->ops[k].in[3]];
            int32_t v = -1;
            if (act.copied.size() == 4) std::memcpy(&v, act.copied.data(), 4);
            if (v != 0)
                return s.violate(
                    "FULLY_CONNECTED's fused activation must be a constant NONE (0) "
                    "here",
                    kBadData);
        }
    }
    for (size_t i = 0; i < model->operands.size(); ++i) {
        const Operand& o = model->operands[i];
        if (o.type == kTensorQuant8SymmPerChannel && !o.per_channel)
            return s.violate("operand " + std::to_string(i) +
                                 " is TENSOR_QUANT8_SYMM_PER_CHANNEL without per-channel "
                                 "parameters",
                             kBadData);
        if (o.is_output && o.producer < 0)
            return s.violate("model output " + std::to_string(i) + " is written by no operation",
                             kBadData);
    }
    model->finished = true;
    return kNoError;
}

// ---------------------------------------------------------------------------
// Compilation

FAKE_API int NeuronCompilation_create(NeuronModel* model, NeuronCompilation** compilation) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (compilation == nullptr) return kUnexpectedNull;
    *compilation = nullptr;
    if (s.models.count(model) == 0)
        return s.violate("NeuronCompilation_create of an unknown model", kBadData);
    if (!model->finished)
        return s.violate("NeuronCompilation_create of a model not finished", kBadState);
    auto c = std::make_unique<NeuronCompilation>();
    c->model = model;
    ++model->compilations;
    *compilation = c.get();
    s.compilations.emplace(c.get(), std::move(c));
    return kNoError;
}

FAKE_API void NeuronCompilation_free(NeuronCompilation* c) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    auto it = s.compilations.find(c);
    if (it == s.compilations.end()) {
        if (c != nullptr) s.violate("NeuronCompilation_free of an unknown compilation", 0);
        return;
    }
    if (c->executions > 0) s.violate("NeuronCompilation_free while an execution of it is alive", 0);
    if (s.models.count(c->model)) --c->model->compilations;
    s.compilations.erase(it);
}

namespace {
NeuronCompilation* settable(State& s, NeuronCompilation* c, const char* call) {
    if (s.compilations.count(c) == 0) {
        s.violate(std::string(call) + " on an unknown compilation", 0);
        return nullptr;
    }
    if (c->finished) {
        s.violate(std::string(call) + " after NeuronCompilation_finish", 0);
        return nullptr;
    }
    return c;
}
}  // namespace

FAKE_API int NeuronCompilation_setPreference(NeuronCompilation* c, int32_t preference) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!settable(s, c, "NeuronCompilation_setPreference")) return kBadState;
    if (preference < 0 || preference > 3)
        return s.violate(
            "NeuronCompilation_setPreference: unknown preference " + std::to_string(preference),
            kBadData);
    c->preference = preference;
    return kNoError;
}

FAKE_API int NeuronCompilation_setPriority(NeuronCompilation* c, int priority) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!settable(s, c, "NeuronCompilation_setPriority")) return kBadState;
    if (priority != 90 && priority != 100 && priority != 110)
        return s.violate(
            "NeuronCompilation_setPriority: unknown priority " + std::to_string(priority),
            kBadData);
    c->priority = priority;
    return kNoError;
}

FAKE_API int NeuronCompilation_setCaching(NeuronCompilation* c, const char* dir,
                                          const uint8_t* token) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!settable(s, c, "NeuronCompilation_setCaching")) return kBadState;
    struct stat st {};
    if (dir == nullptr || token == nullptr || ::stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return s.violate("NeuronCompilation_setCaching: the cache folder must exist", kBadData);
    c->cache_dir = dir;
    std::memcpy(c->token.data(), token, kTokenBytes);
    return kNoError;
}

FAKE_API int NeuronCompilation_finish(NeuronCompilation* c) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (!settable(s, c, "NeuronCompilation_finish")) return kBadState;
    const NeuronModel& m = *c->model;
    // The one copy of the long values the library makes: they must still
    // hold what they held when set.
    c->values.assign(m.operands.size(), {});
    for (size_t i = 0; i < m.operands.size(); ++i) {
        const Operand& o = m.operands[i];
        if (!o.has_value) continue;
        if (o.ref != nullptr) {
            if (checksum(o.ref, o.ref_len) != o.ref_sum)
                return s.violate("operand " + std::to_string(i) +
                                     "'s value changed between setOperandValue and "
                                     "NeuronCompilation_finish",
                                 kBadData);
            c->values[i].assign(o.ref, o.ref + o.ref_len);
        } else {
            c->values[i] = o.copied;
        }
    }
    if (s.faults.count(kFinishCalls).is("compile")) return kOpFailed;
    const std::string print = fingerprint(m, *c);
    if (!c->cache_dir.empty()) {
        const std::string path = c->cache_dir + "/" + token_hex(c->token) + ".fake-dla";
        std::ifstream in(path, std::ios::binary);
        if (in) {
            std::stringstream ss;
            ss << in.rdbuf();
            if (ss.str() == "fake compiled network v1\n" + print) {
                ++s.cache_hits;
                c->finished = true;
                return kNoError;
            }
            s.violate("cache token " + token_hex(c->token) + " names a different network", 0);
        }
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out << "fake compiled network v1\n" << print;
        if (!out) return s.violate("writing " + path + " failed", kOpFailed);
    }
    ++s.compiles;
    c->finished = true;
    return kNoError;
}

// ---------------------------------------------------------------------------
// Execution

FAKE_API int NeuronExecution_create(NeuronCompilation* c, NeuronExecution** execution) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (execution == nullptr) return kUnexpectedNull;
    *execution = nullptr;
    if (s.compilations.count(c) == 0)
        return s.violate("NeuronExecution_create of an unknown compilation", kBadData);
    if (!c->finished)
        return s.violate("NeuronExecution_create of a compilation not finished", kBadState);
    auto e = std::make_unique<NeuronExecution>();
    e->compilation = c;
    e->in.resize(c->model->inputs.size());
    e->out.resize(c->model->outputs.size());
    ++c->executions;
    *execution = e.get();
    s.executions.emplace(e.get(), std::move(e));
    return kNoError;
}

FAKE_API void NeuronExecution_free(NeuronExecution* e) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    auto it = s.executions.find(e);
    if (it == s.executions.end()) {
        if (e != nullptr) s.violate("NeuronExecution_free of an unknown execution", 0);
        return;
    }
    for (auto* list : {&e->in, &e->out})
        for (Binding& b : *list)
            if (b.memory != nullptr && s.memories.count(b.memory)) --b.memory->bound;
    if (s.compilations.count(e->compilation)) --e->compilation->executions;
    s.executions.erase(it);
}

namespace {
int bind(State& s, NeuronExecution* e, uint32_t index, const NeuronOperandType* type,
         const NeuronMemory* memory, size_t offset, size_t length, bool input) {
    const char* call =
        input ? "NeuronExecution_setInputFromMemory" : "NeuronExecution_setOutputFromMemory";
    if (s.executions.count(e) == 0)
        return s.violate(std::string(call) + " on an unknown execution", kBadData);
    auto* mem = const_cast<NeuronMemory*>(memory);
    if (s.memories.count(mem) == 0)
        return s.violate(std::string(call) + " with an unknown or freed memory", kBadData);
    std::vector<Binding>& list = input ? e->in : e->out;
    if (index >= list.size())
        return s.violate(std::string(call) + ": index " + std::to_string(index) + " of " +
                             std::to_string(list.size()),
                         kBadData);
    if (type != nullptr)
        return s.violate(std::string(call) + ": NeuronAdapter takes only a null type", kBadData);
    const NeuronModel& m = *e->compilation->model;
    const Operand& o = m.operands[(input ? m.inputs : m.outputs)[index]];
    if (length != operand_bytes(o) || offset + length > mem->size)
        return s.violate(std::string(call) + ": " + std::to_string(length) + " bytes at " +
                             std::to_string(offset) + " for an operand of " +
                             std::to_string(operand_bytes(o)) + " in a memory of " +
                             std::to_string(mem->size),
                         kBadData);
    Binding& b = list[index];
    if (b.memory != nullptr && s.memories.count(b.memory)) --b.memory->bound;
    b = {mem, offset, length};
    ++mem->bound;
    return kNoError;
}
}  // namespace

FAKE_API int NeuronExecution_setInputFromMemory(NeuronExecution* e, uint32_t index,
                                                const NeuronOperandType* type,
                                                const NeuronMemory* memory, size_t offset,
                                                size_t length) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    return bind(s, e, index, type, memory, offset, length, true);
}

FAKE_API int NeuronExecution_setOutputFromMemory(NeuronExecution* e, uint32_t index,
                                                 const NeuronOperandType* type,
                                                 const NeuronMemory* memory, size_t offset,
                                                 size_t length) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    return bind(s, e, index, type, memory, offset, length, false);
}

FAKE_API int NeuronExecution_compute(NeuronExecution* e) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.executions.count(e) == 0)
        return s.violate("NeuronExecution_compute on an unknown execution", kBadData);
    for (auto* list : {&e->in, &e->out})
        for (const Binding& b : *list)
            if (b.memory == nullptr || s.memories.count(b.memory) == 0)
                return s.violate("NeuronExecution_compute with an input or output not bound",
                                 kBadState);
    if (s.faults.count(kComputeCalls).is("execute")) return kBadState;
    const NeuronCompilation& c = *e->compilation;
    const NeuronModel& m = *c.model;
    // Every operand as bytes: inputs from their memory, constants from the
    // compiled copy, the rest computed in operation order.
    std::vector<std::vector<uint8_t>> v(m.operands.size());
    for (size_t k = 0; k < m.inputs.size(); ++k) {
        const Binding& b = e->in[k];
        v[m.inputs[k]].assign(b.memory->map + b.offset, b.memory->map + b.offset + b.length);
    }
    for (size_t i = 0; i < m.operands.size(); ++i)
        if (m.operands[i].has_value) v[i] = c.values[i];
    for (const Operation& op : m.ops) {
        const Operand& out = m.operands[op.out[0]];
        std::vector<uint8_t>& dst = v[op.out[0]];
        dst.assign(operand_bytes(out), 0);
        auto* o = reinterpret_cast<float*>(dst.data());
        const auto f32 = [&](uint32_t i) { return reinterpret_cast<const float*>(v[i].data()); };
        if (op.type == kOpFullyConnected) {
            const Operand& x = m.operands[op.in[0]];
            const Operand& w = m.operands[op.in[1]];
            fake_neuron::fully_connected(f32(op.in[0]), f32(op.in[1]), f32(op.in[2]), o, x.dims[0],
                                         w.dims[0], w.dims[1]);
        } else if (op.type == kOpCast) {
            fake_neuron::cast_f16_to_f32(reinterpret_cast<const uint16_t*>(v[op.in[0]].data()), o,
                                         dst.size() / 4);
        } else if (op.type == kOpDequantize) {
            const Operand& q = m.operands[op.in[0]];
            fake_neuron::dequantize_per_channel(reinterpret_cast<const int8_t*>(v[op.in[0]].data()),
                                                q.scales.data(), q.channel_dim, o, q.dims[0],
                                                q.dims[1]);
        }
    }
    for (size_t k = 0; k < m.outputs.size(); ++k) {
        const Binding& b = e->out[k];
        std::memcpy(b.memory->map + b.offset, v[m.outputs[k]].data(), b.length);
    }
    ++s.computes;
    return kNoError;
}

// ---------------------------------------------------------------------------
// For tests

// The contract violations seen so far, plus every object still alive, as
// text; returns its length (0: clean).
FAKE_API int fake_neuron_violations(char* out, int cap) {
    State& s = state();
    std::lock_guard lock(s.mutex);
    std::string all = s.violations.lines;
    const auto alive = [&](size_t n, const char* what) {
        if (n) all += std::to_string(n) + " " + what + " not freed\n";
    };
    alive(s.models.size(), "NeuronModel(s)");
    alive(s.compilations.size(), "NeuronCompilation(s)");
    alive(s.executions.size(), "NeuronExecution(s)");
    alive(s.memories.size(), "NeuronMemory(s)");
    return fake_vendor::copy_text(all, out, cap);
}

// Forgets the violations recorded so far (for a test that provokes some).
FAKE_API void fake_neuron_clear_violations() {
    std::lock_guard lock(state().mutex);
    state().violations.clear();
}

// Networks compiled (cache misses), loaded from the cache, and executions
// run successfully, since the library was loaded.
FAKE_API long fake_neuron_compiles() {
    std::lock_guard lock(state().mutex);
    return state().compiles;
}

FAKE_API long fake_neuron_cache_hits() {
    std::lock_guard lock(state().mutex);
    return state().cache_hits;
}

FAKE_API long fake_neuron_executions() {
    std::lock_guard lock(state().mutex);
    return state().computes;
}
