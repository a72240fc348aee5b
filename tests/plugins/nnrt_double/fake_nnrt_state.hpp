// The NNRt test double's objects and shared state. The double is two
// libraries, as on a device: libneural_network_core.so (this state, tensor
// descriptions, compilations, executors, tensors, devices, the reference
// kernels) and libneural_network_runtime.so (models and quantization
// parameters), which links to the core and reaches this state through
// fake_nnrt_state(). Enum values are those the plugin declares from
// OpenHarmony's documentation (plugins/backends/nnrt/nnrt_api.hpp), written
// again here so the double checks the plugin rather than sharing its header.
//
// Thread-safety: every entry point locks State::mutex. Ownership: the
// double owns every object it hands out until the matching *_Destroy; what
// is still alive is reported by fake_nnrt_violations().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fault_schedule.hpp"
#include "violation_log.hpp"

#define FAKE_NNRT_EXPORT extern "C" __attribute__((visibility("default")))

namespace fake_nnrt {

// OH_NN_ReturnCode
enum : int32_t {
    kSuccess = 0,
    kFailed = 1,
    kInvalidParameter = 2,
    kOperationForbidden = 4,
    kNullPtr = 5,
    kInvalidPath = 8,
    kUnsupported = 10,
};
// OH_NN_DataType
enum : int32_t {
    kUnknown = 0,
    kBool = 1,
    kInt8 = 2,
    kInt16 = 3,
    kInt32 = 4,
    kInt64 = 5,
    kUint8 = 6,
    kUint16 = 7,
    kUint32 = 8,
    kUint64 = 9,
    kFloat16 = 10,
    kFloat32 = 11,
    kFloat64 = 12,
};
// OH_NN_OperationType / OH_NN_TensorType values the double knows.
constexpr int32_t kOpFullConnection = 15;
constexpr int32_t kTensorData = 0;
constexpr int32_t kFullConnectionActivationType = 32;
// OH_NN_DeviceType
constexpr int32_t kDeviceCpu = 1;
constexpr int32_t kDeviceAccelerator = 3;

// OH_NN_UInt32Array
struct UInt32Array {
    uint32_t* data;
    uint32_t size;
};

inline size_t element_size(int32_t dtype) {
    switch (dtype) {
        case kBool:
        case kInt8:
        case kUint8:
            return 1;
        case kInt16:
        case kUint16:
        case kFloat16:
            return 2;
        case kInt32:
        case kUint32:
        case kFloat32:
            return 4;
        case kInt64:
        case kUint64:
        case kFloat64:
            return 8;
        default:
            return 0;
    }
}

struct Desc {
    int32_t dtype = kUnknown;
    std::vector<int32_t> shape;
    bool shape_set = false;
    int32_t format = 0;

    size_t elements() const {
        size_t n = 1;
        for (int32_t d : shape) n *= d > 0 ? static_cast<size_t>(d) : 0;
        return n;
    }
    size_t bytes() const { return elements() * element_size(dtype); }
    // "FLOAT16[32, 64]", for messages.
    std::string str() const {
        static const char* const names[] = {"UNKNOWN", "BOOL",    "INT8",   "INT16",  "INT32",
                                            "INT64",   "UINT8",   "UINT16", "UINT32", "UINT64",
                                            "FLOAT16", "FLOAT32", "FLOAT64"};
        std::string s = dtype >= 0 && dtype <= 12 ? names[dtype] : "?";
        s += "[";
        for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
        return s + "]";
    }
};

struct ModelTensor {
    Desc desc;
    std::vector<uint8_t> data;
    bool has_data = false;
    int32_t type = kTensorData;  // OH_NN_TensorType
    std::vector<double> scales;  // quantization, per channel (axis 0) or one
    std::vector<int32_t> zero_points;
    std::vector<uint32_t> num_bits;
    bool produced = false;  // some operation writes it
};

struct Operation {
    int32_t type = 0;
    std::vector<uint32_t> params, inputs, outputs;
};

}  // namespace fake_nnrt

// The opaque handles of the C API, defined by the double.
struct OH_NNModel {
    std::vector<fake_nnrt::ModelTensor> tensors;
    std::vector<fake_nnrt::Operation> ops;
    std::vector<uint32_t> inputs, outputs;
    bool io_set = false;
    bool finished = false;
};
struct NN_QuantParam {
    std::vector<double> scales;
    std::vector<int32_t> zero_points;
    std::vector<uint32_t> num_bits;
};
struct NN_TensorDesc {
    fake_nnrt::Desc desc;
};
struct OH_NNCompilation {
    std::shared_ptr<const OH_NNModel> model;  // a copy: the model may go first
    size_t device = 0;
    bool device_set = false;
    std::string cache_path;
    uint32_t cache_version = 0;
    int32_t performance = 0, priority = 0;
    bool float16 = false;
    bool built = false;
};
struct OH_NNExecutor {
    std::shared_ptr<const OH_NNModel> model;
    size_t device = 0;
    bool float16 = false;
};
struct NN_Tensor {
    fake_nnrt::Desc desc;
    size_t device = 0;
    std::vector<uint8_t> data;
};

namespace fake_nnrt {

struct State {
    std::mutex mutex;
    std::set<const void*> models, quant_params, descs, compilations, executors, tensors;
    fake_vendor::ViolationLog violations;
    long builds = 0, cache_hits = 0, runs = 0;
    // "build:N" (the Nth Build fails) or "run:N" (the Nth RunSync fails).
    enum : size_t { kBuildCalls, kRunCalls };
    fake_vendor::FaultSchedule<2> faults{"DWELL_FAKE_NNRT_FAIL"};
    std::string last_build;  // "device=9 performance=3 ..."

    void violate(const std::string& what) { violations.add(what); }
};

}  // namespace fake_nnrt

FAKE_NNRT_EXPORT fake_nnrt::State* fake_nnrt_state();
