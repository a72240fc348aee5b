#include "api_keys.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dwell::server {

ApiKeys::ApiKeys(const std::vector<std::string>& keys) {
    for (const std::string& k : keys) {
        check_key(k);
        digests_.push_back(digest(k));
    }
}

ApiKeys::Digest ApiKeys::digest(std::string_view text) {
    Digest d{};
    unsigned int n = 0;
    if (EVP_Digest(text.data(), text.size(), d.data(), &n, EVP_sha256(), nullptr) != 1 ||
        n != d.size())
        throw std::runtime_error("SHA-256 failed (libcrypto)");
    return d;
}

std::optional<size_t> ApiKeys::match(std::string_view key) const {
    // Digests of equal length compared with CRYPTO_memcmp: the time depends
    // on neither the key nor the guess.
    const Digest d = digest(key);
    std::optional<size_t> found;
    for (size_t i = 0; i < digests_.size(); ++i) {
        const bool same = CRYPTO_memcmp(d.data(), digests_[i].data(), d.size()) == 0;
        if (same && !found) found = i;
    }
    return found;
}

std::optional<size_t> ApiKeys::match_authorization(std::string_view header) const {
    // The scheme is case-insensitive (RFC 9110); the key is not.
    constexpr std::string_view kScheme = "bearer ";
    if (header.size() <= kScheme.size()) return std::nullopt;
    for (size_t i = 0; i < kScheme.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return std::nullopt;
    }
    std::string_view key = header.substr(kScheme.size());
    while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
    while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
    if (key.empty()) return std::nullopt;
    return match(key);
}

std::vector<std::string> split_keys(const std::vector<std::string>& values) {
    std::vector<std::string> out;
    for (const std::string& v : values) {
        size_t start = 0;
        while (start <= v.size()) {
            size_t end = v.find(',', start);
            if (end == std::string::npos) end = v.size();
            std::string item = v.substr(start, end - start);
            const auto first = item.find_first_not_of(" \t\r\n");
            if (first != std::string::npos) {
                item = item.substr(first, item.find_last_not_of(" \t\r\n") - first + 1);
                out.push_back(std::move(item));
            }
            start = end + 1;
        }
    }
    return out;
}

namespace {

constexpr size_t kMaxKeyFileBytes = size_t{1} << 20;
constexpr size_t kMaxKeys = 10000;
constexpr size_t kMaxKeyBytes = 4096;

struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

void check_key(std::string_view key) {
    if (key.empty()) throw std::invalid_argument("an API key is empty");
    if (key.size() > kMaxKeyBytes)
        throw std::invalid_argument("an API key is longer than " + std::to_string(kMaxKeyBytes) +
                                    " bytes");
    // A key a client can send in an Authorization header: visible ASCII.
    for (const char c : key)
        if (c < 0x21 || c > 0x7e)
            throw std::invalid_argument(
                "an API key holds a space, a control byte or a byte outside ASCII (an "
                "Authorization header could never carry it)");
}

std::vector<std::string> read_key_file(const std::string& path) {
    // Not blocking on a FIFO nobody writes, never reading a device without
    // end: a key file is a regular file of bounded size.
    Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
    if (f.fd < 0) throw std::runtime_error(path + " cannot be read: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
        throw std::runtime_error(path + " is not a regular file");
    if (static_cast<uint64_t>(st.st_size) > kMaxKeyFileBytes)
        throw std::runtime_error(path + " is larger than " +
                                 std::to_string(kMaxKeyFileBytes >> 10) + " KiB");
    std::string text(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < text.size()) {
        const ssize_t n = ::read(f.fd, text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::runtime_error(path + " cannot be read: " + std::strerror(errno));
        if (n == 0) break;
        got += static_cast<size_t>(n);
    }
    text.resize(got);
    std::vector<std::string> keys;
    size_t line_no = 0;
    for (size_t at = 0; at < text.size();) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(at, end - at);
        at = end + 1;
        ++line_no;
        const auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos || line[first] == '#') continue;
        std::string key = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
        try {
            check_key(key);
        } catch (const std::invalid_argument& e) {
            throw std::runtime_error(path + " line " + std::to_string(line_no) + ": " + e.what());
        }
        if (keys.size() == kMaxKeys)
            throw std::runtime_error(path + " holds more than " + std::to_string(kMaxKeys) +
                                     " keys");
        keys.push_back(std::move(key));
    }
    if (keys.empty()) throw std::runtime_error(path + " holds no key");
    return keys;
}

}  // namespace dwell::server
