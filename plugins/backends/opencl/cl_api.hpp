// The OpenCL entry points the opencl plugin uses, loaded with dlopen at probe
// time so the plugin loads (and reports "unavailable") on devices without an
// OpenCL ICD loader, and no OpenCL library is a link-time dependency.
//
// Thread-safety: load() once (the plugin guards it); the table is then
// read-only. Ownership: the library stays loaded until the process ends,
// since driver threads may outlive any one context.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <string>

namespace dwell::opencl {

struct ClApi {
    decltype(&::clGetPlatformIDs) GetPlatformIDs = nullptr;
    decltype(&::clGetPlatformInfo) GetPlatformInfo = nullptr;
    decltype(&::clGetDeviceIDs) GetDeviceIDs = nullptr;
    decltype(&::clGetDeviceInfo) GetDeviceInfo = nullptr;
    decltype(&::clCreateContext) CreateContext = nullptr;
    decltype(&::clReleaseContext) ReleaseContext = nullptr;
    decltype(&::clCreateCommandQueue) CreateCommandQueue = nullptr;
    decltype(&::clReleaseCommandQueue) ReleaseCommandQueue = nullptr;
    decltype(&::clCreateProgramWithSource) CreateProgramWithSource = nullptr;
    decltype(&::clCreateProgramWithBinary) CreateProgramWithBinary = nullptr;
    decltype(&::clBuildProgram) BuildProgram = nullptr;
    decltype(&::clGetProgramBuildInfo) GetProgramBuildInfo = nullptr;
    decltype(&::clGetProgramInfo) GetProgramInfo = nullptr;
    decltype(&::clReleaseProgram) ReleaseProgram = nullptr;
    decltype(&::clCreateKernel) CreateKernel = nullptr;
    decltype(&::clReleaseKernel) ReleaseKernel = nullptr;
    decltype(&::clSetKernelArg) SetKernelArg = nullptr;
    decltype(&::clCreateBuffer) CreateBuffer = nullptr;
    decltype(&::clCreateImage) CreateImage = nullptr;
    decltype(&::clReleaseMemObject) ReleaseMemObject = nullptr;
    decltype(&::clEnqueueNDRangeKernel) EnqueueNDRangeKernel = nullptr;
    decltype(&::clEnqueueMapBuffer) EnqueueMapBuffer = nullptr;
    decltype(&::clEnqueueUnmapMemObject) EnqueueUnmapMemObject = nullptr;
    decltype(&::clFinish) Finish = nullptr;
    decltype(&::clGetEventProfilingInfo) GetEventProfilingInfo = nullptr;
    decltype(&::clReleaseEvent) ReleaseEvent = nullptr;
};

// The loaded table, or null with `why` set ("libOpenCL.so.1 not found: ...").
const ClApi* load_cl_api(std::string& why);

// "CL_OUT_OF_RESOURCES (-5)".
std::string cl_error_name(cl_int err);

}  // namespace dwell::opencl
