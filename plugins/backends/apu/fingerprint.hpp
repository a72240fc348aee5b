// Content digests for the compiled-network cache: a 64-bit FNV-1a with a
// final avalanche, and the 32-byte token NeuronCompilation_setCaching
// wants, derived from a text that describes the network fully (structure,
// shapes, weight digests). Not cryptographic: a token only has to differ
// between the networks one application compiles.
//
// Thread-safety: pure functions. Ownership: nothing is kept.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/weight_conversion.hpp"
#include "neuron_adapter_api.hpp"

namespace dwell::apu {

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull) {
    uint64_t h = plugin_kit::fnv1a(data, bytes, seed);
    // splitmix64's finaliser: FNV's low bits mix poorly on their own.
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

inline std::array<uint8_t, kCacheTokenBytes> cache_token(const std::string& description) {
    std::array<uint8_t, kCacheTokenBytes> token{};
    for (size_t part = 0; part < kCacheTokenBytes / 8; ++part) {
        const uint64_t h = fnv1a(description.data(), description.size(),
                                 0xcbf29ce484222325ull + 0x9e3779b97f4a7c15ull * part);
        for (size_t b = 0; b < 8; ++b) token[part * 8 + b] = static_cast<uint8_t>(h >> (8 * b));
    }
    return token;
}

}  // namespace dwell::apu
