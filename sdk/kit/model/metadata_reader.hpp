// Typed, range-checked reads of a model file's metadata through the host's
// dwell_metadata table. Every value is checked as read (int64) before a
// caller narrows or multiplies it, so hostile metadata cannot wrap into a
// plausible model. Failures throw std::runtime_error with one line naming
// the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/model.h"

namespace dwell::model_kit {

struct TensorInfo {
    dwell_dtype dtype{};
    std::vector<int64_t> ne;  // n_dims entries
};

class MetadataReader {
public:
    // Reads general.architecture (throws when it is missing).
    explicit MetadataReader(const dwell_metadata& meta);

    const std::string& architecture() const { return arch_; }
    // "<architecture>.<suffix>", e.g. arch_key("block_count").
    std::string arch_key(std::string_view suffix) const;

    // Present, of any type. Every optional read below refuses a key that is
    // present with another type than it reads, naming both: a fallback in
    // its place would run the model with other hyper-parameters.
    bool has(const std::string& key) const;
    // "an integer", "a float", "a string", "an array"; nullptr when absent.
    const char* kind(const std::string& key) const;
    // A required integer in lo..hi.
    int64_t require_int(const std::string& key, int64_t lo, int64_t hi) const;
    // An optional integer in lo..hi; `fallback` (unchecked) when absent.
    int64_t int_or(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) const;
    // An optional float, finite as a float (a NaN or an infinity, or a
    // double beyond float's range, is refused naming the key); `fallback`
    // when absent.
    float float_or(const std::string& key, float fallback) const;
    // The same, and greater than zero (epsilons, frequency bases, factors).
    float positive_float_or(const std::string& key, float fallback) const;
    std::optional<std::string> string(const std::string& key) const;
    std::optional<TensorInfo> tensor(const std::string& name) const;

    const dwell_metadata& raw() const { return meta_; }

private:
    const dwell_metadata& meta_;
    std::string arch_;
};

// Throws "metadata key K = v is outside lo..hi" unless lo <= v <= hi.
void check_range(const std::string& key, int64_t v, int64_t lo, int64_t hi);

}  // namespace dwell::model_kit
