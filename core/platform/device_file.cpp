#include "dwell/core/platform/device_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/base/printable_name.hpp"

namespace dwell {

namespace {

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }

private:
    int fd_;
};

std::string shown(const std::filesystem::path& p) {
    return printable_name(p.string(), 240);
}

const char* kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISDIR(mode)) return "a folder";
    return "not a regular file";
}

// Opens with O_NONBLOCK (a FIFO with no writer would block open() itself)
// and checks what was opened, not what the name pointed to a moment before.
int open_regular(const std::filesystem::path& path, int flags, DeviceFileRead& r) {
    const int fd = ::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        const int e = errno;
        r.status = e == ENOENT || e == ENOTDIR ? DeviceFileRead::Status::absent
                                               : DeviceFileRead::Status::unreadable;
        r.problem = shown(path) + " cannot be opened: " + std::strerror(e);
        return -1;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        r.status = DeviceFileRead::Status::not_regular;
        r.problem = shown(path) + " is " + kind_of(st.st_mode) +
                    ", not a regular file; a device tree holds regular files only";
        ::close(fd);
        return -1;
    }
    return fd;
}

}  // namespace

DeviceFileRead read_device_file(const std::filesystem::path& path, uint64_t max_bytes) {
    DeviceFileRead r;
    const Fd fd(open_regular(path, O_RDONLY, r));
    if (fd.get() < 0) return r;
    // st_size means nothing here (sysfs says 4096, procfs 0): count while reading.
    std::string text;
    char buf[16384];
    while (true) {
        const ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            r.status = DeviceFileRead::Status::unreadable;
            r.problem = shown(path) + " cannot be read: " + std::strerror(errno);
            return r;
        }
        if (n == 0) break;
        if (text.size() + static_cast<uint64_t>(n) > max_bytes) {
            r.status = DeviceFileRead::Status::too_large;
            r.problem = shown(path) + " is larger than " + format_bytes(max_bytes) +
                        ", far more than a device file holds";
            return r;
        }
        text.append(buf, static_cast<size_t>(n));
    }
    r.status = DeviceFileRead::Status::ok;
    r.text = std::move(text);
    return r;
}

std::optional<std::string> read_device_file_or_throw(const std::filesystem::path& path,
                                                     uint64_t max_bytes) {
    DeviceFileRead r = read_device_file(path, max_bytes);
    switch (r.status) {
        case DeviceFileRead::Status::ok:
            return std::move(r.text);
        case DeviceFileRead::Status::absent:
        case DeviceFileRead::Status::unreadable:
            return std::nullopt;
        case DeviceFileRead::Status::not_regular:
        case DeviceFileRead::Status::too_large:
            break;
    }
    throw Error(DWELL_ERR_IO, r.problem + "; fix or remove it in the device tree (--sysroot)");
}

bool write_device_file(const std::filesystem::path& path, const std::string& text,
                       std::string& problem) {
    DeviceFileRead r;
    // No O_CREAT: a devfreq knob that is not there is not made up.
    const Fd fd(open_regular(path, O_WRONLY | O_TRUNC, r));
    if (fd.get() < 0) {
        problem = r.problem;
        return false;
    }
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            problem = shown(path) + " cannot be written: " + std::strerror(errno);
            return false;
        }
        done += static_cast<size_t>(n);
    }
    return true;
}

}  // namespace dwell
