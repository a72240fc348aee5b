// The NeuronAdapter calls the apu plugin makes, declared here from
// MediaTek's public NeuronAdapter API documentation (NeuronAdapter.h as
// described in the NeuroPilot SDK docs; it follows Android NNAPI's model,
// operand and operation numbering). No header of theirs is copied: only the
// subset used here, with the numeric codes the documentation gives.
//
// The library is loaded with dlopen at probe time, so nothing links to it
// and a device without it reports "unavailable".
//
// Thread-safety: load once (guarded by a mutex); the table is then
// read-only. Ownership: the library stays loaded for the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dwell::apu {

// Opaque objects of the library.
struct NeuronModel;
struct NeuronCompilation;
struct NeuronExecution;
struct NeuronMemory;

// Result codes (NeuronAdapterResultCode).
enum : int {
    NEURON_NO_ERROR = 0,
    NEURON_OUT_OF_MEMORY = 1,
    NEURON_INCOMPLETE = 2,
    NEURON_UNEXPECTED_NULL = 3,
    NEURON_BAD_DATA = 4,
    NEURON_OP_FAILED = 5,
    NEURON_UNMAPPABLE = 6,
    NEURON_BAD_STATE = 7,
    NEURON_BAD_VERSION = 8,
};

// Operand types (NNAPI's OperandCode numbering).
enum : int32_t {
    NEURON_FLOAT32 = 0,
    NEURON_INT32 = 1,
    NEURON_TENSOR_FLOAT32 = 3,
    NEURON_TENSOR_INT32 = 4,
    NEURON_TENSOR_FLOAT16 = 8,
    NEURON_TENSOR_QUANT8_SYMM_PER_CHANNEL = 11,
};

// Operation types (NNAPI's OperationCode numbering).
enum : int32_t {
    NEURON_ADD = 0,
    NEURON_DEQUANTIZE = 6,
    NEURON_FULLY_CONNECTED = 9,
    NEURON_MUL = 18,
    NEURON_CAST = 45,
};

// Fused activation codes; FULLY_CONNECTED takes one as its last input.
enum : int32_t { NEURON_FUSED_NONE = 0 };

// Execution preferences and priorities of a compilation.
enum : int32_t {
    NEURON_PREFER_LOW_POWER = 0,
    NEURON_PREFER_FAST_SINGLE_ANSWER = 1,
    NEURON_PREFER_SUSTAINED_SPEED = 2,
};
enum : int32_t {
    NEURON_PRIORITY_LOW = 90,
    NEURON_PRIORITY_MEDIUM = 100,
    NEURON_PRIORITY_HIGH = 110,
};

// Values up to this many bytes are copied by setOperandValue; larger ones
// are referenced and must stay unchanged until the compilation is finished.
constexpr size_t kMaxImmediatelyCopiedValue = 128;
// Bytes of the token that names a compiled network in the cache.
constexpr size_t kCacheTokenBytes = 32;

struct NeuronOperandType {
    int32_t type;
    uint32_t dimensionCount;     // 0 for scalars
    const uint32_t* dimensions;  // null for scalars
    float scale;                 // quantized tensors only
    int32_t zeroPoint;
};

struct NeuronSymmPerChannelQuantParams {
    uint32_t channelDim;
    uint32_t scaleCount;  // dimensions[channelDim]
    const float* scales;
};

struct NeuronRuntimeVersion {
    uint8_t major;
    uint8_t minor;
    uint8_t patch;
};

struct NeuronAdapterApi {
    int (*Neuron_getVersion)(NeuronRuntimeVersion* version) = nullptr;

    int (*NeuronMemory_createFromFd)(size_t size, int protect, int fd, size_t offset,
                                     NeuronMemory** memory) = nullptr;
    void (*NeuronMemory_free)(NeuronMemory* memory) = nullptr;

    int (*NeuronModel_create)(NeuronModel** model) = nullptr;
    void (*NeuronModel_free)(NeuronModel* model) = nullptr;
    int (*NeuronModel_finish)(NeuronModel* model) = nullptr;
    int (*NeuronModel_addOperand)(NeuronModel* model, const NeuronOperandType* type) = nullptr;
    int (*NeuronModel_setOperandValue)(NeuronModel* model, int32_t index, const void* buffer,
                                       size_t length) = nullptr;
    int (*NeuronModel_setOperandSymmPerChannelQuantParams)(
        NeuronModel* model, int32_t index,
        const NeuronSymmPerChannelQuantParams* channelQuant) = nullptr;
    int (*NeuronModel_addOperation)(NeuronModel* model, int32_t type, uint32_t inputCount,
                                    const uint32_t* inputs, uint32_t outputCount,
                                    const uint32_t* outputs) = nullptr;
    int (*NeuronModel_identifyInputsAndOutputs)(NeuronModel* model, uint32_t inputCount,
                                                const uint32_t* inputs, uint32_t outputCount,
                                                const uint32_t* outputs) = nullptr;

    int (*NeuronCompilation_create)(NeuronModel* model, NeuronCompilation** compilation) = nullptr;
    void (*NeuronCompilation_free)(NeuronCompilation* compilation) = nullptr;
    int (*NeuronCompilation_finish)(NeuronCompilation* compilation) = nullptr;
    int (*NeuronCompilation_setPreference)(NeuronCompilation* compilation,
                                           int32_t preference) = nullptr;
    int (*NeuronCompilation_setPriority)(NeuronCompilation* compilation, int priority) = nullptr;
    int (*NeuronCompilation_setCaching)(NeuronCompilation* compilation, const char* cacheDir,
                                        const uint8_t* token) = nullptr;

    int (*NeuronExecution_create)(NeuronCompilation* compilation,
                                  NeuronExecution** execution) = nullptr;
    void (*NeuronExecution_free)(NeuronExecution* execution) = nullptr;
    int (*NeuronExecution_setInputFromMemory)(NeuronExecution* execution, uint32_t index,
                                              const NeuronOperandType* type,
                                              const NeuronMemory* memory, size_t offset,
                                              size_t length) = nullptr;
    int (*NeuronExecution_setOutputFromMemory)(NeuronExecution* execution, uint32_t index,
                                               const NeuronOperandType* type,
                                               const NeuronMemory* memory, size_t offset,
                                               size_t length) = nullptr;
    int (*NeuronExecution_compute)(NeuronExecution* execution) = nullptr;
};

// The names tried, in order, when no override is given.
const std::vector<std::string>& default_library_names();

// The table loaded from `library` (a name for the dynamic loader's search
// or a full path), or null with `why` set. Loaded once per path.
const NeuronAdapterApi* load_neuron_adapter(const std::string& library, std::string& why);

// The first of `libraries` that loads, with `loaded` naming it; null with
// "NeuronAdapter library not found (tried a, b, c)" when none does.
const NeuronAdapterApi* load_first_neuron_adapter(const std::vector<std::string>& libraries,
                                                  std::string& loaded, std::string& why);

// "NEURON_BAD_DATA (4)" for a result code.
std::string neuron_result_name(int code);

}  // namespace dwell::apu
