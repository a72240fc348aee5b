#include "fake_neuron_kernels.hpp"

#include <cmath>

namespace fake_neuron {

float half_to_float(uint16_t h) {
    const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0) {
        v = std::ldexp(static_cast<double>(man), -24);  // subnormal: man * 2^-24
    } else if (exp == 31) {
        v = man == 0 ? INFINITY : NAN;
    } else {
        v = std::ldexp(1.0 + man / 1024.0, exp - 15);
    }
    return static_cast<float>(sign ? -v : v);
}

void fully_connected(const float* x, const float* w, const float* bias, float* out, size_t m,
                     size_t n, size_t k) {
    for (size_t r = 0; r < m; ++r)
        for (size_t c = 0; c < n; ++c) {
            double s = bias[c];
            for (size_t i = 0; i < k; ++i)
                s += static_cast<double>(x[r * k + i]) * static_cast<double>(w[c * k + i]);
            out[r * n + c] = static_cast<float>(s);
        }
}

void cast_f16_to_f32(const uint16_t* in, float* out, size_t count) {
    for (size_t i = 0; i < count; ++i) out[i] = half_to_float(in[i]);
}

void dequantize_per_channel(const int8_t* in, const float* scales, uint32_t channel_dim, float* out,
                            size_t rows, size_t cols) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c)
            out[r * cols + c] =
                static_cast<float>(in[r * cols + c]) * scales[channel_dim == 0 ? r : c];
}

}  // namespace fake_neuron
