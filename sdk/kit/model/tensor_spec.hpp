// One weight tensor a model reads: its GGUF name and the shape the metadata
// implies (ne[] order, row length first). The host checks the file against it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dwell::model_kit {

struct TensorSpec {
    std::string name;
    std::vector<int64_t> ne;
    bool required = true;  // false: the graph copes with its absence
};

}  // namespace dwell::model_kit
