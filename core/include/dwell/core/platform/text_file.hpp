// Whole text files read into memory (perplexity's -f, prompt files), with a
// size limit checked before and while reading: a path to a huge file, a
// device or a FIFO fails in one line instead of filling memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "dwell/core/base/export.hpp"

namespace dwell {

// 256 MiB: far above any evaluation text (wikitext-2's test split is 1.3 MB)
// and well inside a phone's memory with its tokens beside it.
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{256} << 20;
// Sentencepiece model files (Tokenizer::from_model_file).
inline constexpr uint64_t kMaxTokenizerModelBytes = uint64_t{64} << 20;

// Throws dwell::Error (DWELL_ERR_IO when the file cannot be read,
// DWELL_ERR_INVALID_ARGUMENT when it is larger than max_bytes) naming the
// file, `what` it is ("the text file (-f)") and the limit.
DWELL_CORE_API std::string read_text_file(const std::filesystem::path& path, std::string_view what,
                                          uint64_t max_bytes = kMaxTextFileBytes);

}  // namespace dwell
