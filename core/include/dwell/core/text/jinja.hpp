// A Jinja subset engine for the chat templates model files carry in
// tokenizer.chat_template, rendering them as Hugging Face's transformers
// does with Jinja2: trim_blocks and lstrip_blocks on, the loop-control
// extension (break, continue), `{% generation %}` blocks rendered as their
// body, tojson as transformers defines it (ensure_ascii off, keys in
// insertion order), raise_exception() and strftime_now() as globals.
//
// What it covers: text, {{ }}, {% %} and {# #} with whitespace control;
// if/elif/else, for (with `else`, an `if` filter, tuple targets, `loop`),
// set (also `set ns.attr`, tuples, set blocks), macro (defaults, keyword
// arguments), break/continue; literals, lists, dicts, tuples, slices,
// Python's operators and the filters, tests and string/list/dict methods
// chat templates use. Values follow Python's semantics and Python's str()
// when printed (True, None, ['a', 1]).
//
// A template is outside input: parsing and rendering are bounded (nesting
// depth, output bytes, loop iterations, macro calls) and every failure is
// one dwell::Error line naming the template position ("line 3 column 7").
//
// Thread-safety: a Template is immutable after parse(); render() may run on
// many threads at once. Values share their lists and dicts (Python's
// reference semantics) and are not synchronised: one context per render().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dwell::jinja {

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // insertion order, as Python's dict

// Arguments of a call: positional, then keyword.
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<Value(CallArgs&)>;

class Value {
public:
    enum class Kind { Undefined, None, Bool, Int, Float, String, Array, Object, Function };

    Value() = default;  // undefined
    static Value none();
    Value(bool b);
    Value(int v) : Value(static_cast<int64_t>(v)) {}
    Value(int64_t v);
    Value(double v);
    Value(std::string s);
    Value(const char* s) : Value(std::string(s)) {}
    Value(Array a);
    Value(Object o);
    static Value function(Function f);
    // A namespace(): the one kind of object `set ns.attr = ...` may change.
    static Value namespace_object(Object o);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
    bool is_array() const { return kind_ == Kind::Array; }
    bool is_object() const { return kind_ == Kind::Object; }
    bool is_namespace() const { return kind_ == Kind::Object && namespace_; }

    bool as_bool() const { return b_; }
    int64_t as_int() const { return i_; }
    double as_double() const { return kind_ == Kind::Int ? static_cast<double>(i_) : f_; }
    const std::string& as_string() const { return *s_; }
    const Array& array() const { return *a_; }
    Array& array() { return *a_; }
    const Object& object() const { return *o_; }
    Object& object() { return *o_; }
    const Function& as_function() const { return *fn_; }

    // Python's truth value.
    bool truthy() const;
    // The member `key` of an object; nullptr when absent or not an object.
    const Value* find(std::string_view key) const;
    // Sets an object's member, keeping its place when it exists.
    void set(const std::string& key, Value v);

    // Python's str() and repr() of the value. Past max_bytes of text they
    // throw std::length_error (shared lists can print far larger than they
    // are in memory).
    std::string str(size_t max_bytes = SIZE_MAX) const;
    std::string repr(size_t max_bytes = SIZE_MAX) const;
    // json.dumps(value, ensure_ascii=..., indent=...) (indent < 0: none);
    // throws std::length_error past max_bytes, std::invalid_argument for a
    // namespace (not serialisable, as in Python).
    std::string to_json(int indent = -1, bool ensure_ascii = false,
                        size_t max_bytes = SIZE_MAX) const;

    // Nesting depth of lists and dicts (0 for a scalar); the engine refuses
    // to build values deeper than it can print and compare recursively.
    int depth() const { return depth_; }
    // Whether a namespace is in it (or it is one): a namespace may not hold
    // one, which keeps values acyclic.
    bool holds_namespace() const { return holds_namespace_; }

    // Python's ==. Lists shared many times over compare in work bounded by
    // a budget; past it, std::length_error.
    friend bool operator==(const Value& a, const Value& b);

private:
    Kind kind_ = Kind::Undefined;
    bool b_ = false;
    bool namespace_ = false;
    bool holds_namespace_ = false;
    int depth_ = 0;
    int64_t i_ = 0;
    double f_ = 0;
    std::shared_ptr<std::string> s_;
    std::shared_ptr<Array> a_;
    std::shared_ptr<Object> o_;
    std::shared_ptr<Function> fn_;
};

// Bounds on one render (each exceeded bound is an error naming it).
struct Limits {
    size_t max_output_bytes = 8u << 20;
    int64_t max_loop_iterations = 1'000'000;  // all loops of a render together
    int max_call_depth = 64;                  // nested macro calls
};

struct Node;

class Template {
public:
    // Parses `source`; throws dwell::Error (DWELL_ERR_UNSUPPORTED) with one
    // line naming the position and what is wrong. Nesting deeper than 256
    // levels is refused.
    static Template parse(std::string_view source);

    // Renders with the variables of `context` (an object). Throws
    // dwell::Error (DWELL_ERR_INVALID_ARGUMENT) for a template error or
    // raise_exception(), naming the position.
    std::string render(const Value& context, const Limits& limits = {}) const;

private:
    std::shared_ptr<const Node> root_;
    std::shared_ptr<const std::string> source_;
};

}  // namespace dwell::jinja
