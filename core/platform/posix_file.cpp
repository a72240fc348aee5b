#include "dwell/core/platform/posix_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <system_error>

#include "dwell/core/base/error.hpp"

namespace dwell {

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& o) noexcept {
    if (this != &o) {
        reset();
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}

int FileDescriptor::close() {
    return ::close(std::exchange(fd_, -1));
}

void FileDescriptor::reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

MappedRegion& MappedRegion::operator=(MappedRegion&& o) noexcept {
    if (this != &o) {
        reset();
        addr_ = std::exchange(o.addr_, nullptr);
        size_ = std::exchange(o.size_, 0);
    }
    return *this;
}

void MappedRegion::reset() {
    if (addr_ != nullptr) ::munmap(addr_, size_);
    addr_ = nullptr;
    size_ = 0;
}

void throw_io(const std::filesystem::path& path, const std::string& what, int err) {
    throw Error(DWELL_ERR_IO,
                path.string() + ": " + what + ": " + std::generic_category().message(err));
}

MappedRegion map_anonymous(const std::filesystem::path& path, const std::string& what,
                           uint64_t size) {
    if (size > std::numeric_limits<size_t>::max()) {
        throw Error(DWELL_ERR_OUT_OF_MEMORY, path.string() + ": " + what + ": " +
                                                 std::to_string(size) +
                                                 " bytes do not fit in the address space");
    }
    void* addr = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr == MAP_FAILED) {
        throw Error(DWELL_ERR_OUT_OF_MEMORY,
                    path.string() + ": " + what + ": cannot allocate " + std::to_string(size) +
                        " bytes: " + std::generic_category().message(errno));
    }
    return MappedRegion(addr, static_cast<size_t>(size));
}

}  // namespace dwell
