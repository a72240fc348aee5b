#include "nnrt_weights.hpp"

#include <dwell/quant.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "backend/weight_conversion.hpp"

namespace dwell::nnrt {

uint64_t fingerprint(const void* data, size_t bytes, uint64_t seed) {
    return plugin_kit::fnv1a(data, bytes, seed);
}

ConvertedWeight convert_weight(const dwell_tensor& w, OH_NN_DataType type) {
    ConvertedWeight c;
    c.type = type;
    c.k = static_cast<int32_t>(w.ne[0]);
    c.n = static_cast<int32_t>(w.ne[1]);
    const size_t k = static_cast<size_t>(c.k), n = static_cast<size_t>(c.n);
    const size_t elem = type == OH_NN_FLOAT32 ? 4 : type == OH_NN_FLOAT16 ? 2 : 1;
    c.data.resize(k * n * elem);
    if (type == OH_NN_INT8) c.scales.resize(n);
    const bool decoded = plugin_kit::for_each_dequantized_row(
        w, static_cast<int64_t>(n), [&](int64_t r64, const float* row) {
            const size_t r = static_cast<size_t>(r64);
            uint8_t* dst = c.data.data() + r * k * elem;
            if (type == OH_NN_FLOAT32) {
                std::memcpy(dst, row, k * 4);
            } else if (type == OH_NN_FLOAT16) {
                plugin_kit::encode_fp16_row(row, k, dst);
            } else {
                // Symmetric per channel: the row's largest magnitude maps to
                // 127; f64 scales and round-half-even, as OH_NN_QuantParam
                // holds them.
                float amax = 0;
                for (size_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(row[i]));
                const double scale = amax > 0 ? static_cast<double>(amax) / 127.0 : 1.0;
                c.scales[r] = scale;
                for (size_t i = 0; i < k; ++i) {
                    const double q = std::nearbyint(static_cast<double>(row[i]) / scale);
                    dst[i] =
                        static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0, 127.0)));
                }
            }
        });
    if (!decoded) throw std::runtime_error(plugin_kit::no_decoder_message(w.dtype));
    const int32_t header[3] = {static_cast<int32_t>(type), c.k, c.n};
    c.fingerprint = fingerprint(header, sizeof header);
    c.fingerprint = fingerprint(c.data.data(), c.data.size(), c.fingerprint);
    c.fingerprint = fingerprint(c.scales.data(), c.scales.size() * sizeof(double), c.fingerprint);
    return c;
}

}  // namespace dwell::nnrt
