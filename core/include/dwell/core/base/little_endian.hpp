// Little-endian integers in file formats (GGUF, dwell packs), read and
// written byte by byte: independent of the host's byte order and of the
// alignment of the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace dwell {

template <typename T>
T load_le(const uint8_t* p) {
    static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t{p[i]} << (8 * i);
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(v));
}

template <typename T>
void put_le(std::vector<uint8_t>& out, T v) {
    static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
    const auto u = static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
    for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
}

template <typename T>
void store_le(uint8_t* p, T v) {
    const auto u = static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
    for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(u >> (8 * i));
}

}  // namespace dwell
