// Adapts GgufFile to the plugin ABI's dwell_metadata table.
#include <algorithm>
#include <optional>

#include "dwell/core/formats/gguf_file.hpp"

namespace dwell {

namespace {
const GgufFile& file_of(void* self) {
    return *static_cast<const GgufFile*>(self);
}
}  // namespace

dwell_metadata gguf_metadata(const GgufFile& file) {
    dwell_metadata m{};
    m.struct_size = sizeof(m);
    m.self = const_cast<GgufFile*>(&file);
    m.get_int = [](void* self, const char* key, int64_t* out) -> int32_t {
        auto v = key ? file_of(self).get_int(key) : std::nullopt;
        if (v && out) *out = *v;
        return v.has_value();
    };
    m.get_float = [](void* self, const char* key, double* out) -> int32_t {
        auto v = key ? file_of(self).get_float(key) : std::nullopt;
        if (v && out) *out = *v;
        return v.has_value();
    };
    m.get_string = [](void* self, const char* key, const char** out, size_t* len) -> int32_t {
        auto v = key ? file_of(self).get_string(key) : std::nullopt;
        if (v) {
            if (out) *out = v->data();
            if (len) *len = v->size();
        }
        return v.has_value();
    };
    m.get_array_length = [](void* self, const char* key, uint64_t* out) -> int32_t {
        auto v = key ? file_of(self).array_length(key) : std::nullopt;
        if (v && out) *out = *v;
        return v.has_value();
    };
    m.get_tensor = [](void* self, const char* name, dwell_dtype* dtype, int32_t* n_dims,
                      int64_t ne[DWELL_MAX_DIMS]) -> int32_t {
        const auto* t = name ? file_of(self).find_tensor(name) : nullptr;
        if (!t) return 0;
        if (dtype) *dtype = t->dtype;
        if (n_dims) *n_dims = t->n_dims;
        if (ne) std::copy(t->ne, t->ne + DWELL_MAX_DIMS, ne);
        return 1;
    };
    return m;
}

}  // namespace dwell
