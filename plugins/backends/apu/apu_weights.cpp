#include "apu_weights.hpp"

#include <dwell/quant.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/weight_conversion.hpp"
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
    if (mode == WeightMode::Auto && w.dtype == DWELL_F32) {
        // The APU gets the file's own values: nothing to convert or keep.
        cw->operand_type = NEURON_TENSOR_FLOAT32;
        cw->values = w.data;
        cw->value_bytes = static_cast<size_t>(k * n) * sizeof(float);
        cw->borrowed = true;
        cw->digest = fnv1a(cw->values, cw->value_bytes);
        return cw;
    }
    const bool int8 = mode == WeightMode::Int8;
    cw->operand_type = int8 ? NEURON_TENSOR_QUANT8_SYMM_PER_CHANNEL : NEURON_TENSOR_FLOAT16;
    cw->owned.resize(static_cast<size_t>(k * n) * (int8 ? 1 : 2));
    if (int8) cw->scales.resize(static_cast<size_t>(n));
    const bool decoded =
        plugin_kit::for_each_dequantized_row(w, n, [&](int64_t r, const float* row) {
            if (int8) {
                // f32 scales and round-half-away (dwell_round_to_q8): what
                // NeuronAdapter's per-channel quant params hold.
                float amax = 0;
                for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(row[i]));
                // Scales must be positive even for an all-zero row.
                const float scale = amax > 0 ? amax / 127.0f : 1.0f;
                cw->scales[static_cast<size_t>(r)] = scale;
                auto* q = reinterpret_cast<int8_t*>(cw->owned.data()) + r * k;
                for (int64_t i = 0; i < k; ++i) q[i] = dwell_round_to_q8(row[i] / scale);
            } else {
                plugin_kit::encode_fp16_row(row, static_cast<size_t>(k),
                                            cw->owned.data() + r * k * 2);
            }
        });
    if (!decoded) throw ApuError(DWELL_ERR_UNSUPPORTED, plugin_kit::no_decoder_message(w.dtype));
    cw->values = cw->owned.data();
    cw->value_bytes = cw->owned.size();
    cw->digest = fnv1a(cw->values, cw->value_bytes,
                       cw->scales.empty() ? 0xcbf29ce484222325ull
                                          : fnv1a(cw->scales.data(), cw->scales.size() * 4));
    return cw;
}

}  // namespace dwell::apu
