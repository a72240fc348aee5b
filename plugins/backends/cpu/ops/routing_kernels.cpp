// Expert routing: TOPK (indices of the k largest values per row, largest
// first, ties to the lower index) and GATHER (pick values by index per row).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"

namespace dwell::cpu {

namespace {

bool same_rows(const dwell_tensor& a, const dwell_tensor& b) {
    return a.ne[1] == b.ne[1] && a.ne[2] == b.ne[2] && a.ne[3] == b.ne[3];
}

}  // namespace

OpVerdict check_topk(const NodeArgs& a) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    const int32_t k = a.node->iparams[0];
    if (x.dtype != DWELL_F32) return unsupported("input must be F32");
    if (k < 1 || k > x.ne[0]) {
        return invalid("k = " + std::to_string(k) + " must be in [1, " + std::to_string(x.ne[0]) +
                       "]");
    }
    if (out.dtype != DWELL_I32 || out.ne[0] != k || !same_rows(x, out)) {
        return invalid("output must be I32 [" + std::to_string(k) + ", rows of " + shape_string(x) +
                       "], got " + shape_string(out));
    }
    return std::nullopt;
}

void run_topk(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& out = a.output();
    const int64_t n = x.ne[0];
    const int64_t k = a.node->iparams[0];
    pool.parallel_for(dwell_tensor_nrows(&x), [&](int64_t begin, int64_t end) {
        std::vector<int32_t> order(static_cast<size_t>(n));
        for (int64_t r = begin; r < end; ++r) {
            const float* v = f32_row_flat(x, r);
            std::iota(order.begin(), order.end(), 0);
            // A strict weak order even with NaNs (ranked below everything),
            // which std::partial_sort needs to stay in bounds.
            auto before = [v](int32_t i, int32_t j) {
                const bool ni = std::isnan(v[i]);
                const bool nj = std::isnan(v[j]);
                if (ni || nj) return ni == nj ? i < j : nj;
                if (v[i] != v[j]) return v[i] > v[j];
                return i < j;
            };
            std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
            std::copy_n(order.begin(), k, reinterpret_cast<int32_t*>(row_flat(out, r)));
        }
    });
}

OpVerdict check_gather(const NodeArgs& a) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& ids = a.input(1);
    const dwell_tensor& out = a.output();
    if (x.dtype != DWELL_F32) return unsupported("input must be F32");
    if (ids.dtype != DWELL_I32 || !same_rows(ids, x)) {
        return invalid("ids must be I32 [k, rows of " + shape_string(x) + "], got " +
                       shape_string(ids));
    }
    if (out.dtype != DWELL_F32 || !same_shape(out, ids)) {
        return invalid("output must be F32 " + shape_string(ids) + ", got " + shape_string(out));
    }
    return std::nullopt;
}

void run_gather(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& x = a.input(0);
    const dwell_tensor& ids = a.input(1);
    const dwell_tensor& out = a.output();
    const int64_t n = x.ne[0];
    const int64_t k = ids.ne[0];
    const int64_t rows = dwell_tensor_nrows(&x);
    for (int64_t r = 0; r < rows; ++r) {
        const auto* id = reinterpret_cast<const int32_t*>(row_flat(ids, r));
        for (int64_t i = 0; i < k; ++i) {
            if (id[i] < 0 || id[i] >= n) {
                throw KernelError(DWELL_ERR_INVALID_ARGUMENT, "index " + std::to_string(id[i]) +
                                                                  " in row " + std::to_string(r) +
                                                                  " is outside [0, " +
                                                                  std::to_string(n) + ")");
            }
        }
    }
    pool.parallel_for(
        rows,
        [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                const float* src = f32_row_flat(x, r);
                const auto* id = reinterpret_cast<const int32_t*>(row_flat(ids, r));
                float* dst = f32_row_flat(out, r);
                for (int64_t i = 0; i < k; ++i) dst[i] = src[id[i]];
            }
        },
        std::max<int64_t>(1, 4096 / k));
}

}  // namespace dwell::cpu
