#include "model/metadata_reader.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace dwell::model_kit {

void check_range(const std::string& key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) {
        throw std::runtime_error("metadata key " + key + " = " + std::to_string(v) +
                                 " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    }
}

MetadataReader::MetadataReader(const dwell_metadata& meta) : meta_(meta) {
    auto arch = string("general.architecture");
    if (!arch || arch->empty())
        throw std::runtime_error("metadata key general.architecture is missing");
    arch_ = *arch;
}

std::string MetadataReader::arch_key(std::string_view suffix) const {
    return arch_ + "." + std::string(suffix);
}

const char* MetadataReader::kind(const std::string& key) const {
    // The table has no type query: each getter accepts only its own types.
    int64_t i = 0;
    double f = 0;
    const char* text = nullptr;
    size_t len = 0;
    uint64_t n = 0;
    if (meta_.get_int(meta_.self, key.c_str(), &i)) return "an integer";
    // An integer get_int refuses is a uint64 above INT64_MAX.
    if (meta_.get_float(meta_.self, key.c_str(), &f))
        return f >= 9223372036854775808.0 && f == std::floor(f) ? "an integer above INT64_MAX"
                                                                : "a float";
    if (meta_.get_string(meta_.self, key.c_str(), &text, &len)) return "a string";
    if (meta_.get_array_length(meta_.self, key.c_str(), &n)) return "an array";
    return nullptr;
}

bool MetadataReader::has(const std::string& key) const {
    return kind(key) != nullptr;
}

int64_t MetadataReader::require_int(const std::string& key, int64_t lo, int64_t hi) const {
    int64_t v = 0;
    if (!meta_.get_int(meta_.self, key.c_str(), &v)) {
        if (const char* k = kind(key))
            throw std::runtime_error("metadata key " + key + " is not an integer (it is " + k +
                                     ")");
        throw std::runtime_error("metadata key " + key + " is missing");
    }
    check_range(key, v, lo, hi);
    return v;
}

int64_t MetadataReader::int_or(const std::string& key, int64_t fallback, int64_t lo,
                               int64_t hi) const {
    int64_t v = 0;
    if (!meta_.get_int(meta_.self, key.c_str(), &v)) {
        if (const char* k = kind(key))
            throw std::runtime_error("metadata key " + key + " is not an integer (it is " + k +
                                     ")");
        return fallback;
    }
    check_range(key, v, lo, hi);
    return v;
}

float MetadataReader::float_or(const std::string& key, float fallback) const {
    double v = 0;
    if (!meta_.get_float(meta_.self, key.c_str(), &v)) {
        if (const char* k = kind(key))
            throw std::runtime_error("metadata key " + key + " is not a number (it is " + k + ")");
        return fallback;
    }
    const auto f = static_cast<float>(v);
    if (!std::isfinite(f)) {
        // The value as stored, not as float: 1e39 reads as itself.
        std::ostringstream text;
        text << v;
        throw std::runtime_error("metadata key " + key + " = " + text.str() +
                                 " is not a finite number");
    }
    return f;
}

float MetadataReader::positive_float_or(const std::string& key, float fallback) const {
    const float f = float_or(key, fallback);
    if (!(f > 0)) {
        std::ostringstream text;
        text << f;
        throw std::runtime_error("metadata key " + key + " = " + text.str() +
                                 " must be greater than 0");
    }
    return f;
}

std::optional<std::string> MetadataReader::string(const std::string& key) const {
    const char* s = nullptr;
    size_t len = 0;
    if (!meta_.get_string(meta_.self, key.c_str(), &s, &len) || !s) {
        if (const char* k = kind(key))
            throw std::runtime_error("metadata key " + key + " is not a string (it is " + k + ")");
        return std::nullopt;
    }
    return std::string(s, len);
}

std::optional<TensorInfo> MetadataReader::tensor(const std::string& name) const {
    TensorInfo t;
    int32_t nd = 0;
    int64_t ne[DWELL_MAX_DIMS] = {0, 0, 0, 0};
    if (!meta_.get_tensor(meta_.self, name.c_str(), &t.dtype, &nd, ne)) return std::nullopt;
    if (nd < 1 || nd > DWELL_MAX_DIMS)
        throw std::runtime_error("tensor " + name + " has " + std::to_string(nd) + " dimensions");
    t.ne.assign(ne, ne + nd);
    return t;
}

}  // namespace dwell::model_kit
