// JSON text -> Jinja values through nlohmann-json's SAX parser, which builds
// no tree of its own: the values are made directly, and a repeated key is
// found through a hash map instead of a scan of the object so far (a hostile
// object of many keys costs linear time, not quadratic).
#include "dwell/core/text/jinja_json.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dwell/core/base/error.hpp"

namespace dwell::jinja {
namespace {

class Builder {
public:
    using json = nlohmann::json;

    explicit Builder(std::string_view what) : what_(what) {}

    bool null() { return add(Value::none()); }
    bool boolean(bool b) { return add(Value(b)); }
    bool number_integer(json::number_integer_t v) { return add(Value(static_cast<int64_t>(v))); }
    bool number_unsigned(json::number_unsigned_t v) {
        if (v > static_cast<json::number_unsigned_t>(std::numeric_limits<int64_t>::max()))
            fail("the integer " + std::to_string(v) + " is larger than dwell's templates hold");
        return add(Value(static_cast<int64_t>(v)));
    }
    bool number_float(json::number_float_t v, const std::string& text) {
        if (!std::isfinite(v)) fail("the number " + text + " is out of range");
        return add(Value(static_cast<double>(v)));
    }
    bool string(std::string& s) { return add(Value(std::move(s))); }
    bool binary(json::binary_t&) {
        fail("binary values are not JSON text");
        return false;
    }
    bool start_object(std::size_t) { return open(Frame{Value(Object{}), {}, {}}); }
    bool key(std::string& k) {
        stack_.back().key = std::move(k);
        return true;
    }
    bool end_object() { return close(); }
    bool start_array(std::size_t) { return open(Frame{Value(Array{}), {}, {}}); }
    bool end_array() { return close(); }
    bool parse_error(std::size_t, const std::string&, const json::exception& e) {
        // Without the library's "[json.exception.parse_error.101] " tag.
        std::string message = e.what();
        if (message.starts_with("[json.exception.")) {
            const size_t end = message.find("] ");
            if (end != std::string::npos) message.erase(0, end + 2);
        }
        fail("not valid JSON: " + message);
        return false;
    }

    Value take() { return std::move(root_); }

private:
    struct Frame {
        Value value;
        std::string key;                                // the object's pending key
        std::unordered_map<std::string, size_t> index;  // the object's keys -> places
    };

    [[noreturn]] void fail(const std::string& why) const {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, std::string(what_) + ": " + why);
    }

    bool open(Frame frame) {
        if (static_cast<int>(stack_.size()) >= kMaxJsonDepth)
            fail("arrays and objects nest deeper than " + std::to_string(kMaxJsonDepth) +
                 " levels");
        stack_.push_back(std::move(frame));
        return true;
    }
    bool close() {
        // A value's depth is fixed when it is made, so a container is made
        // from its finished members: Value(Array/Object) computes it.
        Frame done = std::move(stack_.back());
        stack_.pop_back();
        Value v = done.value.is_array() ? Value(std::move(done.value.array()))
                                        : Value(std::move(done.value.object()));
        return add(std::move(v));
    }
    bool add(Value v) {
        if (stack_.empty()) {
            root_ = std::move(v);
            return true;
        }
        Frame& f = stack_.back();
        if (f.value.is_array()) {
            f.value.array().push_back(std::move(v));
            return true;
        }
        Object& o = f.value.object();
        // As Python's dict: a repeated key keeps its first place, takes the last value.
        const auto [it, fresh] = f.index.emplace(f.key, o.size());
        if (fresh) {
            o.emplace_back(std::move(f.key), std::move(v));
        } else {
            o[it->second].second = std::move(v);
        }
        return true;
    }

    std::string_view what_;
    std::vector<Frame> stack_;
    Value root_;
};

}  // namespace

Value parse_json(std::string_view text, std::string_view what) {
    Builder b(what);
    if (!nlohmann::json::sax_parse(text, &b))
        throw Error(DWELL_ERR_INVALID_ARGUMENT, std::string(what) + ": not valid JSON");
    return b.take();
}

}  // namespace dwell::jinja
