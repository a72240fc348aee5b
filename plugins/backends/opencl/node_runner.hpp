// Running graph nodes with the OpenCL kernels: check() says whether the
// kernels take a node; run_node() wraps the host memory of the node's
// tensors in CL_MEM_USE_HOST_PTR buffers, launches its kernels, maps back
// what they wrote so the next node reads coherent host memory, and adds the
// kernels' device time to the context's op times.
//
// Thread-safety: run_node uses the context it is given (one thread at a
// time); check is pure.
#pragma once

#include <dwell/backend.h>

#include <cstdint>
#include <string>
#include <vector>

#include "opencl_context.hpp"

namespace dwell::opencl {

// Why node `id` cannot run here, or "" when it can.
std::string check(const dwell_graph* g, int32_t id);

// Runs node `id`, which check() accepted. `written` flags the tensors some
// node of g writes (plugin_kit::written_tensors): only the others may keep a
// prepared device copy. Throws std::runtime_error when OpenCL fails.
void run_node(dwell_backend_context& c, const dwell_graph* g, int32_t id,
              const std::vector<bool>& written);

}  // namespace dwell::opencl
