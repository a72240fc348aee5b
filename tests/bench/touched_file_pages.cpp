#include "touched_file_pages.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dwell::bench {

namespace {

[[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + ": " + std::strerror(errno));
}

void* page_address(uintptr_t a) {
    return reinterpret_cast<void*>(a);
}

}  // namespace

OwnedFd::~OwnedFd() {
    if (fd_ >= 0) ::close(fd_);
}

TouchedFilePages::TouchedFilePages(const void* begin, size_t bytes,
                                   const std::filesystem::path& file)
    : file_(file),
      page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))),
      file_fd_(::open(file.c_str(), O_RDONLY | O_CLOEXEC)),
      pagemap_fd_(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)) {
    const auto first = reinterpret_cast<uintptr_t>(begin);
    base_ = first / page_ * page_;
    n_pages_ = (first + bytes - base_ + page_ - 1) / page_;
    if (file_fd_.get() < 0) fail("cannot open " + file.string());
    if (pagemap_fd_.get() < 0) {
        throw MeasurementUnavailable(std::string("cannot open /proc/self/pagemap: ") +
                                     std::strerror(errno));
    }
    // Dirty pages (a file just written) cannot be dropped from the cache.
    if (::fdatasync(file_fd_.get()) != 0) fail("fdatasync " + file.string());
    if (::madvise(page_address(base_), n_pages_ * page_, MADV_RANDOM) != 0)
        fail("madvise(MADV_RANDOM) on the mapping of " + file.string());
}

void TouchedFilePages::forget() {
    if (::madvise(page_address(base_), n_pages_ * page_, MADV_DONTNEED) != 0)
        fail("madvise(MADV_DONTNEED) on the mapping of " + file_.string());
    // Pages still on a CPU's LRU batch may survive one pass; a few more
    // passes let the kernel drain them.
    size_t still = 0;
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (::posix_fadvise(file_fd_.get(), 0, 0, POSIX_FADV_DONTNEED) != 0)
            fail("posix_fadvise(POSIX_FADV_DONTNEED) on " + file_.string());
        still = 0;
        for (bool c : cached()) still += c ? 1 : 0;
        if (still == 0) return;
    }
    throw MeasurementUnavailable(file_.string() + ": " + std::to_string(still) +
                                 " pages stay in the page cache after POSIX_FADV_DONTNEED (a tmpfs "
                                 "file?); put the model on a disk filesystem (--dir)");
}

std::vector<bool> TouchedFilePages::present() const {
    // One 64-bit entry per page; bit 63 is "present".
    std::vector<uint64_t> entries(n_pages_);
    const off_t at = static_cast<off_t>(base_ / page_ * sizeof(uint64_t));
    const size_t want = entries.size() * sizeof(uint64_t);
    size_t got = 0;
    while (got < want) {
        const ssize_t n = ::pread(pagemap_fd_.get(), reinterpret_cast<char*>(entries.data()) + got,
                                  want - got, at + static_cast<off_t>(got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("cannot read /proc/self/pagemap");
        got += static_cast<size_t>(n);
    }
    std::vector<bool> out(n_pages_);
    for (size_t i = 0; i < n_pages_; ++i) out[i] = (entries[i] >> 63) & 1u;
    return out;
}

std::vector<bool> TouchedFilePages::cached() const {
    std::vector<unsigned char> vec(n_pages_);
    if (::mincore(page_address(base_), n_pages_ * page_, vec.data()) != 0)
        fail("mincore on the mapping of " + file_.string());
    std::vector<bool> out(n_pages_);
    for (size_t i = 0; i < n_pages_; ++i) out[i] = vec[i] & 1u;
    return out;
}

}  // namespace dwell::bench
