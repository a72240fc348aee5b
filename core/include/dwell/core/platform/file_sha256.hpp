// The SHA-256 of a file's bytes as 64 lowercase hexadecimal digits
// (OpenSSL's libcrypto), read through an open descriptor so that the bytes
// hashed are those of the file the caller goes on to use.
//
// Thread-safety: a free function; reads with pread, leaving the
// descriptor's offset alone.
#pragma once

#include <filesystem>
#include <string>

namespace dwell {

// Throws dwell::Error(DWELL_ERR_IO) naming `path` (used only in messages)
// when the file cannot be read.
std::string file_sha256(int fd, const std::filesystem::path& path);

}  // namespace dwell
