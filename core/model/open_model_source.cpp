// Picks the reader for a model file by its first bytes, so a file's name
// never decides how it is parsed.
#include <cstring>
#include <fstream>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/model/model_source.hpp"
#include "dwell/core/model/pack_file.hpp"

namespace dwell {

std::unique_ptr<ModelSource> open_model_source(const std::filesystem::path& path, TensorData data) {
    char magic[8] = {0};
    {
        std::ifstream in(path, std::ios::binary);
        if (in) in.read(magic, sizeof magic);
    }
    if (std::memcmp(magic, kPackMagic, sizeof magic) == 0) return open_pack_source(path, {}, data);
    // Anything else goes to the GGUF reader, whose errors name the problem
    // (missing file, empty file, bad magic) precisely.
    return make_gguf_source(GgufFile::open(path));
}

}  // namespace dwell
