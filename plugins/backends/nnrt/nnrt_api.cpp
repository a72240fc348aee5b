#include "nnrt_api.hpp"

#include <dlfcn.h>

#include "backend/backend_plugin_kit.hpp"
#include "backend/vendor_library.hpp"

namespace dwell::nnrt {

namespace {

using Loaded = plugin_kit::LoadedLibrary<NnrtApi>;

// dlopen of one library: `dir`/name, or name alone for the loader's search.
void* open_library(const std::string& dir, const char* name, std::string& why) {
    const std::string path = dir.empty() ? name : dir + "/" + name;
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char* e = ::dlerror();
        // "not found" only when it is absent; a library that is there but
        // fails to load says so.
        const std::string detail = e ? e : path;
        const bool absent = detail.find("No such file") != std::string::npos;
        why =
            std::string(name) + (absent ? " not found (" : " could not be loaded (") + detail + ")";
    }
    return lib;
}

Loaded load(const std::string& dir) {
    Loaded l;
    // The core first: the runtime library depends on it.
    void* core = open_library(dir, kCoreLibrary, l.why);
    if (core == nullptr) return l;
    void* runtime = open_library(dir, kRuntimeLibrary, l.why);
    if (runtime == nullptr) return l;
    NnrtApi& a = l.api;
    const plugin_kit::SymbolResolver rt(runtime, kRuntimeLibrary, l.why);
    const plugin_kit::SymbolResolver co(core, kCoreLibrary, l.why);
    l.ok = rt("OH_NNModel_Construct", a.OH_NNModel_Construct) &&
           rt("OH_NNModel_AddTensorToModel", a.OH_NNModel_AddTensorToModel) &&
           rt("OH_NNModel_SetTensorData", a.OH_NNModel_SetTensorData) &&
           rt("OH_NNModel_SetTensorQuantParams", a.OH_NNModel_SetTensorQuantParams) &&
           rt("OH_NNModel_SetTensorType", a.OH_NNModel_SetTensorType) &&
           rt("OH_NNModel_AddOperation", a.OH_NNModel_AddOperation) &&
           rt("OH_NNModel_SpecifyInputsAndOutputs", a.OH_NNModel_SpecifyInputsAndOutputs) &&
           rt("OH_NNModel_Finish", a.OH_NNModel_Finish) &&
           rt("OH_NNModel_Destroy", a.OH_NNModel_Destroy) &&
           rt("OH_NNQuantParam_Create", a.OH_NNQuantParam_Create) &&
           rt("OH_NNQuantParam_SetScales", a.OH_NNQuantParam_SetScales) &&
           rt("OH_NNQuantParam_SetZeroPoints", a.OH_NNQuantParam_SetZeroPoints) &&
           rt("OH_NNQuantParam_SetNumBits", a.OH_NNQuantParam_SetNumBits) &&
           rt("OH_NNQuantParam_Destroy", a.OH_NNQuantParam_Destroy) &&
           co("OH_NNTensorDesc_Create", a.OH_NNTensorDesc_Create) &&
           co("OH_NNTensorDesc_Destroy", a.OH_NNTensorDesc_Destroy) &&
           co("OH_NNTensorDesc_SetDataType", a.OH_NNTensorDesc_SetDataType) &&
           co("OH_NNTensorDesc_SetShape", a.OH_NNTensorDesc_SetShape) &&
           co("OH_NNTensorDesc_SetFormat", a.OH_NNTensorDesc_SetFormat) &&
           co("OH_NNTensorDesc_GetByteSize", a.OH_NNTensorDesc_GetByteSize) &&
           co("OH_NNCompilation_Construct", a.OH_NNCompilation_Construct) &&
           co("OH_NNCompilation_SetDevice", a.OH_NNCompilation_SetDevice) &&
           co("OH_NNCompilation_SetCache", a.OH_NNCompilation_SetCache) &&
           co("OH_NNCompilation_SetPerformanceMode", a.OH_NNCompilation_SetPerformanceMode) &&
           co("OH_NNCompilation_SetPriority", a.OH_NNCompilation_SetPriority) &&
           co("OH_NNCompilation_EnableFloat16", a.OH_NNCompilation_EnableFloat16) &&
           co("OH_NNCompilation_Build", a.OH_NNCompilation_Build) &&
           co("OH_NNCompilation_Destroy", a.OH_NNCompilation_Destroy) &&
           co("OH_NNExecutor_Construct", a.OH_NNExecutor_Construct) &&
           co("OH_NNExecutor_CreateInputTensorDesc", a.OH_NNExecutor_CreateInputTensorDesc) &&
           co("OH_NNExecutor_CreateOutputTensorDesc", a.OH_NNExecutor_CreateOutputTensorDesc) &&
           co("OH_NNExecutor_RunSync", a.OH_NNExecutor_RunSync) &&
           co("OH_NNExecutor_Destroy", a.OH_NNExecutor_Destroy) &&
           co("OH_NNTensor_Create", a.OH_NNTensor_Create) &&
           co("OH_NNTensor_GetDataBuffer", a.OH_NNTensor_GetDataBuffer) &&
           co("OH_NNTensor_Destroy", a.OH_NNTensor_Destroy) &&
           co("OH_NNDevice_GetAllDevicesID", a.OH_NNDevice_GetAllDevicesID) &&
           co("OH_NNDevice_GetName", a.OH_NNDevice_GetName) &&
           co("OH_NNDevice_GetType", a.OH_NNDevice_GetType);
    return l;
}

}  // namespace

const NnrtApi* load_nnrt(const std::string& dir, std::string& why) {
    // One load per directory for the process.
    return plugin_kit::load_once<NnrtApi>(dir, why, load);
}

std::string return_code_name(int32_t rc) {
    static const char* const names[] = {"OH_NN_SUCCESS",
                                        "OH_NN_FAILED",
                                        "OH_NN_INVALID_PARAMETER",
                                        "OH_NN_MEMORY_ERROR",
                                        "OH_NN_OPERATION_FORBIDDEN",
                                        "OH_NN_NULL_PTR",
                                        "OH_NN_INVALID_FILE",
                                        "OH_NN_UNAVALIDABLE_DEVICE",
                                        "OH_NN_INVALID_PATH",
                                        "OH_NN_TIMEOUT",
                                        "OH_NN_UNSUPPORTED",
                                        "OH_NN_CONNECTION_EXCEPTION",
                                        "OH_NN_SAVE_CACHE_EXCEPTION",
                                        "OH_NN_DYNAMIC_SHAPE",
                                        "OH_NN_UNAVAILABLE_DEVICE"};
    const std::string name =
        rc >= 0 && rc < static_cast<int32_t>(std::size(names)) ? names[rc] : "unknown code";
    return name + " (" + std::to_string(rc) + ")";
}

}  // namespace dwell::nnrt
