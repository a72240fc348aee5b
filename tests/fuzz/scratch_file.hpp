// A fuzzer's scratch file, for parsers that read a path rather than bytes:
// created once per fuzzing process in the temp folder, rewritten for every
// input, removed at exit.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace dwell::fuzz {

class ScratchFile {
public:
    explicit ScratchFile(std::string_view name) {
        std::string tmpl = (std::filesystem::temp_directory_path() /
                            ("dwell-" + std::string(name) + "-fuzz-XXXXXX"))
                               .string();
        const int fd = ::mkstemp(tmpl.data());
        if (fd < 0) std::abort();
        ::close(fd);
        path_ = tmpl;
    }
    ~ScratchFile() {
        std::error_code ec;
        std::filesystem::remove(path_, ec);
    }
    ScratchFile(const ScratchFile&) = delete;
    ScratchFile& operator=(const ScratchFile&) = delete;

    const std::filesystem::path& path() const { return path_; }

    // Replaces the file's content; false if it could not be written.
    bool write(const uint8_t* data, size_t size) const { return write_file(path_, data, size); }

    static bool write_file(const std::filesystem::path& path, const uint8_t* data, size_t size) {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return false;
        bool ok = true;
        while (size > 0) {
            const ssize_t w = ::write(fd, data, size);
            if (w <= 0) {
                ok = false;
                break;
            }
            data += w;
            size -= static_cast<size_t>(w);
        }
        ::close(fd);
        return ok;
    }

private:
    std::filesystem::path path_;
};

}  // namespace dwell::fuzz
