#include "dwell/core/platform/file_sha256.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "dwell/core/base/error.hpp"

namespace dwell {

std::string file_sha256(int fd, const std::filesystem::path& path) {
    const auto fail = [&](const std::string& what) {
        throw Error(DWELL_ERR_IO, path.string() + ": cannot compute its sha256: " + what);
    };
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
        fail("libcrypto could not start a digest");
    std::array<unsigned char, 1 << 16> buf;
    off_t at = 0;
    for (;;) {
        const ssize_t n = pread(fd, buf.data(), buf.size(), at);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail(std::strerror(errno));
        if (n == 0) break;
        if (EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(n)) != 1)
            fail("libcrypto failed to hash a block");
        at += n;
    }
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest;
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(ctx.get(), digest.data(), &length) != 1)
        fail("libcrypto failed to finish the digest");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < length; ++i) {
        hex += kHex[digest[i] >> 4];
        hex += kHex[digest[i] & 15];
    }
    return hex;
}

}  // namespace dwell
