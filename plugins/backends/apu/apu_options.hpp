// The apu backend's manifest options ([[backend]] options = { ... }):
//   preference    "fast_single_answer" (default) | "sustained_speed" | "low_power"
//   priority      "low" | "medium" (default) | "high"
//   cache_dir     folder for compiled networks (created if missing); unset: no cache
//   prefill_chunk rows of the prefill network, 2..4096 (default 32)
//   weights       "auto" (default: F32 weights kept as FLOAT32, others FLOAT16)
//                 | "fp16" (every weight FLOAT16) | "int8" (per-channel int8)
// "threads" and "affinity", which the host may hand every backend, are
// accepted and ignored.
//
// Thread-safety: pure. Ownership: the result owns its strings.
#pragma once

#include <dwell/backend.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "apu_weights.hpp"

namespace dwell::apu {

struct ApuOptions {
    int32_t preference = 1;  // NEURON_PREFER_FAST_SINGLE_ANSWER
    int32_t priority = 100;  // NEURON_PRIORITY_MEDIUM
    std::string cache_dir;
    uint32_t prefill_chunk = 32;
    WeightMode weights = WeightMode::Auto;
};

// Throws ApuError(DWELL_ERR_INVALID_ARGUMENT) naming the bad key and value.
ApuOptions parse_options(const dwell_option* options, size_t n_options);

}  // namespace dwell::apu
