#include "dwell/core/base/tensor_shape.hpp"

#include <algorithm>

namespace dwell {

std::string shape_str(int32_t n_dims, const int64_t* ne) {
    std::string s = "[";
    for (int32_t d = 0; d < std::clamp(n_dims, 1, DWELL_MAX_DIMS); ++d)
        s.append(d ? ", " : "").append(std::to_string(ne[d]));
    return s + "]";
}

std::string shape_str(const dwell_tensor& t) {
    return shape_str(t.n_dims, t.ne) + " " + dwell_dtype_name(t.dtype);
}

}  // namespace dwell
