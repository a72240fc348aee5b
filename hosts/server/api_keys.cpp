#include "api_keys.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cctype>
#include <fstream>
#include <stdexcept>

namespace dwell::server {

ApiKeys::ApiKeys(const std::vector<std::string>& keys) {
    for (const std::string& k : keys) {
        if (k.empty()) throw std::invalid_argument("an API key is empty");
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

std::vector<std::string> read_key_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + " cannot be read");
    std::vector<std::string> keys;
    for (std::string line; std::getline(in, line);) {
        const auto first = line.find_first_not_of(" \t\r");
        if (first == std::string::npos || line[first] == '#') continue;
        keys.push_back(line.substr(first, line.find_last_not_of(" \t\r") - first + 1));
    }
    if (keys.empty()) throw std::runtime_error(path + " holds no key");
    return keys;
}

}  // namespace dwell::server
