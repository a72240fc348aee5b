#include "cl_api.hpp"

#include <dlfcn.h>

#include <mutex>

#include "backend_plugin_kit.hpp"

namespace dwell::opencl {

namespace {

struct Loaded {
    ClApi api;
    bool ok = false;
    std::string why;
};

template <typename F>
bool resolve(void* lib, const char* name, F& slot, std::string& why) {
    return plugin_kit::resolve_symbol(lib, name, slot, why, "OpenCL");
}

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
    std::string& w = l.why;
    l.ok = resolve(lib, "clGetPlatformIDs", a.GetPlatformIDs, w) &&
           resolve(lib, "clGetPlatformInfo", a.GetPlatformInfo, w) &&
           resolve(lib, "clGetDeviceIDs", a.GetDeviceIDs, w) &&
           resolve(lib, "clGetDeviceInfo", a.GetDeviceInfo, w) &&
           resolve(lib, "clCreateContext", a.CreateContext, w) &&
           resolve(lib, "clReleaseContext", a.ReleaseContext, w) &&
           resolve(lib, "clCreateCommandQueue", a.CreateCommandQueue, w) &&
           resolve(lib, "clReleaseCommandQueue", a.ReleaseCommandQueue, w) &&
           resolve(lib, "clCreateProgramWithSource", a.CreateProgramWithSource, w) &&
           resolve(lib, "clCreateProgramWithBinary", a.CreateProgramWithBinary, w) &&
           resolve(lib, "clBuildProgram", a.BuildProgram, w) &&
           resolve(lib, "clGetProgramBuildInfo", a.GetProgramBuildInfo, w) &&
           resolve(lib, "clGetProgramInfo", a.GetProgramInfo, w) &&
           resolve(lib, "clReleaseProgram", a.ReleaseProgram, w) &&
           resolve(lib, "clCreateKernel", a.CreateKernel, w) &&
           resolve(lib, "clReleaseKernel", a.ReleaseKernel, w) &&
           resolve(lib, "clSetKernelArg", a.SetKernelArg, w) &&
           resolve(lib, "clCreateBuffer", a.CreateBuffer, w) &&
           resolve(lib, "clCreateImage", a.CreateImage, w) &&
           resolve(lib, "clReleaseMemObject", a.ReleaseMemObject, w) &&
           resolve(lib, "clEnqueueNDRangeKernel", a.EnqueueNDRangeKernel, w) &&
           resolve(lib, "clEnqueueMapBuffer", a.EnqueueMapBuffer, w) &&
           resolve(lib, "clEnqueueUnmapMemObject", a.EnqueueUnmapMemObject, w) &&
           resolve(lib, "clFinish", a.Finish, w) &&
           resolve(lib, "clGetEventProfilingInfo", a.GetEventProfilingInfo, w) &&
           resolve(lib, "clReleaseEvent", a.ReleaseEvent, w);
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
