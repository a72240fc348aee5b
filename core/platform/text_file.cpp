#include "dwell/core/platform/text_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"

namespace dwell {

namespace {

struct FileClose {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

std::string read_text_file(const std::filesystem::path& path, std::string_view what,
                           uint64_t max_bytes) {
    const std::string name = path.string() + ": " + std::string(what);
    const auto too_large = [&](const std::string& size) {
        return Error(DWELL_ERR_INVALID_ARGUMENT,
                     name + " is " + size + ", more than the limit of " + format_bytes(max_bytes) +
                         " (" + std::to_string(max_bytes) + " bytes); use a smaller file");
    };
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        throw Error(DWELL_ERR_IO, name + " is a folder, not a file");
    }
    // A regular file's size is known up front; anything else (a FIFO, a
    // device) is bounded while it is read.
    uint64_t size = 0;
    if (std::filesystem::is_regular_file(path, ec)) {
        const auto n = std::filesystem::file_size(path, ec);
        if (!ec) size = static_cast<uint64_t>(n);
    }
    if (size > max_bytes) {
        throw too_large(format_bytes(size) + " (" + std::to_string(size) + " bytes)");
    }
    std::unique_ptr<std::FILE, FileClose> f(std::fopen(path.c_str(), "rb"));
    if (!f) throw Error(DWELL_ERR_IO, name + " cannot be opened: " + std::strerror(errno));
    std::string text;
    text.reserve(static_cast<size_t>(size));
    char buf[65536];
    while (true) {
        const size_t n = std::fread(buf, 1, sizeof buf, f.get());
        if (n > 0) {
            if (text.size() + n > max_bytes) {
                throw too_large("larger than " + format_bytes(max_bytes));
            }
            text.append(buf, n);
        }
        if (n < sizeof buf) {
            if (std::ferror(f.get())) {
                throw Error(DWELL_ERR_IO, name + " cannot be read: " + std::strerror(errno));
            }
            break;
        }
    }
    return text;
}

}  // namespace dwell
