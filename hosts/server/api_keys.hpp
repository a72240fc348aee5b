// The API keys a server accepts, kept as SHA-256 digests and compared in
// constant time, so that neither the comparison's time nor a memory dump
// of a request tells how much of a key a guess got right.
//
// Thread-safety: immutable after construction; match() is const.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dwell::server {

class ApiKeys {
public:
    // Throws std::invalid_argument for a key check_key() refuses.
    explicit ApiKeys(const std::vector<std::string>& keys);

    bool empty() const { return digests_.empty(); }
    size_t size() const { return digests_.size(); }

    // The index of the key given as "Bearer KEY" in an Authorization header
    // value, or nothing. Every key is compared, whichever one matches.
    std::optional<size_t> match_authorization(std::string_view header) const;
    std::optional<size_t> match(std::string_view key) const;

private:
    using Digest = std::array<unsigned char, 32>;
    static Digest digest(std::string_view text);
    std::vector<Digest> digests_;
};

// Throws std::invalid_argument (saying why) unless `key` is 1..4096
// visible ASCII bytes, as an Authorization header can carry.
void check_key(std::string_view key);

// Keys from a list of "KEY[,KEY...]" values (an --api-key repeated, or
// $DWELL_API_KEY), with surrounding spaces dropped; empty items are skipped.
std::vector<std::string> split_keys(const std::vector<std::string>& values);

// Keys from a file, one a line (surrounding spaces dropped); blank lines
// and lines starting with '#' are skipped. Throws std::runtime_error naming
// the file when it is not a regular file of at most 1 MiB, holds no key,
// more than 10,000 keys, or a line check_key() refuses (naming the line).
std::vector<std::string> read_key_file(const std::string& path);

}  // namespace dwell::server
