// Files under the device root (sysfs, procfs, or a captured tree given with
// --sysroot). On a phone they are small regular files; in a captured tree
// they can be anything: a FIFO blocks open() and read() for ever, a link to
// /dev/zero never ends. Every read here opens without blocking, refuses
// anything that is not a regular file and stops at a size limit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace dwell {

// One sysfs value (a number, a name): real ones are under a page.
inline constexpr uint64_t kMaxDeviceValueBytes = uint64_t{64} << 10;
// A listing (proc/cpuinfo, proc/meminfo, proc/self/cgroup): a 512-core
// server's cpuinfo is under 1 MiB.
inline constexpr uint64_t kMaxDeviceListingBytes = uint64_t{4} << 20;

struct DeviceFileRead {
    enum class Status { ok, absent, unreadable, not_regular, too_large };
    Status status = Status::absent;
    std::string text;     // the content when ok
    std::string problem;  // one line naming the file when not ok
    bool ok() const { return status == Status::ok; }
};

// Never blocks, never reads more than max_bytes (+1 to tell "too large").
DeviceFileRead read_device_file(const std::filesystem::path& path, uint64_t max_bytes);

// The content, or nothing when the file is absent or its read fails (a
// sensor that answers EIO); throws dwell::Error (DWELL_ERR_IO) naming the
// file when it is not a regular file or is larger than max_bytes, since
// that is a broken device tree rather than a missing fact.
std::optional<std::string> read_device_file_or_throw(const std::filesystem::path& path,
                                                     uint64_t max_bytes);

// Writes `text` to an existing regular file (a devfreq max_freq) without
// blocking on a FIFO; false, with `problem` set, when it cannot.
bool write_device_file(const std::filesystem::path& path, const std::string& text,
                       std::string& problem);

}  // namespace dwell
