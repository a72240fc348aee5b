#include "dwell/tools/convert.hpp"

#include <cmath>
#include <limits>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/gguf_metadata_copy.hpp"
#include "dwell/tools/quantize.hpp"

namespace dwell {

namespace fs = std::filesystem;

QuantPolicy parse_quant_policy(const std::string& name) {
    if (name == "keep") return QuantPolicy::Keep;
    if (name == "q8") return QuantPolicy::Q8;
    if (name == "q4g128") return QuantPolicy::Q4G128;
    if (name == "q4g64") return QuantPolicy::Q4G64;
    if (name == "q4g32") return QuantPolicy::Q4G32;
    if (name == "mixed") return QuantPolicy::Mixed;
    throw Error(DWELL_ERR_INVALID_ARGUMENT,
                "--quant '" + name +
                    "' is not a quantization policy (use keep, q8, q4g128, q4g64, q4g32 or mixed)");
}

const char* quant_policy_name(QuantPolicy policy) {
    switch (policy) {
        case QuantPolicy::Keep:
            return "keep";
        case QuantPolicy::Q8:
            return "q8";
        case QuantPolicy::Q4G128:
            return "q4g128";
        case QuantPolicy::Q4G64:
            return "q4g64";
        case QuantPolicy::Q4G32:
            return "q4g32";
        case QuantPolicy::Mixed:
            return "mixed";
    }
    return "?";
}

namespace {

// The vocabulary travels as the embedded sentencepiece model; these arrays
// would only repeat it.
bool keep_key(std::string_view key) {
    return key != "tokenizer.ggml.tokens" && key != "tokenizer.ggml.scores" &&
           key != "tokenizer.ggml.token_type" && key != "tokenizer.ggml.merges";
}

struct Choice {
    dwell_dtype dtype;
    std::vector<uint8_t> bytes;
    double snr_db;
};

Choice encode(dwell_dtype dtype, const std::vector<float>& values, int64_t cols, int64_t rows) {
    Choice c{dtype, quantize_tensor(dtype, values, cols, rows), 0.0};
    c.snr_db = quantization_snr_db(values, dequantize_tensor(dtype, c.bytes, cols, rows));
    return c;
}

}  // namespace

ConvertReport convert_to_pack(const ConvertOptions& options,
                              const std::function<void(size_t, size_t)>& on_tensor) {
    refuse_output_over_input(options.output, options.input, "the GGUF file being converted");
    const GgufFile in = GgufFile::open(options.input);
    const std::string in_name = options.input.string();

    PackWriter::Options po;
    po.compression = options.compression;
    po.zstd_level = options.zstd_level;
    po.frame_bytes = options.frame_bytes;
    PackWriter out(options.output, po);
    copy_gguf_metadata(in, out.metadata(), keep_key);
    out.metadata().add_string("dwell.pack.source", options.input.filename().string());
    out.metadata().add_string("dwell.pack.quant", quant_policy_name(options.quant));
    out.set_tokenizer(Tokenizer::from_gguf(in).serialized_model());

    ConvertReport report;
    report.input_bytes = in.file_size();
    double total_bits = 0;
    int64_t total_elements = 0;
    const auto& tensors = in.tensors();
    for (size_t i = 0; i < tensors.size(); ++i) {
        const auto& t = tensors[i];
        const std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
        const int64_t cols = t.ne[0];
        const int64_t rows = t.ne[1] * t.ne[2] * t.ne[3];
        if (t.dtype == DWELL_DTYPE_COUNT) {
            throw Error(DWELL_ERR_UNSUPPORTED, in_name + ": tensor '" + t.name + "' has type " +
                                                   ggml_type_name(t.ggml_type) +
                                                   ", which dwell cannot convert");
        }
        ConvertedTensor r;
        r.name = t.name;
        r.shape = shape;
        r.from = t.dtype;
        r.elements = cols * rows;

        Choice chosen{t.dtype, std::vector<uint8_t>(t.data, t.data + t.size),
                      std::numeric_limits<double>::infinity()};
        const bool matrix = rows > 1;
        if (options.quant != QuantPolicy::Keep) {
            const std::vector<float> values =
                dequantize_tensor(t.dtype, std::span<const uint8_t>(t.data, t.size), cols, rows);
            if (!matrix) {
                chosen = encode(DWELL_F32, values, cols, rows);
            } else if (options.quant == QuantPolicy::Q8) {
                chosen = encode(DWELL_I8_C, values, cols, rows);
            } else if (options.quant == QuantPolicy::Q4G128) {
                chosen = encode(DWELL_I4_G, values, cols, rows);
            } else if (options.quant == QuantPolicy::Q4G64) {
                chosen = encode(DWELL_I4_G64, values, cols, rows);
            } else if (options.quant == QuantPolicy::Q4G32) {
                chosen = encode(DWELL_I4_G32, values, cols, rows);
            } else {
                // Cheapest format that keeps the tensor above the threshold.
                chosen = encode(DWELL_I4_G, values, cols, rows);
                if (chosen.snr_db < options.snr_db) chosen = encode(DWELL_I6_G, values, cols, rows);
                if (chosen.snr_db < options.snr_db) chosen = encode(DWELL_I8_C, values, cols, rows);
            }
        }
        r.to = chosen.dtype;
        r.bytes = chosen.bytes.size();
        r.snr_db = chosen.snr_db;
        r.bits_per_weight = 8.0 * static_cast<double>(r.bytes) / static_cast<double>(r.elements);
        out.add_tensor(t.name, chosen.dtype, shape, chosen.bytes);
        total_bits += 8.0 * static_cast<double>(r.bytes);
        total_elements += r.elements;
        report.tensors.push_back(std::move(r));
        if (on_tensor) on_tensor(i + 1, tensors.size());
    }
    const std::vector<PackTensorStorage> storage = out.finish();
    for (auto& r : report.tensors) {
        for (const auto& st : storage) {
            if (st.name == r.name) r.stored = st.stored_bytes;
        }
    }
    report.bits_per_weight = total_elements ? total_bits / static_cast<double>(total_elements) : 0;
    std::error_code ec;
    report.output_bytes = fs::file_size(options.output, ec);
    return report;
}

}  // namespace dwell
