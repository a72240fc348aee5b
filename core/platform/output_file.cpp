#include "dwell/core/platform/output_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <random>
#include <system_error>
#include <utility>

#include "dwell/core/base/error.hpp"

namespace dwell {
namespace {

std::string message_of(int err) {
    return std::generic_category().message(err);
}

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

int64_t ns_of(const struct timespec& t) {
    return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// Removes the temporaries of `prefix` whose writer process is gone; a
// running writer (this process included) keeps its own.
void remove_stale_temporaries(int dir_fd, const std::string& prefix) {
    const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    DIR* dir = ::fdopendir(fd);
    if (dir == nullptr) {
        ::close(fd);
        return;
    }
    while (const dirent* e = ::readdir(dir)) {
        const std::string_view name = e->d_name;
        if (name.substr(0, prefix.size()) != prefix) continue;
        const std::string_view rest = name.substr(prefix.size());
        pid_t pid = 0;
        const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
        if (ec != std::errc() || end == rest.data() || *end != '.' || pid <= 0) continue;
        if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
        ::unlinkat(dir_fd, e->d_name, 0);
    }
    ::closedir(dir);
}

// Holds an exclusive lock on a folder for its scope: the writers' check of
// the target and their rename happen one at a time.
class FolderLock {
public:
    explicit FolderLock(int dir_fd) : fd_(dir_fd) {
        while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
        }
    }
    ~FolderLock() { ::flock(fd_, LOCK_UN); }
    FolderLock(const FolderLock&) = delete;
    FolderLock& operator=(const FolderLock&) = delete;

private:
    int fd_;
};

}  // namespace

std::string OutputFile::temporary_prefix(const std::filesystem::path& target) {
    std::string prefix(1, '.');
    prefix += target.filename().string();
    prefix += ".dwell-tmp.";
    return prefix;
}

OutputFile::OutputFile(std::filesystem::path target, mode_t mode) : target_(std::move(target)) {
    target_name_ = target_.filename().string();
    if (target_name_.empty() || target_name_ == "." || target_name_ == "..") {
        throw Error(DWELL_ERR_IO, target_.string() + ": not a file name: choose an output file");
    }
    const std::filesystem::path folder =
        target_.has_parent_path() ? target_.parent_path() : std::filesystem::path(".");
    dir_fd_ = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd_ < 0) fail("cannot create it in the folder " + folder.string(), errno);

    struct stat st {};
    if (::fstatat(dir_fd_, target_name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISREG(st.st_mode)) {
            const std::string kind = kind_of(st.st_mode);
            ::close(std::exchange(dir_fd_, -1));
            throw Error(DWELL_ERR_IO, target_.string() + ": exists and is " + kind +
                                          ", not a regular file: refused; choose another "
                                          "output path");
        }
        existed_ = true;
        dev_ = st.st_dev;
        ino_ = st.st_ino;
        mtime_ns_ = ns_of(st.st_mtim);
        ctime_ns_ = ns_of(st.st_ctim);
        size_at_start_ = st.st_size;
    } else if (errno != ENOENT) {
        const int err = errno;
        ::close(std::exchange(dir_fd_, -1));
        throw Error(DWELL_ERR_IO, target_.string() + ": cannot stat: " + message_of(err));
    }

    const std::string prefix = temporary_prefix(target_);
    remove_stale_temporaries(dir_fd_, prefix);

    std::random_device rd;
    for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
        std::array<char, 32> suffix{};
        std::snprintf(suffix.data(), suffix.size(), "%ld.%08x", static_cast<long>(::getpid()),
                      static_cast<unsigned>(rd()));
        temp_name_ = prefix + suffix.data();
        fd_ = ::openat(dir_fd_, temp_name_.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ < 0) {
        const int err = errno;
        ::close(std::exchange(dir_fd_, -1));
        throw Error(DWELL_ERR_IO, target_.string() + ": cannot create its temporary file in " +
                                      folder.string() + ": " + message_of(err) +
                                      " (check the folder's permissions and free space)");
    }
    temp_ = folder / temp_name_;
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && dir_fd_ >= 0 && !temp_name_.empty())
        ::unlinkat(dir_fd_, temp_name_.c_str(), 0);
    if (dir_fd_ >= 0) ::close(dir_fd_);
}

void OutputFile::fail(const std::string& what, int err) const {
    throw Error(DWELL_ERR_IO, target_.string() + ": " + what + ": " + message_of(err));
}

void OutputFile::write(const void* data, size_t bytes) {
    write_at(written_, data, bytes);
}

void OutputFile::write_at(uint64_t offset, const void* data, size_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t done = 0;
    while (done < bytes) {
        const ssize_t n = ::pwrite(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("write failed", n < 0 ? errno : EIO);
        done += static_cast<size_t>(n);
    }
    if (offset + bytes > written_) written_ = offset + bytes;
}

void OutputFile::commit() {
    if (committed_ || fd_ < 0)
        throw Error(DWELL_ERR_INTERNAL, target_.string() + ": committed twice");
    if (::fsync(fd_) != 0) fail("fsync failed", errno);
    if (::close(std::exchange(fd_, -1)) != 0) fail("close failed", errno);
    {
        FolderLock lock(dir_fd_);
        struct stat st {};
        const bool exists = ::fstatat(dir_fd_, target_name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (exists && !S_ISREG(st.st_mode)) {
            throw Error(DWELL_ERR_IO, target_.string() + ": became " + kind_of(st.st_mode) +
                                          " while dwell was writing it: refused; choose another "
                                          "output path");
        }
        const bool same =
            exists == existed_ &&
            (!exists || (st.st_dev == dev_ && st.st_ino == ino_ && ns_of(st.st_mtim) == mtime_ns_ &&
                         ns_of(st.st_ctim) == ctime_ns_ && st.st_size == size_at_start_));
        if (!same) {
            throw Error(DWELL_ERR_UNAVAILABLE,
                        target_.string() +
                            ": another writer replaced it while this one was writing: left as "
                            "the other wrote it, this output discarded; give each writer its "
                            "own output path");
        }
        if (::renameat(dir_fd_, temp_name_.c_str(), dir_fd_, target_name_.c_str()) != 0)
            fail("cannot rename " + temp_.string() + " over it", errno);
        committed_ = true;
    }
    // The rename is durable only once the folder is.
    if (::fsync(dir_fd_) != 0 && errno != EINVAL) fail("fsync of its folder failed", errno);
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) noexcept {
    if (a.empty() || b.empty()) return false;
    struct stat sa {};
    struct stat sb {};
    if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    // One of them does not exist (yet): the same name still means the same
    // file once it is written.
    try {
        std::error_code ea, eb;
        const auto ca = std::filesystem::weakly_canonical(a, ea);
        const auto cb = std::filesystem::weakly_canonical(b, eb);
        if (!ea && !eb) return ca == cb;
        return a.lexically_normal() == b.lexically_normal();
    } catch (const std::exception&) {  // bad_alloc from the path copies
        return a == b;
    }
}

void refuse_output_over_input(const std::filesystem::path& output,
                              const std::filesystem::path& input, const std::string& what_input) {
    if (same_file(output, input)) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    output.string() + " is " + what_input +
                        ": writing it would destroy it (choose another output file)");
    }
}

void write_output_file(const std::filesystem::path& target, std::string_view text, mode_t mode) {
    OutputFile out(target, mode);
    out.write(text);
    out.commit();
}

}  // namespace dwell
