// Tensor shapes as messages print them: "[4096, 32]", and with the element
// type "[4096, 32] q4_0". At least one and at most DWELL_MAX_DIMS sizes are
// shown whatever n_dims says: a descriptor a plugin handed back may hold any
// n_dims, and a message must not read past ne[].
#pragma once

#include <cstdint>
#include <string>

#include "dwell/tensor.h"

namespace dwell {

std::string shape_str(int32_t n_dims, const int64_t* ne);
std::string shape_str(const dwell_tensor& t);

}  // namespace dwell
