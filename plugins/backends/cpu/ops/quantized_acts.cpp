#include "ops/quantized_acts.hpp"

#include <algorithm>
#include <cstring>

namespace dwell::cpu {
namespace {

// One past the last byte of t.
const unsigned char* end_of(const dwell_tensor& t) {
    uint64_t last = 0;
    for (int d = 1; d < DWELL_MAX_DIMS; ++d) last += static_cast<uint64_t>(t.ne[d] - 1) * t.nb[d];
    return static_cast<const unsigned char*>(t.data) + last + dwell_row_bytes(t.dtype, t.ne[0]);
}

}  // namespace

unsigned char* QuantizedActs::lookup(const dwell_tensor& x, const GemmKernel& kernel,
                                     size_t act_row_bytes, bool* hit) {
    const size_t rows = static_cast<size_t>(dwell_tensor_nrows(&x));
    const bool same = valid_ && x_data_ == x.data && quantize_ == kernel.quantize_act &&
                      row_bytes_ == act_row_bytes && std::equal(ne_, ne_ + DWELL_MAX_DIMS, x.ne) &&
                      std::equal(nb_, nb_ + DWELL_MAX_DIMS, x.nb);
    *hit = same;
    if (same) return buffer_.get();
    const size_t need = rows * act_row_bytes;
    if (need > capacity_) {
        buffer_ = make_aligned_bytes(need);
        capacity_ = need;
    }
    valid_ = false;  // until filled()
    x_data_ = x.data;
    std::copy(x.ne, x.ne + DWELL_MAX_DIMS, ne_);
    std::copy(x.nb, x.nb + DWELL_MAX_DIMS, nb_);
    quantize_ = kernel.quantize_act;
    row_bytes_ = act_row_bytes;
    x_begin_ = static_cast<const unsigned char*>(x.data);
    x_end_ = end_of(x);
    return buffer_.get();
}

void QuantizedActs::note_written(const dwell_tensor& out) {
    if (!valid_) return;
    const auto* begin = static_cast<const unsigned char*>(out.data);
    const unsigned char* end = end_of(out);
    if (begin < x_end_ && x_begin_ < end) valid_ = false;
}

}  // namespace dwell::cpu
