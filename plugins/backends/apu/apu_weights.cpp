#include "apu_weights.hpp"

#include <dwell/quant.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "fingerprint.hpp"
#include "neuron_adapter_api.hpp"
#include "neuron_objects.hpp"

namespace dwell::apu {

const char* weight_mode_name(WeightMode mode) {
    switch (mode) {
        case WeightMode::Auto:
            return "auto";
        case WeightMode::Fp16:
            return "fp16";
        case WeightMode::Int8:
            return "int8";
    }
    return "unknown";
}

std::shared_ptr<const ConvertedWeight> convert_weight(const dwell_tensor& w, WeightMode mode) {
    auto cw = std::make_shared<ConvertedWeight>();
    const int64_t k = w.ne[0], n = dwell_tensor_nrows(&w);
    cw->k = static_cast<uint32_t>(k);
    cw->n = static_cast<uint32_t>(n);
    const auto* src = static_cast<const uint8_t*>(w.data);
    if (mode == WeightMode::Auto && w.dtype == DWELL_F32) {
        // The APU gets the file's own values: nothing to convert or keep.
        cw->operand_type = NEURON_TENSOR_FLOAT32;
        cw->values = w.data;
        cw->value_bytes = static_cast<size_t>(k * n) * sizeof(float);
        cw->borrowed = true;
        cw->digest = fnv1a(cw->values, cw->value_bytes);
        return cw;
    }
    std::vector<float> row(static_cast<size_t>(k));
    const bool int8 = mode == WeightMode::Int8;
    cw->operand_type = int8 ? NEURON_TENSOR_QUANT8_SYMM_PER_CHANNEL : NEURON_TENSOR_FLOAT16;
    cw->owned.resize(static_cast<size_t>(k * n) * (int8 ? 1 : 2));
    if (int8) cw->scales.resize(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
        if (dwell_dequantize_row(w.dtype, src + r * w.nb[1], row.data(), k) != 0)
            throw ApuError(DWELL_ERR_UNSUPPORTED, std::string("no decoder for weights of type ") +
                                                      dwell_dtype_name(w.dtype));
        if (int8) {
            float amax = 0;
            for (float v : row) amax = std::max(amax, std::fabs(v));
            // Scales must be positive even for an all-zero row.
            const float scale = amax > 0 ? amax / 127.0f : 1.0f;
            cw->scales[static_cast<size_t>(r)] = scale;
            auto* q = reinterpret_cast<int8_t*>(cw->owned.data()) + r * k;
            for (int64_t i = 0; i < k; ++i)
                q[i] = dwell_round_to_q8(row[static_cast<size_t>(i)] / scale);
        } else {
            auto* h = reinterpret_cast<uint16_t*>(cw->owned.data()) + r * k;
            for (int64_t i = 0; i < k; ++i) h[i] = dwell_fp32_to_fp16(row[static_cast<size_t>(i)]);
        }
    }
    cw->values = cw->owned.data();
    cw->value_bytes = cw->owned.size();
    cw->digest = fnv1a(cw->values, cw->value_bytes,
                       cw->scales.empty() ? 0xcbf29ce484222325ull
                                          : fnv1a(cw->scales.data(), cw->scales.size() * 4));
    return cw;
}

}  // namespace dwell::apu
