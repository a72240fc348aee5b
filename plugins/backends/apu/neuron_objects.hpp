// Owning handles for NeuronAdapter objects, the error every failed Neuron
// call turns into, and the fd-backed shared memory the APU reads and
// writes.
//
// Thread-safety: none of these objects is shared between threads (a
// context is used by one thread at a time). Ownership: each handle frees
// its object with the library's own *_free call; an FdBuffer owns its
// memfd and mapping.
#pragma once

#include <dwell/status.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "neuron_adapter_api.hpp"

namespace dwell::apu {

// A failure to report through the ABI: its status and one-line message.
class ApuError : public std::runtime_error {
public:
    ApuError(dwell_status status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    dwell_status status() const { return status_; }

private:
    dwell_status status_;
};

// Throws "<call> failed with NEURON_... (n)" unless rc is NEURON_NO_ERROR.
inline void check_neuron(int rc, const char* call) {
    if (rc == NEURON_NO_ERROR) return;
    throw ApuError(rc == NEURON_OUT_OF_MEMORY ? DWELL_ERR_OUT_OF_MEMORY : DWELL_ERR_INTERNAL,
                   std::string(call) + " failed with " + neuron_result_name(rc));
}

template <typename T>
using NeuronHandle = std::unique_ptr<T, void (*)(T*)>;

using ModelHandle = NeuronHandle<NeuronModel>;
using CompilationHandle = NeuronHandle<NeuronCompilation>;
using ExecutionHandle = NeuronHandle<NeuronExecution>;
using MemoryHandle = NeuronHandle<NeuronMemory>;

inline ModelHandle make_model(const NeuronAdapterApi& api) {
    NeuronModel* m = nullptr;
    check_neuron(api.NeuronModel_create(&m), "NeuronModel_create");
    return {m, api.NeuronModel_free};
}

inline CompilationHandle make_compilation(const NeuronAdapterApi& api, NeuronModel* model) {
    NeuronCompilation* c = nullptr;
    check_neuron(api.NeuronCompilation_create(model, &c), "NeuronCompilation_create");
    return {c, api.NeuronCompilation_free};
}

inline ExecutionHandle make_execution(const NeuronAdapterApi& api, NeuronCompilation* c) {
    NeuronExecution* e = nullptr;
    check_neuron(api.NeuronExecution_create(c, &e), "NeuronExecution_create");
    return {e, api.NeuronExecution_free};
}

// Anonymous shared memory (memfd), mapped read-write into this process
// once for its whole life, so the APU and the host see the same pages.
class FdBuffer {
public:
    FdBuffer(size_t bytes, const char* name);
    ~FdBuffer();
    FdBuffer(const FdBuffer&) = delete;
    FdBuffer& operator=(const FdBuffer&) = delete;

    uint8_t* data() const { return data_; }
    size_t size() const { return bytes_; }
    int fd() const { return fd_; }

private:
    size_t bytes_;
    int fd_ = -1;
    uint8_t* data_ = nullptr;
};

// The NeuronMemory over a whole FdBuffer (NeuronMemory_createFromFd).
MemoryHandle make_memory(const NeuronAdapterApi& api, const FdBuffer& buffer);

}  // namespace dwell::apu
