#include "model/graph_builder.hpp"

#include <stdexcept>

namespace dwell::model_kit {

std::string layer_tensor(int32_t layer, const char* what, const char* kind) {
    return "blk." + std::to_string(layer) + "." + what + "." + kind;
}

int32_t Builder::check(int32_t id, const std::string& what) const {
    if (id < 0) {
        const char* e = b_.last_error(b_.self);
        throw std::runtime_error(what + ": " + (e && *e ? e : "failed"));
    }
    return id;
}

int32_t Builder::input(const char* name, int64_t n) const {
    return check(b_.input(b_.self, name, DWELL_I32, 1, &n), std::string("input ") + name);
}

int32_t Builder::weight(const std::string& name) const {
    const int32_t id = b_.weight(b_.self, name.c_str());
    if (id < 0) throw std::runtime_error("weight " + name + " is missing from the model file");
    return id;
}

int32_t Builder::optional_weight(const std::string& name) const {
    const int32_t id = b_.weight(b_.self, name.c_str());
    return id < 0 ? -1 : id;
}

int32_t Builder::weight_rows(const std::string& name, int64_t first, int64_t n) const {
    // The kit also builds against older SDK headers (the frozen 1.0 sample).
#if DWELL_ABI_MINOR >= 5
    if (DWELL_HAS_FIELD(&b_, dwell_graph_builder, weight_rows) && b_.weight_rows != nullptr)
        return check(
            b_.weight_rows(b_.self, name.c_str(), first, n),
            "rows " + std::to_string(first) + ".." + std::to_string(first + n) + " of " + name);
#else
    (void)first;
    (void)n;
#endif
    throw std::runtime_error("weight " + name +
                             " is fused: its parts need a dwell host of ABI 1.5 or later");
}

int32_t Builder::op(dwell_op op, std::initializer_list<int32_t> in,
                    std::initializer_list<int32_t> ip, std::initializer_list<float> fp) const {
    return check(
        b_.op(b_.self, op, in.begin(), static_cast<int32_t>(in.size()), ip.begin(),
              static_cast<int32_t>(ip.size()), fp.begin(), static_cast<int32_t>(fp.size())),
        dwell_op_name(op));
}

int32_t Builder::reshape(int32_t t, std::initializer_list<int64_t> ne) const {
    return check(b_.reshape(b_.self, t, static_cast<int32_t>(ne.size()), ne.begin()), "reshape");
}

int32_t Builder::kv(int32_t layer, int32_t which) const {
    return check(b_.kv_cache(b_.self, layer, which), "kv cache of layer " + std::to_string(layer));
}

int32_t Builder::recurrent_state(int32_t layer, int32_t which,
                                 std::initializer_list<int64_t> ne) const {
    const std::string what =
        "recurrent state " + std::to_string(which) + " of layer " + std::to_string(layer);
#if DWELL_ABI_MINOR >= 6
    if (DWELL_HAS_FIELD(&b_, dwell_graph_builder, recurrent_state) && b_.recurrent_state != nullptr)
        return check(
            b_.recurrent_state(b_.self, layer, which, static_cast<int32_t>(ne.size()), ne.begin()),
            what);
#else
    (void)ne;
#endif
    throw std::runtime_error(what + ": hybrid models need a dwell host of ABI 1.6 or later");
}

int32_t Builder::constant(const std::string& name, std::initializer_list<int64_t> ne,
                          std::span<const float> data) const {
    const std::string what = "constant " + name;
#if DWELL_ABI_MINOR >= 8
    if (DWELL_HAS_FIELD(&b_, dwell_graph_builder, constant) && b_.constant != nullptr)
        return check(b_.constant(b_.self, name.c_str(), static_cast<int32_t>(ne.size()), ne.begin(),
                                 data.data()),
                     what);
#else
    (void)ne;
    (void)data;
#endif
    throw std::runtime_error(what +
                             ": this model's RoPE scaling needs a dwell host of ABI 1.8 or "
                             "later");
}

void Builder::layer(int32_t l) const {
    b_.set_layer(b_.self, l);
}

void Builder::output(int32_t t) const {
    if (b_.set_output(b_.self, t) != DWELL_OK) check(-1, "set_output");
}

}  // namespace dwell::model_kit
