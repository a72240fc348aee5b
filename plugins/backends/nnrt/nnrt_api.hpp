// The HarmonyOS Neural Network Runtime (NNRt) C API subset the nnrt plugin
// calls, declared here from OpenHarmony's public API reference
// (docs: application-dev/reference/native-apis/_neural_network_runtime.md,
// API version 11: neural_network_core.h and neural_network_runtime.h). No
// vendor header is copied; names, signatures and enum values follow that
// documentation so the same code runs against the real libraries.
//
// The two libraries are loaded with dlopen at probe time, nothing links to
// them: libneural_network_core.so (compilation, tensor descriptions,
// tensors, executors, devices) and libneural_network_runtime.so (model
// construction and quantization parameters; it depends on the core).
//
// Thread-safety: NNRt's documentation says its APIs do not support calls
// from several threads at once on one object; the plugin uses each object
// from one thread at a time (the host serialises a context's calls). The
// loaded table is read-only after load. Ownership: the libraries stay
// loaded for the life of the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dwell::nnrt {

// Opaque handles (the libraries own them; each has its *_Destroy).
struct OH_NNModel;
struct OH_NNCompilation;
struct OH_NNExecutor;
struct NN_QuantParam;
struct NN_TensorDesc;
struct NN_Tensor;

// OH_NN_ReturnCode.
enum OH_NN_ReturnCode : int32_t {
    OH_NN_SUCCESS = 0,
    OH_NN_FAILED = 1,
    OH_NN_INVALID_PARAMETER = 2,
    OH_NN_MEMORY_ERROR = 3,
    OH_NN_OPERATION_FORBIDDEN = 4,
    OH_NN_NULL_PTR = 5,
    OH_NN_INVALID_FILE = 6,
    OH_NN_UNAVALIDABLE_DEVICE = 7,  // sic: the documented spelling
    OH_NN_INVALID_PATH = 8,
    OH_NN_TIMEOUT = 9,
    OH_NN_UNSUPPORTED = 10,
    OH_NN_CONNECTION_EXCEPTION = 11,
    OH_NN_SAVE_CACHE_EXCEPTION = 12,
    OH_NN_DYNAMIC_SHAPE = 13,
    OH_NN_UNAVAILABLE_DEVICE = 14,
};

enum OH_NN_PerformanceMode : int32_t {
    OH_NN_PERFORMANCE_NONE = 0,
    OH_NN_PERFORMANCE_LOW = 1,
    OH_NN_PERFORMANCE_MEDIUM = 2,
    OH_NN_PERFORMANCE_HIGH = 3,
    OH_NN_PERFORMANCE_EXTREME = 4,
};

enum OH_NN_Priority : int32_t {
    OH_NN_PRIORITY_NONE = 0,
    OH_NN_PRIORITY_LOW = 1,
    OH_NN_PRIORITY_MEDIUM = 2,
    OH_NN_PRIORITY_HIGH = 3,
};

// OH_NN_FuseType is documented as an int8_t enum: the value of an
// activation-type parameter tensor (OH_NN_INT8).
enum OH_NN_FuseType : int8_t {
    OH_NN_FUSED_NONE = 0,
    OH_NN_FUSED_RELU = 1,
    OH_NN_FUSED_RELU6 = 2,
};

enum OH_NN_Format : int32_t {
    OH_NN_FORMAT_NONE = 0,
    OH_NN_FORMAT_NCHW = 1,
    OH_NN_FORMAT_NHWC = 2,
    OH_NN_FORMAT_ND = 3,  // API 11
};

enum OH_NN_DeviceType : int32_t {
    OH_NN_OTHERS = 0,
    OH_NN_CPU = 1,
    OH_NN_GPU = 2,
    OH_NN_ACCELERATOR = 3,
};

