// Which pages of a read-only file mapping this process reads between two
// points, measured by the kernel rather than by the code that reads them.
//
// forget() drops this process's page-table entries for the range
// (madvise MADV_DONTNEED) and the file's pages from the page cache
// (posix_fadvise POSIX_FADV_DONTNEED), and the range is marked MADV_RANDOM
// (no read-ahead on faults). From then on every first access to a page
// faults and reads that page alone; the kernel's fault-around maps neighbours
// only when they are already cached, which after forget() means only pages
// that were themselves read. So after the work, present() (the present bits
// of /proc/self/pagemap) is exactly the set of pages read, and cached()
// (mincore) must agree.
//
// Needs a file on a filesystem whose page cache can be dropped (not tmpfs).
// Linux only.
//
// Thread-safety: none; call it while no other thread touches the range.
// Ownership: borrows the mapping, which must outlive the object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace dwell::bench {

// This machine cannot take the measurement (no pagemap, or a page cache
// that cannot be dropped); not a fault of the code measured.
class MeasurementUnavailable : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A file descriptor, closed with its owner.
class OwnedFd {
public:
    explicit OwnedFd(int fd = -1) : fd_(fd) {}
    ~OwnedFd();
    OwnedFd(const OwnedFd&) = delete;
    OwnedFd& operator=(const OwnedFd&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

class TouchedFilePages {
public:
    // [begin, begin + bytes) lies in a mapping of `file`; it is widened to
    // whole pages. Throws std::runtime_error naming what cannot be opened
    // (MeasurementUnavailable for /proc/self/pagemap).
    TouchedFilePages(const void* begin, size_t bytes, const std::filesystem::path& file);
    TouchedFilePages(const TouchedFilePages&) = delete;
    TouchedFilePages& operator=(const TouchedFilePages&) = delete;

    size_t page_size() const { return page_; }
    uintptr_t base() const { return base_; }  // first page's address
    size_t n_pages() const { return n_pages_; }

    // Makes every page of the range fault on its next access and leaves none
    // of the file in the page cache; throws MeasurementUnavailable when pages
    // stay cached (e.g. the file is on tmpfs), naming the file.
    void forget();
    // Per page of the range: mapped in this process's page table.
    std::vector<bool> present() const;
    // Per page of the range: in the page cache.
    std::vector<bool> cached() const;

private:
    std::filesystem::path file_;
    size_t page_ = 0;
    uintptr_t base_ = 0;
    size_t n_pages_ = 0;
    OwnedFd file_fd_;
    OwnedFd pagemap_fd_;
};

}  // namespace dwell::bench
