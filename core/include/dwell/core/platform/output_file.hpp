// Every file dwell writes (packs, GGUF files, session and conversation
// files, bench and eval outputs) goes through OutputFile, so a crash, a full
// disk, a second writer or a hostile path never leaves a half-written file
// under the real name or replaces something that is not a file.
//
// - The bytes go to a temporary beside the target,
//   ".<name>.dwell-tmp.<pid>.<random>", created O_EXCL|O_NOFOLLOW with the
//   mode asked for (0600 for sessions and conversations), so no one else's
//   file or link is ever opened or followed.
// - A target that exists and is not a regular file (a device node, a FIFO,
//   a folder, a symbolic link) is refused before anything is written.
// - commit() fsyncs the file, renames it over the target and fsyncs the
//   folder, so the new name survives a power cut.
// - Two writers to one target: the one that commits second finds the target
//   changed since it started (or created, when it did not exist) and fails
//   in one line saying another writer got there first; its temporary is
//   removed. The check and the rename are serialised by a lock on the folder
//   held only for those two system calls.
// - Temporaries of the same target left by a process that is gone are
//   removed when the next writer starts.
//
// Thread-safety: one owner. Errors: dwell::Error(DWELL_ERR_IO) naming the
// target, except a lost race, which is DWELL_ERR_UNAVAILABLE.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "dwell/core/base/export.hpp"

namespace dwell {

class DWELL_CORE_API OutputFile {
public:
    // Refuses a target that is not a regular file, cleans up stale
    // temporaries and creates this writer's temporary.
    explicit OutputFile(std::filesystem::path target, mode_t mode = 0644);
    ~OutputFile();  // not committed: the temporary is removed
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    const std::filesystem::path& target() const { return target_; }
    const std::filesystem::path& temporary() const { return temp_; }
    int fd() const { return fd_; }

    // All of `bytes`, or an exception naming the target.
    void write(const void* data, size_t bytes);
    void write(std::string_view text) { write(text.data(), text.size()); }
    void write_at(uint64_t offset, const void* data, size_t bytes);
    uint64_t size() const { return written_; }

    // Makes the file visible under its real name, durably.
    void commit();

    // ".<name>.dwell-tmp." for a target named <name>: the prefix of its
    // temporaries.
    static std::string temporary_prefix(const std::filesystem::path& target);

private:
    [[noreturn]] void fail(const std::string& what, int err) const;

    std::filesystem::path target_;
    std::filesystem::path temp_;
    std::string temp_name_;  // temp_'s file name, relative to dir_fd_
    std::string target_name_;
    int dir_fd_ = -1;
    int fd_ = -1;
    uint64_t written_ = 0;
    bool committed_ = false;
    // The target when this writer started: whether it existed, and which
    // file it was.
    bool existed_ = false;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
    int64_t mtime_ns_ = 0;
    int64_t ctime_ns_ = 0;
    int64_t size_at_start_ = 0;
};

// Whether `a` and `b` name one file: the same device and inode when both
// exist (so hard links and symbolic links count), else the same
// weakly_canonical path. Never throws; a path that cannot be examined is
// compared by its text alone.
DWELL_CORE_API bool same_file(const std::filesystem::path& a,
                              const std::filesystem::path& b) noexcept;

// Throws dwell::Error(DWELL_ERR_INVALID_ARGUMENT) "<output> is <what_input>:
// writing it would destroy it" when `output` is the same file as `input`:
// an output is renamed over its target, so writing over an input (even a
// read-only one) would replace what was just read.
DWELL_CORE_API void refuse_output_over_input(const std::filesystem::path& output,
                                             const std::filesystem::path& input,
                                             const std::string& what_input);

// Writes `text` to `target` through an OutputFile.
DWELL_CORE_API void write_output_file(const std::filesystem::path& target, std::string_view text,
                                      mode_t mode = 0644);

}  // namespace dwell
