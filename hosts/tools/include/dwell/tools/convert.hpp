// GGUF -> dwell pack conversion, with dwell's quantization policies:
//   keep    every tensor as it is in the GGUF file;
//   q8      weight matrices as int8 per channel (i8c);
//   q4g128  weight matrices as group-wise asymmetric int4 (i4g128);
//   q4g64, q4g32  the same with smaller groups (more scales, less error);
//   mixed   i4g128 where its signal-to-noise ratio reaches snr_db, else
//           i6g128 where that does, else i8c.
// Vectors (norm weights, biases) stay f32 in every mode but keep.
//
// Thread-safety: one conversion per call; quantization uses several threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "dwell/core/model/pack_file.hpp"
#include "dwell/tools/pack_writer.hpp"

namespace dwell {

enum class QuantPolicy { Keep, Q8, Q4G128, Q4G64, Q4G32, Mixed };

// "keep", "q8", "q4g128", "q4g64", "q4g32", "mixed"; throws dwell::Error naming the value
// otherwise.
QuantPolicy parse_quant_policy(const std::string& name);
const char* quant_policy_name(QuantPolicy policy);

struct ConvertOptions {
    std::filesystem::path input;   // a GGUF file
    std::filesystem::path output;  // the .dwell pack
    QuantPolicy quant = QuantPolicy::Keep;
    double snr_db = 20.0;  // the mixed policy's threshold
    PackCompression compression = PackCompression::None;
    int zstd_level = 9;
    uint64_t frame_bytes = uint64_t{256} * 1024;
};

struct ConvertedTensor {
    std::string name;
    std::vector<int64_t> shape;
    dwell_dtype from;
    dwell_dtype to;
    int64_t elements;
    uint64_t bytes;   // raw bytes in the new type
    uint64_t stored;  // bytes in the file (compressed when zstd)
    double bits_per_weight;
    double snr_db;  // against the source's values; +inf when exact
};

struct ConvertReport {
    std::vector<ConvertedTensor> tensors;
    double bits_per_weight = 0;  // over all tensors, weighted by elements
    uint64_t input_bytes = 0;
    uint64_t output_bytes = 0;
};

// on_tensor(done, total) after each tensor, for a progress bar.
ConvertReport convert_to_pack(const ConvertOptions& options,
                              const std::function<void(size_t done, size_t total)>& on_tensor = {});

}  // namespace dwell
