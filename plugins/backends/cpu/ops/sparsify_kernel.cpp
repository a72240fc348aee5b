// SPARSIFY (ABI 1.9, graph.h): each row with its smallest-magnitude entries
// set to +0. The fraction mode selects by the total order (|x|, index) on
// keys |x|'s bits above the index: the bits of a non-negative float order as
// the floats do, and NaN's lie above infinity's, so the selection is the
// same whatever order nth_element visits them in, and NaN is never zeroed.
#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"

namespace dwell::cpu {

namespace {

// |x|'s bits: non-negative floats order as their bits do, NaN above inf.
inline uint32_t magnitude(float x) {
    return std::bit_cast<uint32_t>(x) & 0x7fffffffu;
}

constexpr int kShift = 19;  // 31-bit magnitudes -> 12-bit buckets
constexpr size_t kBuckets = size_t{1} << (31 - kShift);

}  // namespace

OpVerdict check_sparsify(const NodeArgs& a) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    if (x.dtype != DWELL_F32) return unsupported("x must be F32");
    if (out.dtype != DWELL_F32 || !same_shape(x, out))
        return invalid("output must be F32 " + shape_string(x) + ", got " + shape_string(out));
    const int32_t mode = a.node->iparams[0];
    const float p = a.node->fparams[0];
    if (mode == DWELL_SPARSIFY_FRACTION) {
        if (!(p >= 0.0f && p < 1.0f))
            return invalid("fraction fparams[0] = " + std::to_string(p) + " is not in [0, 1)");
    } else if (mode == DWELL_SPARSIFY_THRESHOLD) {
        if (!(p >= 0.0f && std::isfinite(p)))
            return invalid("threshold fparams[0] = " + std::to_string(p) + " is not >= 0");
    } else {
        return invalid("mode iparams[0] = " + std::to_string(mode) + " is not 0 or 1");
    }
    return std::nullopt;
}

void run_sparsify(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    const int64_t n = x.ne[0];
    const bool fraction = a.node->iparams[0] == DWELL_SPARSIFY_FRACTION;
    const float p = a.node->fparams[0];
    const auto n_zero =
        static_cast<int64_t>(std::floor(static_cast<double>(p) * static_cast<double>(n)));
    pool.parallel_for(dwell_tensor_nrows(&x), [&](int64_t begin, int64_t end) {
        std::vector<uint64_t> keys;
        std::vector<int64_t> hist;
        for (int64_t r = begin; r < end; ++r) {
            const float* src = f32_row_flat(x, r);
            float* dst = f32_row_flat(out, r);
            if (!fraction) {
                for (int64_t i = 0; i < n; ++i) dst[i] = std::fabs(src[i]) < p ? 0.0f : src[i];
                continue;
            }
            if (n_zero <= 0) {
                std::copy_n(src, n, dst);
                continue;
            }
            // A radix select: a histogram of the keys' top 12 bits finds
            // the bucket holding the n_zero-th smallest; only that bucket's
            // keys are ordered exactly.
            hist.assign(kBuckets, 0);
            for (int64_t i = 0; i < n; ++i) ++hist[magnitude(src[i]) >> kShift];
            uint32_t bucket = 0;
            int64_t below = 0;
            while (below + hist[bucket] < n_zero) below += hist[bucket++];
            keys.clear();
            for (int64_t i = 0; i < n; ++i) {
                const uint32_t mag = magnitude(src[i]);
                if ((mag >> kShift) == bucket)
                    keys.push_back((uint64_t{mag} << 32) | static_cast<uint64_t>(i));
            }
            const auto need = static_cast<size_t>(n_zero - below);  // 1..size
            std::nth_element(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(need - 1),
                             keys.end());
            const uint64_t last = keys[need - 1];
            // Keys below the bucket, and the bucket's up to the need-th: exactly
            // n_zero of them, keys being distinct.
            for (int64_t i = 0; i < n; ++i) {
                const uint32_t mag = magnitude(src[i]);
                const uint64_t key = (uint64_t{mag} << 32) | static_cast<uint64_t>(i);
                const uint32_t b = mag >> kShift;
                dst[i] = b < bucket || (b == bucket && key <= last) ? 0.0f : src[i];
            }
        }
    });
}

}  // namespace dwell::cpu
