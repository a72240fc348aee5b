#include "cl_api.hpp"

#include <dlfcn.h>

#include <mutex>

#include "backend/backend_plugin_kit.hpp"

namespace dwell::opencl {

namespace {

struct Loaded {
    ClApi api;
    bool ok = false;
    std::string why;
};

Loaded load() {
    Loaded l;
    void* lib = nullptr;
    for (const char* name : {"libOpenCL.so.1", "libOpenCL.so"}) {
        lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (lib != nullptr) break;
    }
    if (lib == nullptr) {
        const char* e = ::dlerror();
        l.why = std::string("libOpenCL.so.1 not found") + (e ? std::string(": ") + e : "");
        return l;
    }
    ClApi& a = l.api;
    const plugin_kit::SymbolResolver resolve(lib, "OpenCL", l.why);
    l.ok =
        resolve("clGetPlatformIDs", a.GetPlatformIDs) &&
        resolve("clGetPlatformInfo", a.GetPlatformInfo) &&
        resolve("clGetDeviceIDs", a.GetDeviceIDs) && resolve("clGetDeviceInfo", a.GetDeviceInfo) &&
        resolve("clCreateContext", a.CreateContext) &&
        resolve("clReleaseContext", a.ReleaseContext) &&
        resolve("clCreateCommandQueue", a.CreateCommandQueue) &&
        resolve("clReleaseCommandQueue", a.ReleaseCommandQueue) &&
        resolve("clCreateProgramWithSource", a.CreateProgramWithSource) &&
        resolve("clCreateProgramWithBinary", a.CreateProgramWithBinary) &&
        resolve("clBuildProgram", a.BuildProgram) &&
        resolve("clGetProgramBuildInfo", a.GetProgramBuildInfo) &&
        resolve("clGetProgramInfo", a.GetProgramInfo) &&
        resolve("clReleaseProgram", a.ReleaseProgram) &&
        resolve("clCreateKernel", a.CreateKernel) && resolve("clReleaseKernel", a.ReleaseKernel) &&
        resolve("clSetKernelArg", a.SetKernelArg) && resolve("clCreateBuffer", a.CreateBuffer) &&
        resolve("clCreateImage", a.CreateImage) &&
        resolve("clReleaseMemObject", a.ReleaseMemObject) &&
        resolve("clEnqueueNDRangeKernel", a.EnqueueNDRangeKernel) &&
        resolve("clEnqueueMapBuffer", a.EnqueueMapBuffer) &&
        resolve("clEnqueueUnmapMemObject", a.EnqueueUnmapMemObject) &&
        resolve("clFinish", a.Finish) &&
        resolve("clGetEventProfilingInfo", a.GetEventProfilingInfo) &&
        resolve("clReleaseEvent", a.ReleaseEvent);
    return l;
}

}  // namespace

const ClApi* load_cl_api(std::string& why) {
    static const Loaded loaded = load();
    why = loaded.why;
    return loaded.ok ? &loaded.api : nullptr;
}

std::string cl_error_name(cl_int err) {
    const char* n = "an OpenCL error";
    switch (err) {
        case CL_DEVICE_NOT_FOUND:
            n = "CL_DEVICE_NOT_FOUND";
            break;
        case CL_DEVICE_NOT_AVAILABLE:
            n = "CL_DEVICE_NOT_AVAILABLE";
            break;
        case CL_MEM_OBJECT_ALLOCATION_FAILURE:
            n = "CL_MEM_OBJECT_ALLOCATION_FAILURE";
            break;
        case CL_OUT_OF_RESOURCES:
            n = "CL_OUT_OF_RESOURCES";
            break;
        case CL_OUT_OF_HOST_MEMORY:
            n = "CL_OUT_OF_HOST_MEMORY";
            break;
        case CL_BUILD_PROGRAM_FAILURE:
            n = "CL_BUILD_PROGRAM_FAILURE";
            break;
        case CL_INVALID_VALUE:
            n = "CL_INVALID_VALUE";
            break;
        case CL_INVALID_BUFFER_SIZE:
            n = "CL_INVALID_BUFFER_SIZE";
            break;
        case CL_INVALID_HOST_PTR:
            n = "CL_INVALID_HOST_PTR";
            break;
        case CL_INVALID_KERNEL_ARGS:
            n = "CL_INVALID_KERNEL_ARGS";
            break;
        case CL_INVALID_WORK_GROUP_SIZE:
            n = "CL_INVALID_WORK_GROUP_SIZE";
            break;
        case CL_INVALID_BINARY:
            n = "CL_INVALID_BINARY";
            break;
        case -1001:
            n = "CL_PLATFORM_NOT_FOUND_KHR (no OpenCL platform installed)";
            break;
        default:
            break;
    }
    return std::string(n) + " (" + std::to_string(err) + ")";
}

}  // namespace dwell::opencl
