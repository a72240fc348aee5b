// Copies a GGUF file's key/value metadata into a GgufWriter (for example
// the metadata section of a dwell pack), keeping each value's type as far
// as the writer can express it.
#pragma once

#include <functional>
#include <string_view>

namespace dwell {

class GgufFile;
class GgufWriter;

// Copies every key for which `keep(key)` is true; returns how many.
// Throws dwell::Error naming the key for a value the writer cannot hold.
size_t copy_gguf_metadata(const GgufFile& from, GgufWriter& to,
                          const std::function<bool(std::string_view key)>& keep);

}  // namespace dwell
