// Test helper, not a user command: writes a copy of a GGUF model file under
// another architecture name, as a model family of its own would ship it.
// general.architecture becomes NEW and every "<old>.*" key becomes
// "<NEW>.*"; the other keys (tokenizer, general.*) and every tensor are
// copied unchanged. --drop KEY leaves one key of the result out, to make a
// file a model plugin must refuse.
//
//   gguf_rename_architecture IN.gguf OUT.gguf NEW [--drop KEY]
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <string_view>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/tools/gguf_metadata_copy.hpp"
#include "dwell/tools/gguf_writer.hpp"

namespace {

using dwell::GgufFile;
using dwell::GgufType;
using dwell::GgufWriter;

// Writes the scalar value of `key` under `new_key`; architecture keys of
// Llama-style files are integers, floats, strings and booleans.
void copy_scalar(const GgufFile& in, const std::string& key, const std::string& new_key,
                 GgufWriter& out) {
    const GgufType type = *in.type_of(key);
    if (type == GgufType::STRING) {
        out.add_string(new_key, *in.get_string(key));
    } else if (type == GgufType::BOOL) {
        out.add_bool(new_key, *in.get_int(key) != 0);
    } else if (type == GgufType::FLOAT32 || type == GgufType::FLOAT64) {
        out.add_float32(new_key, static_cast<float>(*in.get_float(key)));
    } else if (type == GgufType::INT32 || type == GgufType::INT16 || type == GgufType::INT8) {
        out.add_int32(new_key, static_cast<int32_t>(*in.get_int(key)));
    } else if (type == GgufType::UINT64 || type == GgufType::INT64) {
        out.add_uint64(new_key, static_cast<uint64_t>(*in.get_int(key)));
    } else if (dwell::gguf_type_is_integer(type)) {
        out.add_uint32(new_key, static_cast<uint32_t>(*in.get_int(key)));
    } else {
        throw dwell::Error(DWELL_ERR_UNSUPPORTED,
                           in.path().string() + ": metadata key " + key +
                               " is an array, which this helper does not rename");
    }
}

void rename(const std::string& in_path, const std::string& out_path, const std::string& new_arch,
            const std::string& drop) {
    const GgufFile in = GgufFile::open(in_path);
    const auto arch = in.get_string("general.architecture");
    if (!arch) {
        throw dwell::Error(DWELL_ERR_CORRUPT,
                           in_path + ": metadata key general.architecture is missing");
    }
    const std::string old_prefix = std::string(*arch) + ".";
    const auto renamed = [&](std::string_view key) {
        return key == "general.architecture" || key.starts_with(old_prefix);
    };

    GgufWriter out(in.alignment());
    if (drop != "general.architecture") out.add_string("general.architecture", new_arch);
    dwell::copy_gguf_metadata(in, out,
                              [&](std::string_view key) { return !renamed(key) && key != drop; });
    for (const std::string& key : in.keys()) {
        if (key == "general.architecture" || !renamed(key)) continue;
        const std::string new_key = new_arch + "." + key.substr(old_prefix.size());
        if (new_key != drop) copy_scalar(in, key, new_key, out);
    }
    for (const GgufFile::TensorInfo& t : in.tensors()) {
        out.add_tensor(t.name, t.dtype, std::span<const int64_t>(t.ne, t.n_dims),
                       std::span<const uint8_t>(t.data, t.size));
    }
    out.write(out_path);
}

}  // namespace

int main(int argc, char** argv) {
    const bool with_drop = argc == 6 && std::string_view(argv[4]) == "--drop";
    if (argc != 4 && !with_drop) {
        std::fprintf(stderr, "usage: %s IN.gguf OUT.gguf NEW_ARCHITECTURE [--drop KEY]\n", argv[0]);
        return 2;
    }
    try {
        rename(argv[1], argv[2], argv[3], with_drop ? argv[5] : "");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
