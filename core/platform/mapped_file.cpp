#include "dwell/core/platform/mapped_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <limits>
#include <mutex>
#include <system_error>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/platform/posix_file.hpp"

namespace dwell {
namespace {

// One guarded mapping. state: 0 free, 1 being set up or torn down (the
// handler ignores it), 2 live.
struct GuardSlot {
    std::atomic<int> state{0};
    std::atomic<uintptr_t> begin{0};
    std::atomic<uintptr_t> end{0};
    std::atomic<bool> faulted{false};
};

// Process-wide: the SIGBUS handler can reach nothing else. Atomics only, so
// the handler never waits on a lock a faulting thread might hold.
struct GuardTable {
    static constexpr size_t kSlots = 256;
    std::array<GuardSlot, kSlots> slots;
    struct sigaction previous {};
    std::once_flag installed;
};

GuardTable& guard_table() {
    static GuardTable table;
    return table;
}

static_assert(std::atomic<uintptr_t>::is_always_lock_free &&
                  std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free,
              "the SIGBUS handler needs lock-free atomics");

void on_sigbus(int sig, siginfo_t* info, void* context) {
    GuardTable& t = guard_table();
    const int saved_errno = errno;
    const auto addr = reinterpret_cast<uintptr_t>(info != nullptr ? info->si_addr : nullptr);
    for (GuardSlot& s : t.slots) {
        if (s.state.load(std::memory_order_acquire) != 2) continue;
        const uintptr_t begin = s.begin.load(std::memory_order_relaxed);
        const uintptr_t end = s.end.load(std::memory_order_relaxed);
        if (addr < begin || addr >= end) continue;
        // Zero pages in place of the file's: the read that faulted is
        // retried on them. mmap is a plain system call, safe here.
        void* at = ::mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (at != MAP_FAILED) {
            s.faulted.store(true, std::memory_order_release);
            errno = saved_errno;
            return;
        }
        break;
    }
    // Not ours: whoever handled SIGBUS before, else the default action.
    const struct sigaction& prev = t.previous;
    if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction != nullptr) {
        prev.sa_sigaction(sig, info, context);
        return;
    }
    if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
        prev.sa_handler(sig);
        return;
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    // A fault recurs on return; a SIGBUS sent by kill() is pending again.
    ::raise(sig);
}

void install_handler(GuardTable& t) {
    std::call_once(t.installed, [&t] {
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        ::sigaction(SIGBUS, &sa, &t.previous);
    });
}

int claim_slot(uintptr_t begin, uintptr_t end) {
    GuardTable& t = guard_table();
    install_handler(t);
    for (size_t i = 0; i < GuardTable::kSlots; ++i) {
        GuardSlot& s = t.slots[i];
        int expected = 0;
        if (!s.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
        s.begin.store(begin, std::memory_order_relaxed);
        s.end.store(end, std::memory_order_relaxed);
        s.faulted.store(false, std::memory_order_relaxed);
        s.state.store(2, std::memory_order_release);
        return static_cast<int>(i);
    }
    return -1;
}

int64_t mtime_ns(const struct stat& st) {
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) throw_io(path, "cannot open", errno);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_io(path, "cannot stat", errno);
    if (!S_ISREG(st.st_mode)) throw Error(DWELL_ERR_IO, path.string() + ": not a regular file");
    if (st.st_size == 0) throw Error(DWELL_ERR_IO, path.string() + ": empty file (0 bytes)");
    if (static_cast<uint64_t>(st.st_size) > std::numeric_limits<size_t>::max()) {
        throw Error(DWELL_ERR_IO, path.string() + ": file too large to map");
    }
    const auto size = static_cast<size_t>(st.st_size);
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (addr == MAP_FAILED) throw_io(path, "cannot map " + std::to_string(size) + " bytes", errno);
    addr_ = addr;
    size_ = size;
    mtime_ns_ = mtime_ns(st);
    const auto begin = reinterpret_cast<uintptr_t>(addr);
    slot_ = claim_slot(begin, begin + size);
    // Only fstat reads it from now on.
    fd_ = fd.release();
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)),
      addr_(std::exchange(o.addr_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      fd_(std::exchange(o.fd_, -1)),
      slot_(std::exchange(o.slot_, -1)),
      mtime_ns_(o.mtime_ns_) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        reset();
        path_ = std::move(o.path_);
        addr_ = std::exchange(o.addr_, nullptr);
        size_ = std::exchange(o.size_, 0);
        fd_ = std::exchange(o.fd_, -1);
        slot_ = std::exchange(o.slot_, -1);
        mtime_ns_ = o.mtime_ns_;
    }
    return *this;
}

MappedFile::~MappedFile() {
    reset();
}

void MappedFile::reset() noexcept {
    if (slot_ >= 0) {
        GuardSlot& s = guard_table().slots[static_cast<size_t>(slot_)];
        s.state.store(1, std::memory_order_release);  // the handler leaves it alone
    }
    if (addr_ != nullptr) ::munmap(addr_, size_);
    if (slot_ >= 0)
        guard_table().slots[static_cast<size_t>(slot_)].state.store(0, std::memory_order_release);
    if (fd_ >= 0) ::close(fd_);
    addr_ = nullptr;
    size_ = 0;
    fd_ = -1;
    slot_ = -1;
}

bool MappedFile::faulted() const {
    return slot_ >= 0 &&
           guard_table().slots[static_cast<size_t>(slot_)].faulted.load(std::memory_order_acquire);
}

std::string MappedFile::problem(bool check_file) const {
    const std::string what_to_do =
        ": its weights can no longer be trusted; restart on a complete file (replace a "
        "served model by renaming a new file over it, never by copying onto it), or use "
        "--weights load";
    if (faulted()) {
        return path_.string() +
               ": the file was truncated while in use (a read past its new end "
               "faulted)" +
               what_to_do;
    }
    if (!check_file || fd_ < 0) return {};
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return {};
    if (static_cast<uint64_t>(st.st_size) != size_) {
        return path_.string() + ": the file changed size while in use (" + std::to_string(size_) +
               " bytes mapped, " + std::to_string(st.st_size) + " now)" + what_to_do;
    }
    if (mtime_ns(st) != mtime_ns_) {
        return path_.string() + ": the file was rewritten in place while in use" + what_to_do;
    }
    return {};
}

}  // namespace dwell
