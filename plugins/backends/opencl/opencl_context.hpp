// The state the opencl plugin's files share: a probed device and the backend
// context, which owns its CL objects, the kernels made so far and the Q4_0
// weights prepared for the Adreno set.
//
// Thread-safety: a context is used by one thread at a time (the host
// serialises); devices are immutable after the probe.
#pragma once

#include <dwell/backend.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "cl_api.hpp"

struct dwell_backend_context {
    const dwell::opencl::ClApi* cl = nullptr;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;
    cl_program program = nullptr;
    std::map<std::string, cl_kernel> kernels;
    std::string last_error;
    std::string device_name;
    // Device time per op kind, from profiling events.
    std::map<dwell_op, std::pair<uint64_t, double>> times;
    // The Adreno-tuned set is built too (kernels_adreno.cl).
    bool adreno = false;
    const dwell_host_services* host = nullptr;  // told when weights are copied
    cl_device_id device = nullptr;
    // Q4_0 weights rearranged for the Adreno set, by (address, k, n).
    struct Prepared {
        cl_mem quants = nullptr, scales = nullptr, image = nullptr;
    };
    std::map<std::tuple<const void*, int64_t, int64_t>, Prepared> prepared;

    void drop(Prepared& p) const {
        for (cl_mem m : {p.image, p.quants, p.scales})
            if (m) cl->ReleaseMemObject(m);
    }

    dwell_backend_context() = default;
    dwell_backend_context(const dwell_backend_context&) = delete;
    dwell_backend_context& operator=(const dwell_backend_context&) = delete;
    ~dwell_backend_context() {
        if (cl == nullptr) return;
        for (auto& [key, p] : prepared) drop(p);
        for (auto& [name, k] : kernels) cl->ReleaseKernel(k);
        if (program) cl->ReleaseProgram(program);
        if (queue) cl->ReleaseCommandQueue(queue);
        if (context) cl->ReleaseContext(context);
    }
};

namespace dwell::opencl {

struct Device {
    cl_device_id id = nullptr;
    std::string name;  // "opencl0", ...
    std::string description;
    std::string hardware_id;
    std::string driver;
    dwell_device_kind kind = DWELL_DEVICE_GPU;
    uint64_t memory = 0;
    bool available = false;
    std::string why;  // when unavailable
};

}  // namespace dwell::opencl