enum OH_NN_DataType : int32_t {
    OH_NN_UNKNOWN = 0,
    OH_NN_BOOL = 1,
    OH_NN_INT8 = 2,
    OH_NN_INT16 = 3,
    OH_NN_INT32 = 4,
    OH_NN_INT64 = 5,
    OH_NN_UINT8 = 6,
    OH_NN_UINT16 = 7,
    OH_NN_UINT32 = 8,
    OH_NN_UINT64 = 9,
    OH_NN_FLOAT16 = 10,
    OH_NN_FLOAT32 = 11,
    OH_NN_FLOAT64 = 12,
};

// The operation types the plugin lowers to (the full list is longer).
enum OH_NN_OperationType : int32_t {
    OH_NN_OPS_ADD = 1,
    OH_NN_OPS_FULL_CONNECTION = 15,
    OH_NN_OPS_MATMUL = 19,
    OH_NN_OPS_MUL = 22,
};

// OH_NN_TensorType: OH_NN_TENSOR for data, one value per operation
// parameter otherwise (only the ones used here).
enum OH_NN_TensorType : int32_t {
    OH_NN_TENSOR = 0,
    OH_NN_ADD_ACTIVATIONTYPE = 1,
    OH_NN_FULL_CONNECTION_AXIS = 31,
    OH_NN_FULL_CONNECTION_ACTIVATIONTYPE = 32,
    OH_NN_MATMUL_TRANSPOSE_A = 33,
    OH_NN_MATMUL_TRANSPOSE_B = 34,
    OH_NN_MATMUL_ACTIVATION_TYPE = 35,
    OH_NN_MUL_ACTIVATION_TYPE = 41,
};

struct OH_NN_UInt32Array {
    uint32_t* data;
    uint32_t size;
};

// The function table, one slot per documented function used.
struct NnrtApi {
    // libneural_network_runtime.so: models and quantization parameters.
    OH_NNModel* (*OH_NNModel_Construct)() = nullptr;
    OH_NN_ReturnCode (*OH_NNModel_AddTensorToModel)(OH_NNModel*, const NN_TensorDesc*) = nullptr;
    OH_NN_ReturnCode (*OH_NNModel_SetTensorData)(OH_NNModel*, uint32_t index, const void* data,
                                                 size_t length) = nullptr;
    OH_NN_ReturnCode (*OH_NNModel_SetTensorQuantParams)(OH_NNModel*, uint32_t index,
                                                        NN_QuantParam*) = nullptr;
    OH_NN_ReturnCode (*OH_NNModel_SetTensorType)(OH_NNModel*, uint32_t index,
                                                 OH_NN_TensorType) = nullptr;
    OH_NN_ReturnCode (*OH_NNModel_AddOperation)(OH_NNModel*, OH_NN_OperationType,
                                                const OH_NN_UInt32Array* params,
                                                const OH_NN_UInt32Array* inputs,
                                                const OH_NN_UInt32Array* outputs) = nullptr;
    OH_NN_ReturnCode (*OH_NNModel_SpecifyInputsAndOutputs)(
        OH_NNModel*, const OH_NN_UInt32Array* inputs, const OH_NN_UInt32Array* outputs) = nullptr;
    OH_NN_ReturnCode (*OH_NNModel_Finish)(OH_NNModel*) = nullptr;
    void (*OH_NNModel_Destroy)(OH_NNModel**) = nullptr;
    NN_QuantParam* (*OH_NNQuantParam_Create)() = nullptr;
    OH_NN_ReturnCode (*OH_NNQuantParam_SetScales)(NN_QuantParam*, const double* scales,
                                                  size_t count) = nullptr;
    OH_NN_ReturnCode (*OH_NNQuantParam_SetZeroPoints)(NN_QuantParam*, const int32_t* zero_points,
                                                      size_t count) = nullptr;
    OH_NN_ReturnCode (*OH_NNQuantParam_SetNumBits)(NN_QuantParam*, const uint32_t* num_bits,
                                                   size_t count) = nullptr;
    OH_NN_ReturnCode (*OH_NNQuantParam_Destroy)(NN_QuantParam**) = nullptr;

