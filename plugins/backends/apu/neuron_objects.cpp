#include "neuron_objects.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dwell::apu {

FdBuffer::FdBuffer(size_t bytes, const char* name) : bytes_(bytes) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0)
        throw ApuError(DWELL_ERR_OUT_OF_MEMORY,
                       std::string("memfd_create failed: ") + std::strerror(errno));
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
        const int e = errno;
        ::close(fd_);
        throw ApuError(DWELL_ERR_OUT_OF_MEMORY, "sizing a " + std::to_string(bytes) +
                                                    "-byte memfd failed: " + std::strerror(e));
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd_);
        throw ApuError(DWELL_ERR_OUT_OF_MEMORY, "mapping a " + std::to_string(bytes) +
                                                    "-byte memfd failed: " + std::strerror(e));
    }
    data_ = static_cast<uint8_t*>(p);
}

FdBuffer::~FdBuffer() {
    ::munmap(data_, bytes_);
    ::close(fd_);
}

MemoryHandle make_memory(const NeuronAdapterApi& api, const FdBuffer& buffer) {
    NeuronMemory* m = nullptr;
    check_neuron(
        api.NeuronMemory_createFromFd(buffer.size(), PROT_READ | PROT_WRITE, buffer.fd(), 0, &m),
        "NeuronMemory_createFromFd");
    return {m, api.NeuronMemory_free};
}

}  // namespace dwell::apu
