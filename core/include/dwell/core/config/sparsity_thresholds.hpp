// Calibrated activation-sparsity thresholds (`dwell calibrate`,
// --sparsity-thresholds, [sparsity] thresholds): one threshold per
// projection input, keyed by the name of the first weight that reads that
// input with its ".weight" suffix dropped ("blk.3.attn_q" for the input q,
// k and v share, "blk.3.ffn_gate" for gate and up's, "blk.3.ffn_down").
// SPARSIFY then runs in threshold mode: entries with |x| < t become 0.
//
// The file is TOML:
//
//     model = "stories260K"      # the model file's stem, for people
//     weights = "1f2e3d4c5b6a7988"  # session_weights_fingerprint, checked
//     sparsity = 0.4             # the share calibrated for
//     tokens = 1024              # tokens of text it was measured on
//     [thresholds]
//     "blk.0.attn_q" = 0.0123
//
// Thread-safety: the functions are reentrant. Ownership: values returned.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "dwell/core/base/export.hpp"

namespace dwell {

struct SparsityThresholds {
    std::string model;                    // the model file's stem it was calibrated on
    std::string weights;                  // its weights' fingerprint, 16 hex digits
    double sparsity = 0.0;                // the share asked for
    int64_t tokens = 0;                   // text tokens measured
    std::map<std::string, float> values;  // input key -> threshold (finite, >= 0)
};

// Throws dwell::Error (DWELL_ERR_INVALID_ARGUMENT) in one line naming the
// file and what is wrong: unreadable, not TOML, a missing or mistyped key,
// a negative or non-finite threshold, no thresholds at all.
DWELL_CORE_API SparsityThresholds read_sparsity_thresholds(const std::filesystem::path& file);

// Writes `t` as above (replacing the file); throws dwell::Error on I/O.
DWELL_CORE_API void write_sparsity_thresholds(const std::filesystem::path& file,
                                              const SparsityThresholds& t);

}  // namespace dwell