    // libneural_network_core.so: everything else.
    NN_TensorDesc* (*OH_NNTensorDesc_Create)() = nullptr;
    OH_NN_ReturnCode (*OH_NNTensorDesc_Destroy)(NN_TensorDesc**) = nullptr;
    OH_NN_ReturnCode (*OH_NNTensorDesc_SetDataType)(NN_TensorDesc*, OH_NN_DataType) = nullptr;
    OH_NN_ReturnCode (*OH_NNTensorDesc_SetShape)(NN_TensorDesc*, const int32_t* shape,
                                                 size_t length) = nullptr;
    OH_NN_ReturnCode (*OH_NNTensorDesc_SetFormat)(NN_TensorDesc*, OH_NN_Format) = nullptr;
    OH_NN_ReturnCode (*OH_NNTensorDesc_GetByteSize)(const NN_TensorDesc*, size_t*) = nullptr;
    OH_NNCompilation* (*OH_NNCompilation_Construct)(const OH_NNModel*) = nullptr;
    OH_NN_ReturnCode (*OH_NNCompilation_SetDevice)(OH_NNCompilation*, size_t device_id) = nullptr;
    OH_NN_ReturnCode (*OH_NNCompilation_SetCache)(OH_NNCompilation*, const char* path,
                                                  uint32_t version) = nullptr;
    OH_NN_ReturnCode (*OH_NNCompilation_SetPerformanceMode)(OH_NNCompilation*,
                                                            OH_NN_PerformanceMode) = nullptr;
    OH_NN_ReturnCode (*OH_NNCompilation_SetPriority)(OH_NNCompilation*, OH_NN_Priority) = nullptr;
    OH_NN_ReturnCode (*OH_NNCompilation_EnableFloat16)(OH_NNCompilation*, bool) = nullptr;
    OH_NN_ReturnCode (*OH_NNCompilation_Build)(OH_NNCompilation*) = nullptr;
    void (*OH_NNCompilation_Destroy)(OH_NNCompilation**) = nullptr;
    OH_NNExecutor* (*OH_NNExecutor_Construct)(OH_NNCompilation*) = nullptr;
    NN_TensorDesc* (*OH_NNExecutor_CreateInputTensorDesc)(const OH_NNExecutor*,
                                                          size_t index) = nullptr;
    NN_TensorDesc* (*OH_NNExecutor_CreateOutputTensorDesc)(const OH_NNExecutor*,
                                                           size_t index) = nullptr;
    OH_NN_ReturnCode (*OH_NNExecutor_RunSync)(OH_NNExecutor*, NN_Tensor* inputs[], size_t n_in,
                                              NN_Tensor* outputs[], size_t n_out) = nullptr;
    void (*OH_NNExecutor_Destroy)(OH_NNExecutor**) = nullptr;
    NN_Tensor* (*OH_NNTensor_Create)(size_t device_id, NN_TensorDesc*) = nullptr;
    void* (*OH_NNTensor_GetDataBuffer)(const NN_Tensor*) = nullptr;
    OH_NN_ReturnCode (*OH_NNTensor_Destroy)(NN_Tensor**) = nullptr;
    OH_NN_ReturnCode (*OH_NNDevice_GetAllDevicesID)(const size_t** ids, uint32_t* count) = nullptr;
    OH_NN_ReturnCode (*OH_NNDevice_GetName)(size_t id, const char** name) = nullptr;
    OH_NN_ReturnCode (*OH_NNDevice_GetType)(size_t id, OH_NN_DeviceType* type) = nullptr;
};

constexpr const char* kCoreLibrary = "libneural_network_core.so";
constexpr const char* kRuntimeLibrary = "libneural_network_runtime.so";

// The loaded table, from `dir` (empty: the dynamic loader's own search, as
// on a device), or null with `why` set ("libneural_network_core.so not
// found (...)").
const NnrtApi* load_nnrt(const std::string& dir, std::string& why);

// "OH_NN_INVALID_PARAMETER (2)" for messages.
std::string return_code_name(int32_t rc);

}  // namespace dwell::nnrt
