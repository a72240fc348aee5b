#include "dwell/tools/gguf_metadata_copy.hpp"

#include <limits>
#include <string>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/tools/gguf_writer.hpp"

namespace dwell {

namespace {

bool is_unsigned(GgufType t) {
    return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 ||
           t == GgufType::UINT64;
}

}  // namespace

size_t copy_gguf_metadata(const GgufFile& from, GgufWriter& to,
                          const std::function<bool(std::string_view)>& keep) {
    size_t copied = 0;
    for (const std::string& key : from.keys()) {
        if (key == "general.alignment" || !keep(key))
            continue;  // the writer sets its own alignment
        const GgufType type = *from.type_of(key);
        auto unsupported = [&](const std::string& what) {
            return Error(DWELL_ERR_UNSUPPORTED, from.path().string() + ": metadata key " + key +
                                                    " holds " + what + ", which cannot be copied");
        };
        if (type == GgufType::STRING) {
            to.add_string(key, *from.get_string(key));
        } else if (type == GgufType::BOOL) {
            to.add_bool(key, *from.get_int(key) != 0);
        } else if (type == GgufType::FLOAT32 || type == GgufType::FLOAT64) {
            to.add_float32(key, static_cast<float>(*from.get_float(key)));
        } else if (type == GgufType::UINT64) {
            // All 64 bits: get_int has no value for those above 2^63 - 1.
            to.add_uint64(key, *from.get_uint64(key));
        } else if (gguf_type_is_integer(type)) {
            const int64_t v = *from.get_int(key);
            if (type == GgufType::INT64) {
                to.add_uint64(key, static_cast<uint64_t>(v));
            } else if (is_unsigned(type)) {
                to.add_uint32(key, static_cast<uint32_t>(v));
            } else {
                to.add_int32(key, static_cast<int32_t>(v));
            }
        } else if (type == GgufType::ARRAY) {
            const GgufType elem = *from.array_type(key);
            if (elem == GgufType::STRING) {
                const auto views = from.get_string_array(key);
                to.add_string_array(key, std::vector<std::string>(views.begin(), views.end()));
            } else if (elem == GgufType::FLOAT32 || elem == GgufType::FLOAT64) {
                to.add_float32_array(key, from.get_float_array(key));
            } else if (gguf_type_is_integer(elem) || elem == GgufType::BOOL) {
                to.add_int32_array(key,
                                   from.get_int_array(key));  // throws if a value exceeds int32
            } else {
                throw unsupported("an array of nested arrays");
            }
        } else {
            throw unsupported("a value of unknown type");
        }
        ++copied;
    }
    return copied;
}

}  // namespace dwell
