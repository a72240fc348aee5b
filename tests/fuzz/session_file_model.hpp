// The model the session-file fuzzer restores into, shared with the seed
// generator so the seeds it writes pass the header's model checks: 2
// layers, KV width 32 (whole blocks of every KV type), 40 token ids, a
// fixed weights fingerprint.
#pragma once

#include "dwell/core/session/session_file.hpp"

namespace dwell::fuzz {

inline SessionFileModel session_file_model() {
    // A hybrid model (a recurrent state of 6 values per layer), so the
    // state's sizes and bytes are fuzzed too.
    return {2, 32, 40, 4096, 0x5eed, "fuzz.gguf", {6, 0}};
}

}  // namespace dwell::fuzz
