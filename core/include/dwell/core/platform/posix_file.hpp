// RAII for the POSIX file resources the model readers and writers use: a
// file descriptor, an anonymous memory mapping, and the
// one-line I/O error that names the file.
//
// Thread-safety: plain owning values; one owner each.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

namespace dwell {

class FileDescriptor {
public:
    FileDescriptor() = default;
    explicit FileDescriptor(int fd) : fd_(fd) {}
    FileDescriptor(FileDescriptor&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    FileDescriptor& operator=(FileDescriptor&& o) noexcept;
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    ~FileDescriptor() { reset(); }

    int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }
    // Closes now and returns close()'s result, which may carry the error of
    // a buffered write.
    int close();

private:
    void reset();
    int fd_ = -1;
};

class MappedRegion {
public:
    MappedRegion() = default;
    MappedRegion(void* addr, size_t size) : addr_(addr), size_(size) {}
    MappedRegion(MappedRegion&& o) noexcept
        : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    MappedRegion& operator=(MappedRegion&& o) noexcept;
    MappedRegion(const MappedRegion&) = delete;
    MappedRegion& operator=(const MappedRegion&) = delete;
    ~MappedRegion() { reset(); }

    uint8_t* data() const { return static_cast<uint8_t*>(addr_); }
    size_t size() const { return size_; }

private:
    void reset();
    void* addr_ = nullptr;
    size_t size_ = 0;
};

// "<path>: <what>: <strerror(err)>" as dwell::Error(DWELL_ERR_IO).
[[noreturn]] void throw_io(const std::filesystem::path& path, const std::string& what, int err);

// Read-only file mappings, guarded against the file changing: MappedFile
// (dwell/core/mapped_file.hpp).

// Zero-filled anonymous memory (pages committed only when touched); an
// impossible size fails with DWELL_ERR_OUT_OF_MEMORY naming `path` and `what`.
MappedRegion map_anonymous(const std::filesystem::path& path, const std::string& what,
                           uint64_t size);

}  // namespace dwell
