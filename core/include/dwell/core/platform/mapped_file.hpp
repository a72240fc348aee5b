// A model file mapped read-only, guarded against the file changing under
// the mapping. Truncating a mapped file (or rewriting it in place, as
// `cp new.gguf served.gguf` does: it truncates first) turns every read of a
// page past the new end into SIGBUS, which would kill the process.
//
// The guard: while any MappedFile lives, a SIGBUS handler is installed. A
// fault inside a guarded mapping replaces the whole mapping with zero pages
// (an anonymous MAP_FIXED mapping at the same address), marks it faulted and
// returns, so the faulting read, on whatever thread it ran, finishes on
// zeros instead of killing the process. Every step then asks problem()
// before and after it runs; a faulted mapping, or (for weights used in
// place) a file whose size or modification time no longer match what was
// mapped, fails the step with one line naming the file. A SIGBUS outside
// every guarded mapping goes to the handler that was there before (or the
// default action, which ends the process as it would have).
//
// `[memory] weights = "load"` reads every weight with pread into memory
// the pool owns, so once loaded a model never reads its weights from the
// file again: changes to the file after loading do not matter to it (only
// a read of the mapping that faults, e.g. of metadata, would still fail a
// step, never the process).
//
// Thread-safety: data() is readable from any thread; problem() may be
// called from any thread. The guard table is process-wide by necessity (a
// signal handler has no other way to find it) and lock-free.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace dwell {

class MappedFile {
public:
    MappedFile() = default;
    // The whole of a non-empty regular file. Throws DWELL_ERR_IO naming the
    // file (missing, not a regular file, empty, ...).
    explicit MappedFile(const std::filesystem::path& path);
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
    size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

    // Whether a read of the mapping faulted (the file had shrunk under it);
    // its bytes are zeros since.
    bool faulted() const;
    // "" while the mapping can be trusted; otherwise one line naming the
    // file and what happened. `check_file`: also compare the file's size
    // and modification time with what was mapped (for weights read in
    // place; costs one fstat).
    std::string problem(bool check_file) const;

private:
    void reset() noexcept;

    std::filesystem::path path_;
    void* addr_ = nullptr;
    size_t size_ = 0;
    int fd_ = -1;    // kept open for fstat: the mapped inode, whatever the path names now
    int slot_ = -1;  // in the guard table; -1: unguarded (table full)
    int64_t mtime_ns_ = 0;
};

}  // namespace dwell
