// Addressing rows and elements of dwell_tensor through their byte strides.
//
// Every kernel assumes elements (or blocks) inside a row are packed
// (nb[0] == block size) and reaches rows only through nb[1..3], so views
// with padded or permuted rows work. op_dispatch checks those assumptions,
// and the alignment of `data` and nb[], before any kernel runs.
//
// Thread-safety: pure functions. Ownership: nothing here owns memory.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "dwell/tensor.h"

namespace dwell::cpu {

// Row (i1, i2, i3) of t.
inline unsigned char* row_at(const dwell_tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return static_cast<unsigned char*>(t.data) + static_cast<uint64_t>(i1) * t.nb[1] +
           static_cast<uint64_t>(i2) * t.nb[2] + static_cast<uint64_t>(i3) * t.nb[3];
}

// The r-th row in row-major order over dims 1..3, r < dwell_tensor_nrows.
inline unsigned char* row_flat(const dwell_tensor& t, int64_t r) {
    const int64_t i1 = r % t.ne[1];
    const int64_t i2 = (r / t.ne[1]) % t.ne[2];
    const int64_t i3 = r / (t.ne[1] * t.ne[2]);
    return row_at(t, i1, i2, i3);
}

inline float* f32_row(const dwell_tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return reinterpret_cast<float*>(row_at(t, i1, i2, i3));
}

inline float* f32_row_flat(const dwell_tensor& t, int64_t r) {
    return reinterpret_cast<float*>(row_flat(t, r));
}

inline int32_t* i32_row(const dwell_tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return reinterpret_cast<int32_t*>(row_at(t, i1, i2, i3));
}

inline bool same_shape(const dwell_tensor& a, const dwell_tensor& b) {
    return a.ne[0] == b.ne[0] && a.ne[1] == b.ne[1] && a.ne[2] == b.ne[2] && a.ne[3] == b.ne[3];
}

// "[a, b, c, d]" with trailing 1s dropped (at least one dim), for messages.
inline std::string shape_string(const dwell_tensor& t) {
    int last = DWELL_MAX_DIMS - 1;
    while (last > 0 && t.ne[last] == 1) --last;
    std::string s = "[";
    for (int i = 0; i <= last; ++i) {
        if (i) s += ", ";
        s += std::to_string(t.ne[i]);
    }
    return s + "]";
}

}  // namespace dwell::cpu
