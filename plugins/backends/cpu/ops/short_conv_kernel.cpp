// SHORT_CONV (ABI 1.6): the causal depthwise convolution of LFM2's conv
// layers over the batch and the sequence's carried state, which it then
// advances (graph.h). Parallel over channels: every channel's window, and
// its slice of the state, is independent of the others.
#include <algorithm>
#include <cstring>
#include <vector>

#include "dwell/quant.h"
#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"

namespace dwell::cpu {

namespace {

constexpr int64_t kMaxTaps = 16;
// Channels per range: the taps of a chunk stay in a small local table.
constexpr int64_t kChannelChunk = 256;

bool is_2d(const dwell_tensor& t) {
    return t.ne[2] == 1 && t.ne[3] == 1;
}

// Tap j of channel c as F32.
float tap(const dwell_tensor& w, int64_t c, int64_t j) {
    const unsigned char* row = row_at(w, c);
    if (w.dtype == DWELL_F32) return reinterpret_cast<const float*>(row)[j];
    uint16_t h;
    memcpy(&h, row + 2 * j, sizeof h);
    return dwell_fp16_to_fp32(h);
}

}  // namespace

OpVerdict check_short_conv(const NodeArgs& a) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& w = a.input(1);
    const dwell_tensor& state = a.input(2);
    const dwell_tensor& out = a.output();
    if (x.dtype != DWELL_F32 || !is_2d(x)) return unsupported("x must be F32 [C, T]");
    const int64_t C = x.ne[0];
    const int64_t K = w.ne[0];
    if (w.dtype != DWELL_F32 && w.dtype != DWELL_F16)
        return unsupported("kernel must be F32 or F16");
    if (!is_2d(w) || w.ne[1] != C || K < 2 || K > kMaxTaps) {
        return invalid("kernel must be [K, " + std::to_string(C) +
                       "] with 2 <= K <= " + std::to_string(kMaxTaps) + ", got " + shape_string(w));
    }
    if (state.dtype != DWELL_F32 || !is_2d(state) || state.ne[0] != C || state.ne[1] != K - 1) {
        return invalid("state must be F32 [" + std::to_string(C) + ", " + std::to_string(K - 1) +
                       "], got " + shape_string(state));
    }
    if (out.dtype != DWELL_F32 || !same_shape(out, x))
        return invalid("output must be F32 " + shape_string(x) + ", got " + shape_string(out));
    // The state is written while x is read: they must not share memory.
    if (state.data != nullptr && x.data != nullptr && state.data == x.data)
        return unsupported("state and x share memory");
    return std::nullopt;
}

void run_short_conv(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& w = a.input(1);
    const dwell_tensor& state = a.input(2);
    const dwell_tensor& out = a.output();
    const int64_t C = x.ne[0];
    const int64_t T = x.ne[1];
    const int64_t K = w.ne[0];
    const int64_t S = K - 1;  // state rows

    // Row r of the window xx: the S state rows, then the T rows of x.
    auto window_row = [&](int64_t r) -> const float* {
        return r < S ? f32_row(state, r) : f32_row(x, r - S);
    };

    pool.parallel_for(
        C,
        [&](int64_t begin, int64_t end) {
            // taps[j * n + i]: tap j of channel begin + i, so that the inner
            // loop runs over contiguous channels and vectorises.
            const int64_t n = end - begin;
            std::vector<float> taps(static_cast<size_t>(K * n));
            for (int64_t i = 0; i < n; ++i)
                for (int64_t j = 0; j < K; ++j)
                    taps[static_cast<size_t>(j * n + i)] = tap(w, begin + i, j);

            for (int64_t t = 0; t < T; ++t) {
                float* y = f32_row(out, t) + begin;
                // Taps summed oldest first, one float accumulator per channel,
                // as the reference does.
                std::fill(y, y + n, 0.0f);
                for (int64_t j = 0; j < K; ++j) {
                    const float* xx = window_row(t + j) + begin;
                    const float* tj = taps.data() + j * n;
                    for (int64_t i = 0; i < n; ++i) y[i] += tj[i] * xx[i];
                }
            }

            // The new state is the last S rows of the window. Ascending rows
            // read only rows at or after the one written, so the shift of
            // the old state (T < S) is safe in place.
            for (int64_t r = 0; r < S; ++r) {
                const float* src = window_row(T + r) + begin;
                float* dst = f32_row(state, r) + begin;
                if (src != dst) std::copy(src, src + n, dst);
            }
        },
        kChannelChunk);
}

}  // namespace dwell::cpu
