// Rendering a parsed Jinja template: statements, expressions with Python's
// semantics, and the filters, tests, methods and globals chat templates use.
// Bounded by Limits (output bytes, loop iterations, macro depth); the tree's
// depth is bounded by the parser.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>

#include "dwell/core/base/error.hpp"
#include "dwell/core/text/jinja_ast.hpp"

namespace dwell::jinja {
namespace {

[[noreturn]] void fail(size_t pos, const std::string& what) {
    throw SyntaxError{pos, what};
}

const char* kind_name(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Undefined:
            return "undefined";
        case Value::Kind::None:
            return "none";
        case Value::Kind::Bool:
            return "bool";
        case Value::Kind::Int:
            return "int";
        case Value::Kind::Float:
            return "float";
        case Value::Kind::String:
            return "string";
        case Value::Kind::Array:
            return "list";
        case Value::Kind::Object:
            return "dict";
        case Value::Kind::Function:
            return "function";
    }
    return "?";
}

// UTF-8 characters of a string (Python indexes strings by character).
std::vector<std::string> characters(const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
        size_t n = 1;
        const auto b = static_cast<unsigned char>(s[i]);
        if (b >= 0xF0)
            n = 4;
        else if (b >= 0xE0)
            n = 3;
        else if (b >= 0xC0)
            n = 2;
        n = std::min(n, s.size() - i);
        out.push_back(s.substr(i, n));
        i += n;
    }
    return out;
}
bool ascii(const std::string& s) {
    return std::all_of(s.begin(), s.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}
int64_t length_of(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::String:
            return ascii(v.as_string()) ? static_cast<int64_t>(v.as_string().size())
                                        : static_cast<int64_t>(characters(v.as_string()).size());
        case Value::Kind::Array:
            return static_cast<int64_t>(v.array().size());
        case Value::Kind::Object:
            return static_cast<int64_t>(v.object().size());
        case Value::Kind::Undefined:
            return 0;
        default:
            return -1;
    }
}

const std::string kSpace = " \t\n\r\f\v";
std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
    size_t a = 0, b = s.size();
    if (left)
        while (a < b && chars.find(s[a]) != std::string::npos) ++a;
    if (right)
        while (b > a && chars.find(s[b - 1]) != std::string::npos) --b;
    return s.substr(a, b - a);
}
// Case mapping of ASCII and of the two-byte UTF-8 letters with a plain
// offset (Latin-1, Greek, Cyrillic), as Python maps them; other characters
// stay as they are.
uint32_t map_case(uint32_t cp, bool to_upper) {
    struct Range {
        uint32_t lo, hi;
        int32_t delta;  // upper -> lower
    };
    static constexpr Range kRanges[] = {{0x41, 0x5A, 32},   {0xC0, 0xD6, 32},   {0xD8, 0xDE, 32},
                                        {0x391, 0x3A1, 32}, {0x3A3, 0x3AB, 32}, {0x410, 0x42F, 32},
                                        {0x400, 0x40F, 80}};
    for (const Range& r : kRanges) {
        if (to_upper && cp >= r.lo + static_cast<uint32_t>(r.delta) &&
            cp <= r.hi + static_cast<uint32_t>(r.delta))
            return cp - static_cast<uint32_t>(r.delta);
        if (!to_upper && cp >= r.lo && cp <= r.hi) return cp + static_cast<uint32_t>(r.delta);
    }
    return cp;
}
std::string change_case(const std::string& s, bool to_upper) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            out += static_cast<char>(map_case(b, to_upper));
        } else if ((b >> 5) == 6 && i + 1 < s.size() &&
                   (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) {
            const uint32_t cp = map_case(
                ((b & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu), to_upper);
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
            ++i;
        } else {
            out += static_cast<char>(b);
        }
    }
    return out;
}
std::string lower(const std::string& s) {
    return change_case(s, false);
}
std::string upper(const std::string& s) {
    return change_case(s, true);
}
std::string title(const std::string& s) {
    std::string out = s;
    bool start = true;
    for (char& c : out) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalpha(u)) {
            c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
            start = false;
        } else {
            start = u < 0x80 && !std::isalnum(u);
        }
    }
    return out;
}
std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
    std::string out;
    if (from.empty()) {  // Python inserts `to` around every character
        const auto chars = characters(s);
        int64_t done = 0;
        for (const auto& c : chars) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            out += c;
            if (out.size() > (8u << 20) * 8)
                throw std::length_error("replace() grows the string past the output limit");
        }
        if (count < 0 || done < count) out += to;
        return out;
    }
    size_t p = 0;
    int64_t done = 0;
    for (;;) {
        const size_t q = s.find(from, p);
        if (q == std::string::npos || (count >= 0 && done >= count)) break;
        out.append(s, p, q - p).append(to);
        if (out.size() >
            (8u << 20) * 8)  // far past any output limit; the caller checks the exact one
            throw std::length_error("replace() grows the string past the output limit");
        p = q + from.size();
        ++done;
    }
    return out.append(s, p);
}
std::vector<std::string> split(const std::string& s, const Value& sep, int64_t maxsplit) {
    std::vector<std::string> out;
    if (sep.is_none() || sep.is_undefined()) {
        size_t p = 0;
        for (;;) {
            while (p < s.size() && kSpace.find(s[p]) != std::string::npos) ++p;
            if (p >= s.size()) break;
            if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
                out.push_back(strip(s.substr(p), kSpace, false, true));
                break;
            }
            size_t q = p;
            while (q < s.size() && kSpace.find(s[q]) == std::string::npos) ++q;
            out.push_back(s.substr(p, q - p));
            p = q;
        }
        return out;
    }
    const std::string& d = sep.as_string();
    if (d.empty()) throw std::invalid_argument("empty separator");
    size_t p = 0;
    for (;;) {
        const size_t q = s.find(d, p);
        if (q == std::string::npos ||
            (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit))
            break;
        out.push_back(s.substr(p, q - p));
        p = q + d.size();
    }
    out.push_back(s.substr(p));
    return out;
}

// Python's slice indices for a sequence of n elements.
std::vector<int64_t> slice_indices(int64_t n, const Value& start, const Value& stop,
                                   const Value& step_v, size_t pos) {
    const auto given = [](const Value& v) { return !v.is_undefined() && !v.is_none(); };
    for (const Value* v : {&start, &stop, &step_v})
        if (given(*v) && v->kind() != Value::Kind::Int) fail(pos, "slice indices must be integers");
    const int64_t step = given(step_v) ? step_v.as_int() : 1;
    if (step == 0) fail(pos, "slice step cannot be zero");
    const auto clamp = [&](const Value& v, int64_t dflt) {
        if (!given(v)) return dflt;
        int64_t i = v.as_int();
        if (i < 0) i += n;
        if (step > 0) return std::clamp<int64_t>(i, 0, n);
        return std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t a = clamp(start, step > 0 ? 0 : n - 1);
    const int64_t b = clamp(stop, step > 0 ? n : -1);
    std::vector<int64_t> out;
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step) out.push_back(i);
    return out;
}

struct Scope {
    Scope* parent = nullptr;
    std::vector<std::pair<std::string, Value>> vars;
    Value* find(const std::string& name) {
        for (Scope* s = this; s; s = s->parent)
            for (auto& [k, v] : s->vars)
                if (k == name) return &v;
        return nullptr;
    }
    void set(const std::string& name, Value v) {
        for (auto& [k, old] : vars)
            if (k == name) {
                old = std::move(v);
                return;
            }
        vars.emplace_back(name, std::move(v));
    }
};

enum class Flow { Normal, Break, Continue };

constexpr int kMaxValueDepth = 128;

class Renderer {
public:
    Renderer(const Limits& limits, Scope& root) : limits_(limits), root_(root) {}

    Flow exec(const std::vector<NodeP>& nodes, Scope& scope, std::string& out) {
        for (const NodeP& n : nodes) {
            const Flow f = exec(*n, scope, out);
            if (f != Flow::Normal) return f;
        }
        return Flow::Normal;
    }

    // Errors from values and helpers (too long, wrong type) become errors
    // at the expression's position.
    Value eval(const Expr& e, Scope& scope) {
        try {
            return eval_node(e, scope);
        } catch (const std::length_error& x) {
            fail(e.pos, x.what());
        } catch (const std::invalid_argument& x) {
            fail(e.pos, x.what());
        } catch (const std::out_of_range& x) {
            fail(e.pos, x.what());
        }
    }

private:
    Value eval_node(const Expr& e, Scope& scope);
    std::string text(const Value& v) const { return v.str(limits_.max_output_bytes); }
    Value checked(Value v, size_t pos) const {
        if (v.depth() > kMaxValueDepth)
            fail(pos,
                 "a value is nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
        return v;
    }
    void emit(std::string& out, const std::string& text, size_t pos) {
        if (out.size() + text.size() > limits_.max_output_bytes)
            fail(pos, "the output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
        out += text;
    }
    void count_iteration(size_t pos) {
        if (++iterations_ > limits_.max_loop_iterations)
            fail(pos, "loops ran more than " + std::to_string(limits_.max_loop_iterations) +
                          " iterations");
    }

    Flow exec(const Node& n, Scope& scope, std::string& out);
    void exec_for(const Node& n, Scope& scope, std::string& out);
    void assign(const std::vector<std::string>& targets, const Value& v, Scope& scope, size_t pos);
    Value make_macro(const Node& n);
    Value attribute(const Value& obj, const std::string& name, size_t pos);
    Value item(const Value& obj, const Value& key, size_t pos);
    Value call(const Expr& e, Scope& scope);
    Value method(const Value& self, const std::string& name, CallArgs& a, size_t pos);
    Value filter(const std::string& name, const Value& v, CallArgs& a, Scope& scope, size_t pos);
    bool test(const std::string& name, const Value& v, const std::vector<Value>& args, size_t pos);
    Value binary(const std::string& op, const Value& a, const Value& b, size_t pos);
    Value global(const std::string& name);
    std::vector<Value> iterate(const Value& v, size_t pos);
    int compare(const Value& a, const Value& b, size_t pos);

    const Limits& limits_;
    Scope& root_;
    int64_t iterations_ = 0;
    int64_t compare_work_ = 0;
    int depth_ = 0;
};

Flow Renderer::exec(const Node& n, Scope& scope, std::string& out) {
    switch (n.type) {
        case Node::T::Block:
            return exec(n.body, scope, out);
        case Node::T::Text:
            emit(out, n.text, n.pos);
            return Flow::Normal;
        case Node::T::Output: {
            const Value v = eval(*n.expr, scope);
            std::string t;
            try {
                t = text(v);
            } catch (const std::length_error& x) {
                fail(n.pos, x.what());
            }
            emit(out, t, n.pos);
            return Flow::Normal;
        }
        case Node::T::If:
            for (const auto& [cond, body] : n.branches) {
                if (!cond || eval(*cond, scope).truthy()) return exec(body, scope, out);
            }
            return Flow::Normal;
        case Node::T::For:
            exec_for(n, scope, out);
            return Flow::Normal;
        case Node::T::Set: {
            Value v = eval(*n.expr, scope);
            if (!n.attr.empty()) {
                Value* ns = scope.find(n.targets[0]);
                if (ns == nullptr || !ns->is_namespace())
                    fail(n.pos,
                         "'" + n.targets[0] +
                             "' is not a namespace(); only a namespace's attributes can be set");
                // A namespace inside a namespace could make a cycle.
                if (v.holds_namespace())
                    fail(n.pos, "a namespace() attribute may not hold a namespace");
                ns->set(n.attr, std::move(v));
                checked(*ns, n.pos);
            } else {
                assign(n.targets, v, scope, n.pos);
            }
            return Flow::Normal;
        }
        case Node::T::SetBlock: {
            std::string text;
            Scope inner{&scope, {}};
            exec(n.body, inner, text);
            scope.set(n.targets[0], Value(std::move(text)));
            return Flow::Normal;
        }
        case Node::T::Macro:
            scope.set(n.targets[0], make_macro(n));
            return Flow::Normal;
        case Node::T::Break:
            return Flow::Break;
        case Node::T::Continue:
            return Flow::Continue;
        case Node::T::FilterBlock: {
            std::string text;
            Scope inner{&scope, {}};
            exec(n.body, inner, text);
            CallArgs a;
            if (n.expr) {
                for (const ExprP& x : n.expr->args) a.positional.push_back(eval(*x, scope));
                for (const auto& [k, x] : n.expr->kwargs)
                    a.keyword.emplace_back(k, eval(*x, scope));
            }
            emit(out,
                 filter(n.targets[0], Value(std::move(text)), a, scope, n.pos)
                     .str(limits_.max_output_bytes),
                 n.pos);
            return Flow::Normal;
        }
    }
    return Flow::Normal;
}

void Renderer::assign(const std::vector<std::string>& targets, const Value& v, Scope& scope,
                      size_t pos) {
    if (targets.size() == 1) {
        scope.set(targets[0], v);
        return;
    }
    const std::vector<Value> items = iterate(v, pos);
    if (items.size() != targets.size())
        fail(pos, "cannot unpack " + std::to_string(items.size()) + " values into " +
                      std::to_string(targets.size()) + " names");
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
}

std::vector<Value> Renderer::iterate(const Value& v, size_t pos) {
    switch (v.kind()) {
        case Value::Kind::Undefined:
            return {};
        case Value::Kind::Array:
            return v.array();
        case Value::Kind::Object: {
            std::vector<Value> keys;
            for (const auto& [k, x] : v.object()) keys.emplace_back(k);
            return keys;
        }
        case Value::Kind::String: {
            std::vector<Value> out;
            for (auto& c : characters(v.as_string())) out.emplace_back(std::move(c));
            return out;
        }
        default:
            fail(pos, std::string("a ") + kind_name(v) + " cannot be iterated over");
    }
}

void Renderer::exec_for(const Node& n, Scope& scope, std::string& out) {
    std::vector<Value> items = iterate(eval(*n.expr, scope), n.expr->pos);
    if (n.cond) {
        std::vector<Value> kept;
        for (Value& v : items) {
            count_iteration(n.pos);
            Scope s{&scope, {}};
            assign(n.targets, v, s, n.pos);
            if (eval(*n.cond, s).truthy()) kept.push_back(std::move(v));
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        Scope s{&scope, {}};
        exec(n.else_body, s, out);
        return;
    }
    const auto len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
        count_iteration(n.pos);
        Scope s{&scope, {}};
        Object loop{{"index", Value(i + 1)},
                    {"index0", Value(i)},
                    {"revindex", Value(len - i)},
                    {"revindex0", Value(len - i - 1)},
                    {"first", Value(i == 0)},
                    {"last", Value(i == len - 1)},
                    {"length", Value(len)},
                    {"depth", Value(int64_t{1})},
                    {"depth0", Value(int64_t{0})},
                    {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value()},
                    {"nextitem", i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value()}};
        loop.emplace_back("cycle", Value::function([i](CallArgs& a) {
                              if (a.positional.empty()) return Value();
                              return a.positional[static_cast<size_t>(i) % a.positional.size()];
                          }));
        s.set("loop", Value(std::move(loop)));
        assign(n.targets, items[static_cast<size_t>(i)], s, n.pos);
        if (exec(n.body, s, out) == Flow::Break) break;
    }
}

Value Renderer::make_macro(const Node& n) {
    const Node* node = &n;
    return Value::function([this, node](CallArgs& a) -> Value {
        if (depth_ >= limits_.max_call_depth)
            fail(node->pos, "macro calls are nested deeper than " +
                                std::to_string(limits_.max_call_depth) + " levels");
        if (a.positional.size() > node->params.size())
            fail(node->pos, "macro '" + node->targets[0] + "' takes " +
                                std::to_string(node->params.size()) + " arguments, " +
                                std::to_string(a.positional.size()) + " given");
        Scope s{&root_, {}};
        for (size_t i = 0; i < node->params.size(); ++i) {
            const auto& [pname, def] = node->params[i];
            Value v;
            bool have = false;
            if (i < a.positional.size()) {
                v = a.positional[i];
                have = true;
            }
            for (const auto& [k, kv] : a.keyword)
                if (k == pname) {
                    v = kv;
                    have = true;
                }
            if (!have && def) v = eval(*def, s);
            s.set(pname, v);
        }
        for (const auto& kw : a.keyword) {
            const std::string& k = kw.first;
            const bool known = std::any_of(node->params.begin(), node->params.end(),
                                           [&](const auto& p) { return p.first == k; });
            if (!known)
                fail(node->pos, "macro '" + node->targets[0] + "' has no argument '" + k + "'");
        }
        ++depth_;
        std::string text;
        try {
            exec(node->body, s, text);
        } catch (...) {
            --depth_;
            throw;
        }
        --depth_;
        return Value(std::move(text));
    });
}

Value Renderer::global(const std::string& name) {
    if (name == "range") {
        return Value::function([this](CallArgs& a) -> Value {
            int64_t start = 0, stop = 0, step = 1;
            for (const Value& v : a.positional)
                if (v.kind() != Value::Kind::Int && v.kind() != Value::Kind::Bool)
                    throw std::invalid_argument("range() takes integers");
            if (a.positional.size() == 1)
                stop = a.positional[0].as_int();
            else if (a.positional.size() >= 2) {
                start = a.positional[0].as_int();
                stop = a.positional[1].as_int();
                if (a.positional.size() >= 3) step = a.positional[2].as_int();
            } else
                throw std::invalid_argument("range() takes 1 to 3 arguments");
            if (step == 0) throw std::invalid_argument("range() step cannot be zero");
            Array out;
            for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                if (static_cast<int64_t>(out.size()) >= limits_.max_loop_iterations)
                    throw std::invalid_argument("range() is longer than the loop limit");
                out.emplace_back(i);
            }
            return Value(std::move(out));
        });
    }
    if (name == "namespace" || name == "dict") {
        const bool ns = name == "namespace";
        return Value::function([ns](CallArgs& a) -> Value {
            Object o;
            for (const Value& p : a.positional)
                if (p.is_object())
                    for (const auto& kv : p.object()) o.push_back(kv);
            for (auto& kv : a.keyword) o.push_back(kv);
            return ns ? Value::namespace_object(std::move(o)) : Value(std::move(o));
        });
    }
    if (name == "raise_exception") {
        return Value::function([](CallArgs& a) -> Value {
            throw std::runtime_error(
                "the template raised an exception: " +
                (a.positional.empty() ? std::string() : a.positional[0].str()));
        });
    }
    if (name == "strftime_now") {
        return Value::function([](CallArgs& a) -> Value {
            if (a.positional.empty() || !a.positional[0].is_string())
                throw std::invalid_argument("strftime_now() takes a format string");
            const std::time_t now = std::time(nullptr);
            std::tm tm{};
            localtime_r(&now, &tm);
            char buf[256];
            const size_t n =
                std::strftime(buf, sizeof buf, a.positional[0].as_string().c_str(), &tm);
            return Value(std::string(buf, n));
        });
    }
    return Value();
}

Value Renderer::attribute(const Value& obj, const std::string& name, size_t pos) {
    if (obj.is_undefined()) fail(pos, "'" + name + "' of an undefined value");
    if (obj.is_object()) {
        if (const Value* v = obj.find(name)) return *v;
    }
    return Value();
}

Value Renderer::item(const Value& obj, const Value& key, size_t pos) {
    switch (obj.kind()) {
        case Value::Kind::Undefined:
            fail(pos, "subscript of an undefined value");
        case Value::Kind::Object:
            if (key.is_string()) {
                if (const Value* v = obj.find(key.as_string())) return *v;
            }
            return Value();
        case Value::Kind::Array:
        case Value::Kind::String: {
            if (key.kind() != Value::Kind::Int) return Value();
            const int64_t n = length_of(obj);
            int64_t i = key.as_int();
            if (i < 0) i += n;
            if (i < 0 || i >= n) return Value();
            if (obj.is_array()) return obj.array()[static_cast<size_t>(i)];
            if (ascii(obj.as_string()))
                return Value(obj.as_string().substr(static_cast<size_t>(i), 1));
            return Value(characters(obj.as_string())[static_cast<size_t>(i)]);
        }
        default:
            return Value();
    }
}

int Renderer::compare(const Value& a, const Value& b, size_t pos) {
    if (++compare_work_ > 10'000'000) fail(pos, "ordering the values takes too long");
    const auto num = [](const Value& v) {
        return v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Float ||
               v.kind() == Value::Kind::Bool;
    };
    const auto d = [](const Value& v) {
        return v.kind() == Value::Kind::Bool ? (v.as_bool() ? 1.0 : 0.0) : v.as_double();
    };
    if (num(a) && num(b)) {
        if (a.kind() == Value::Kind::Int && b.kind() == Value::Kind::Int)
            return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
        return d(a) < d(b) ? -1 : d(a) > d(b) ? 1 : 0;
    }
    if (a.is_string() && b.is_string())
        return a.as_string().compare(b.as_string()) < 0 ? -1
               : a.as_string() == b.as_string()         ? 0
                                                        : 1;
    if (a.is_array() && b.is_array()) {
        const auto& x = a.array();
        const auto& y = b.array();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i)
            if (const int c = compare(x[i], y[i], pos)) return c;
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    fail(pos, std::string("cannot order a ") + kind_name(a) + " and a " + kind_name(b));
}

Value Renderer::binary(const std::string& op, const Value& a, const Value& b, size_t pos) {
    using K = Value::Kind;
    const auto intlike = [](const Value& v) { return v.kind() == K::Int || v.kind() == K::Bool; };
    const auto ival = [](const Value& v) {
        return v.kind() == K::Bool ? int64_t{v.as_bool()} : v.as_int();
    };
    const auto num = [&](const Value& v) { return intlike(v) || v.kind() == K::Float; };
    const auto dval = [&](const Value& v) {
        return v.kind() == K::Float ? v.as_double() : static_cast<double>(ival(v));
    };
    const auto bad = [&]() -> Value {
        fail(pos,
             "unsupported operand types for " + op + ": " + kind_name(a) + " and " + kind_name(b));
    };
    if (op == "~") {
        std::string s = text(a);
        s += text(b);
        if (s.size() > limits_.max_output_bytes)
            fail(pos, "a string grows past " + std::to_string(limits_.max_output_bytes) + " bytes");
        return Value(std::move(s));
    }
    if (op == "==") return Value(a == b);
    if (op == "!=") return Value(!(a == b));
    if (op == "<") return Value(compare(a, b, pos) < 0);
    if (op == ">") return Value(compare(a, b, pos) > 0);
    if (op == "<=") return Value(compare(a, b, pos) <= 0);
    if (op == ">=") return Value(compare(a, b, pos) >= 0);
    if (op == "in" || op == "not in") {
        bool found = false;
        if (b.is_string()) {
            if (!a.is_string())
                fail(pos, std::string("'in <string>' needs a string on the left, not a ") +
                              kind_name(a));
            found = b.as_string().find(a.as_string()) != std::string::npos;
        } else if (b.is_array()) {
            found = std::find(b.array().begin(), b.array().end(), a) != b.array().end();
        } else if (b.is_object()) {
            found = a.is_string() && b.find(a.as_string()) != nullptr;
        } else if (!b.is_undefined()) {
            fail(pos, std::string("a ") + kind_name(b) + " cannot be searched with 'in'");
        }
        return Value(op == "in" ? found : !found);
    }
    if (op == "+") {
        if (a.is_string() && b.is_string()) {
            if (a.as_string().size() + b.as_string().size() > limits_.max_output_bytes)
                fail(pos,
                     "a string grows past " + std::to_string(limits_.max_output_bytes) + " bytes");
            return Value(a.as_string() + b.as_string());
        }
        if (a.is_array() && b.is_array()) {
            if (static_cast<int64_t>(a.array().size() + b.array().size()) >
                limits_.max_loop_iterations)
                fail(pos,
                     "a list grows past " + std::to_string(limits_.max_loop_iterations) + " items");
            Array out = a.array();
            out.insert(out.end(), b.array().begin(), b.array().end());
            return Value(std::move(out));
        }
    }
    if (op == "*" && (((a.is_string() || a.is_array()) && intlike(b)) ||
                      (intlike(a) && (b.is_string() || b.is_array())))) {
        const Value& seq = intlike(b) ? a : b;
        const int64_t times = std::max<int64_t>(0, intlike(b) ? ival(b) : ival(a));
        const int64_t unit =
            seq.is_string() ? static_cast<int64_t>(seq.as_string().size()) : length_of(seq);
        if (unit > 0 && times > static_cast<int64_t>(limits_.max_output_bytes) / unit)
            fail(pos, "a repeated sequence grows past the output limit");
        if (seq.is_string()) {
            std::string out;
            for (int64_t i = 0; i < times; ++i) out += seq.as_string();
            return Value(std::move(out));
        }
        Array out;
        for (int64_t i = 0; i < times; ++i)
            out.insert(out.end(), seq.array().begin(), seq.array().end());
        return Value(std::move(out));
    }
    if (!num(a) || !num(b)) return bad();
    const bool ints = intlike(a) && intlike(b);
    if (op == "+") {
        if (ints) {
            int64_t r;
            if (!__builtin_add_overflow(ival(a), ival(b), &r)) return Value(r);
        }
        return Value(dval(a) + dval(b));
    }
    if (op == "-") {
        if (ints) {
            int64_t r;
            if (!__builtin_sub_overflow(ival(a), ival(b), &r)) return Value(r);
        }
        return Value(dval(a) - dval(b));
    }
    if (op == "*") {
        if (ints) {
            int64_t r;
            if (!__builtin_mul_overflow(ival(a), ival(b), &r)) return Value(r);
        }
        return Value(dval(a) * dval(b));
    }
    if (op == "/") {
        if (dval(b) == 0) fail(pos, "division by zero");
        return Value(dval(a) / dval(b));
    }
    if (op == "//" || op == "%") {
        if (dval(b) == 0) fail(pos, op == "%" ? "modulo by zero" : "division by zero");
        if (ints) {
            const int64_t x = ival(a), y = ival(b);
            if (x == INT64_MIN && y == -1)
                return op == "%" ? Value(int64_t{0}) : Value(-static_cast<double>(x));
            int64_t q = x / y, r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) {
                --q;
                r += y;
            }
            return op == "//" ? Value(q) : Value(r);
        }
        const double x = dval(a), y = dval(b);
        const double q = std::floor(x / y);
        return op == "//" ? Value(q) : Value(x - q * y);
    }
    if (op == "**") {
        if (ints && ival(b) >= 0) {
            int64_t r = 1, base = ival(a);
            for (int64_t e = ival(b); e > 0; --e)
                if (__builtin_mul_overflow(r, base, &r)) fail(pos, "the power overflows");
            return Value(r);
        }
        return Value(std::pow(dval(a), dval(b)));
    }
    return bad();
}

Value Renderer::eval_node(const Expr& e, Scope& scope) {
    switch (e.type) {
        case Expr::T::Literal:
            return e.literal;
        case Expr::T::Name: {
            if (Value* v = scope.find(e.name)) return *v;
            return global(e.name);
        }
        case Expr::T::List:
        case Expr::T::Tuple: {
            Array out;
            for (const ExprP& x : e.args) out.push_back(eval(*x, scope));
            return checked(Value(std::move(out)), e.pos);
        }
        case Expr::T::Dict: {
            Value out{Object{}};
            for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
                const Value k = eval(*e.args[i], scope);
                if (!k.is_string()) fail(e.args[i]->pos, "dict keys must be strings here");
                out.set(k.as_string(), eval(*e.args[i + 1], scope));
            }
            return checked(std::move(out), e.pos);
        }
        case Expr::T::Attr:
            return attribute(eval(*e.args[0], scope), e.name, e.pos);
        case Expr::T::Item:
            return item(eval(*e.args[0], scope), eval(*e.args[1], scope), e.pos);
        case Expr::T::Slice: {
            const Value obj = eval(*e.args[0], scope);
            Value parts[3];
            for (int i = 0; i < 3; ++i)
                if (e.args[1 + i]) parts[i] = eval(*e.args[1 + i], scope);
            if (obj.is_array()) {
                Array out;
                for (int64_t i : slice_indices(length_of(obj), parts[0], parts[1], parts[2], e.pos))
                    out.push_back(obj.array()[static_cast<size_t>(i)]);
                return Value(std::move(out));
            }
            if (obj.is_string()) {
                const auto chars = characters(obj.as_string());
                std::string out;
                for (int64_t i : slice_indices(static_cast<int64_t>(chars.size()), parts[0],
                                               parts[1], parts[2], e.pos))
                    out += chars[static_cast<size_t>(i)];
                return Value(std::move(out));
            }
            fail(e.pos, std::string("a ") + kind_name(obj) + " cannot be sliced");
        }
        case Expr::T::Call:
            return call(e, scope);
        case Expr::T::Filter: {
            CallArgs a;
            for (size_t i = 1; i < e.args.size(); ++i)
                a.positional.push_back(eval(*e.args[i], scope));
            for (const auto& [k, x] : e.kwargs) a.keyword.emplace_back(k, eval(*x, scope));
            return filter(e.name, eval(*e.args[0], scope), a, scope, e.pos);
        }
        case Expr::T::Test: {
            std::vector<Value> args;
            for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i], scope));
            const bool r = test(e.name, eval(*e.args[0], scope), args, e.pos);
            return Value(e.negated ? !r : r);
        }
        case Expr::T::Neg:
        case Expr::T::Pos: {
            const Value v = eval(*e.args[0], scope);
            if (v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool) {
                const int64_t i = v.kind() == Value::Kind::Bool ? int64_t{v.as_bool()} : v.as_int();
                if (e.type == Expr::T::Pos) return Value(i);
                if (i == INT64_MIN) return Value(-static_cast<double>(i));
                return Value(-i);
            }
            if (v.kind() == Value::Kind::Float)
                return Value(e.type == Expr::T::Neg ? -v.as_double() : v.as_double());
            fail(e.pos, std::string("bad operand type for unary minus: ") + kind_name(v));
        }
        case Expr::T::Not:
            return Value(!eval(*e.args[0], scope).truthy());
        case Expr::T::Binary: {
            if (e.name == "and") {
                Value a = eval(*e.args[0], scope);
                return a.truthy() ? eval(*e.args[1], scope) : a;
            }
            if (e.name == "or") {
                Value a = eval(*e.args[0], scope);
                return a.truthy() ? a : eval(*e.args[1], scope);
            }
            const Value a = eval(*e.args[0], scope);
            const Value b = eval(*e.args[1], scope);
            return binary(e.name, a, b, e.pos);
        }
        case Expr::T::Cond:
            if (eval(*e.args[1], scope).truthy()) return eval(*e.args[0], scope);
            return e.args.size() > 2 ? eval(*e.args[2], scope) : Value();
    }
    return Value();
}

Value Renderer::call(const Expr& e, Scope& scope) {
    CallArgs a;
    for (size_t i = 1; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i], scope));
    for (const auto& [k, x] : e.kwargs) a.keyword.emplace_back(k, eval(*x, scope));
    const Expr& callee = *e.args[0];
    Value fn;
    if (callee.type == Expr::T::Attr) {
        const Value self = eval(*callee.args[0], scope);
        const Value* member = self.is_object() ? self.find(callee.name) : nullptr;
        if (member == nullptr) return method(self, callee.name, a, e.pos);
        fn = *member;
    } else {
        fn = eval(callee, scope);
    }
    if (fn.kind() != Value::Kind::Function) {
        if (fn.is_undefined() && callee.type == Expr::T::Name)
            fail(e.pos, "'" + callee.name + "' is undefined (no such function)");
        fail(e.pos, std::string("a ") + kind_name(fn) + " is not callable");
    }
    try {
        return fn.as_function()(a);
    } catch (const SyntaxError&) {
        throw;
    } catch (const std::exception& ex) {
        fail(e.pos, ex.what());
    }
}

Value kwarg(const CallArgs& a, size_t index, const char* name, Value dflt = Value()) {
    for (const auto& [k, v] : a.keyword)
        if (k == name) return v;
    if (index < a.positional.size()) return a.positional[index];
    return dflt;
}

Value Renderer::method(const Value& self, const std::string& name, CallArgs& a, size_t pos) {
    const auto str_arg = [&](size_t i, const char* what) -> std::string {
        const Value v = kwarg(a, i, what);
        if (!v.is_string()) fail(pos, "'" + name + "()' needs a string " + what);
        return v.as_string();
    };
    if (self.is_string()) {
        const std::string& s = self.as_string();
        if (name == "strip" || name == "lstrip" || name == "rstrip") {
            const Value c = kwarg(a, 0, "chars");
            const std::string chars = c.is_string() ? c.as_string() : kSpace;
            return Value(strip(s, chars, name != "rstrip", name != "lstrip"));
        }
        if (name == "split" || name == "rsplit") {
            const Value sep = kwarg(a, 0, "sep");
            const Value maxv = kwarg(a, 1, "maxsplit", Value(int64_t{-1}));
            if (!sep.is_none() && !sep.is_undefined() && !sep.is_string())
                fail(pos, "split() needs a string separator");
            if (sep.is_string() && sep.as_string().empty())
                fail(pos, "split() with an empty separator");
            Array out;
            for (auto& p :
                 split(s, sep,
                       name == "split" && maxv.kind() == Value::Kind::Int ? maxv.as_int() : -1))
                out.emplace_back(std::move(p));
            return Value(std::move(out));
        }
        if (name == "startswith" || name == "endswith") {
            const Value p = kwarg(a, 0, "prefix");
            std::vector<std::string> options;
            if (p.is_string())
                options.push_back(p.as_string());
            else if (p.is_array())
                for (const Value& x : p.array())
                    if (x.is_string()) options.push_back(x.as_string());
            if (options.empty() && !p.is_string()) fail(pos, "'" + name + "()' needs a string");
            for (const std::string& o : options) {
                if (o.size() > s.size()) continue;
                if (name == "startswith" ? s.compare(0, o.size(), o) == 0
                                         : s.compare(s.size() - o.size(), o.size(), o) == 0)
                    return Value(true);
            }
            return Value(false);
        }
        if (name == "replace") {
            const Value count = kwarg(a, 2, "count", Value(int64_t{-1}));
            return Value(replace_all(s, str_arg(0, "old"), str_arg(1, "new"),
                                     count.kind() == Value::Kind::Int ? count.as_int() : -1));
        }
        if (name == "upper") return Value(upper(s));
        if (name == "lower") return Value(lower(s));
        if (name == "title") return Value(title(s));
        if (name == "capitalize")
            return Value(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1)));
        if (name == "find") {
            const size_t p = s.find(str_arg(0, "sub"));
            return Value(p == std::string::npos
                             ? int64_t{-1}
                             : static_cast<int64_t>(characters(s.substr(0, p)).size()));
        }
        if (name == "count") {
            const std::string sub = str_arg(0, "sub");
            if (sub.empty()) return Value(static_cast<int64_t>(characters(s).size()) + 1);
            int64_t n = 0;
            for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size()))
                ++n;
            return Value(n);
        }
        if (name == "join") {
            std::string out;
            const std::vector<Value> items = iterate(kwarg(a, 0, "iterable"), pos);
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += s;
                if (!items[i].is_string()) fail(pos, "join() needs strings");
                out += items[i].as_string();
                if (out.size() > limits_.max_output_bytes)
                    fail(pos, "join() grows past the output limit");
            }
            return Value(std::move(out));
        }
        if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
            if (s.empty()) return Value(false);
            for (unsigned char c : s) {
                const bool ok = name == "isdigit"   ? std::isdigit(c)
                                : name == "isalpha" ? std::isalpha(c)
                                : name == "isspace" ? std::isspace(c)
                                                    : std::isalnum(c);
                if (!ok) return Value(false);
            }
            return Value(true);
        }
        if (name == "format") {  // "{}", "{0}", "{name}" and "{{"/"}}"; no format specs
            std::string out;
            size_t next = 0;
            for (size_t i = 0; i < s.size(); ++i) {
                const char c = s[i];
                if ((c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) {
                    out += c;
                    ++i;
                    continue;
                }
                if (c == '}') fail(pos, "format(): a single '}' in the format string");
                if (c != '{') {
                    out += c;
                    continue;
                }
                const size_t close = s.find('}', i);
                if (close == std::string::npos) fail(pos, "format(): a '{' is never closed");
                const std::string field = s.substr(i + 1, close - i - 1);
                Value v;
                if (field.empty()) {
                    v = kwarg(a, next++, "");
                } else if (std::all_of(field.begin(), field.end(), [](char d) {
                               return std::isdigit(static_cast<unsigned char>(d));
                           })) {
                    v = field.size() < 6 ? kwarg(a, static_cast<size_t>(std::stoi(field)), "")
                                         : Value();
                } else {
                    for (const auto& [k, x] : a.keyword)
                        if (k == field) v = x;
                }
                if (v.is_undefined()) fail(pos, "format(): no argument for {" + field + "}");
                out += text(v);
                if (out.size() > limits_.max_output_bytes)
                    fail(pos, "format() grows past the output limit");
                i = close;
            }
            return Value(std::move(out));
        }
        if (name == "splitlines") {
            Array out;
            for (auto& p : split(s, Value("\n"), -1)) out.emplace_back(strip(p, "\r", false, true));
            if (!out.empty() && out.back().as_string().empty()) out.pop_back();
            return Value(std::move(out));
        }
    } else if (self.is_object()) {
        if (name == "items") {
            Array out;
            for (const auto& [k, v] : self.object()) out.emplace_back(Array{Value(k), v});
            return Value(std::move(out));
        }
        if (name == "keys" || name == "values") {
            Array out;
            for (const auto& [k, v] : self.object()) out.push_back(name == "keys" ? Value(k) : v);
            return Value(std::move(out));
        }
        if (name == "get") {
            const Value k = kwarg(a, 0, "key");
            const Value* v = k.is_string() ? self.find(k.as_string()) : nullptr;
            return v ? *v : kwarg(a, 1, "default", Value::none());
        }
    } else if (self.is_array()) {
        if (name == "index") {
            const Value x = kwarg(a, 0, "value");
            for (size_t i = 0; i < self.array().size(); ++i)
                if (self.array()[i] == x) return Value(static_cast<int64_t>(i));
            fail(pos, "index(): the value is not in the list");
        }
        if (name == "count") {
            const Value x = kwarg(a, 0, "value");
            return Value(
                static_cast<int64_t>(std::count(self.array().begin(), self.array().end(), x)));
        }
    } else if (self.is_undefined()) {
        fail(pos, "'" + name + "()' called on an undefined value");
    }
    fail(pos, std::string("a ") + kind_name(self) + " has no method '" + name + "'");
}

bool Renderer::test(const std::string& name, const Value& v, const std::vector<Value>& args,
                    size_t pos) {
    using K = Value::Kind;
    const auto arg = [&](size_t i) -> const Value& {
        if (i >= args.size()) fail(pos, "the test '" + name + "' needs an argument");
        return args[i];
    };
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "number") return v.kind() == K::Int || v.kind() == K::Float || v.kind() == K::Bool;
    if (name == "integer") return v.kind() == K::Int;
    if (name == "float") return v.kind() == K::Float;
    if (name == "boolean") return v.kind() == K::Bool;
    if (name == "true") return v.kind() == K::Bool && v.as_bool();
    if (name == "false") return v.kind() == K::Bool && !v.as_bool();
    if (name == "mapping") return v.is_object();
    if (name == "iterable")
        return v.is_array() || v.is_object() || v.is_string() || v.is_undefined();
    if (name == "sequence")
        return v.is_array() || v.is_object() || v.is_string() || v.is_undefined();
    if (name == "callable") return v.kind() == K::Function;
    if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return v == arg(0);
    if (name == "ne" || name == "!=") return !(v == arg(0));
    if (name == "lt" || name == "lessthan") return compare(v, arg(0), pos) < 0;
    if (name == "le") return compare(v, arg(0), pos) <= 0;
    if (name == "gt" || name == "greaterthan") return compare(v, arg(0), pos) > 0;
    if (name == "ge") return compare(v, arg(0), pos) >= 0;
    if (name == "in") return binary("in", v, arg(0), pos).as_bool();
    if (name == "odd" || name == "even" || name == "divisibleby") {
        if (v.kind() != K::Int) fail(pos, "the test '" + name + "' needs an integer");
        if (name == "divisibleby") {
            const Value& d = arg(0);
            if (d.kind() != K::Int || d.as_int() == 0)
                fail(pos, "divisibleby needs a non-zero integer");
            return d.as_int() == -1 || v.as_int() % d.as_int() == 0;
        }
        return (v.as_int() % 2 != 0) == (name == "odd");
    }
    if (name == "lower" || name == "upper")
        return v.is_string() &&
               (name == "lower" ? lower(v.as_string()) : upper(v.as_string())) == v.as_string();
    fail(pos, "unknown test '" + name + "'");
}

Value Renderer::filter(const std::string& name, const Value& v, CallArgs& a, Scope& scope,
                       size_t pos) {
    using K = Value::Kind;
    const auto need_string = [&]() -> std::string {
        if (v.is_string()) return v.as_string();
        return text(v);
    };
    if (name == "trim" || name == "strip") {
        const Value c = kwarg(a, 0, "chars");
        return Value(strip(need_string(), c.is_string() ? c.as_string() : kSpace, true, true));
    }
    if (name == "tojson") {
        // transformers' signature: tojson(x, ensure_ascii=False, indent=None, ...)
        const Value ea = kwarg(a, 0, "ensure_ascii", Value(false));
        const Value ind = kwarg(a, 1, "indent");
        if (v.is_undefined()) fail(pos, "tojson of an undefined value");
        const std::string out = v.to_json(
            ind.kind() == K::Int ? static_cast<int>(std::clamp<int64_t>(ind.as_int(), 0, 64)) : -1,
            ea.truthy(), limits_.max_output_bytes);
        if (out.size() > limits_.max_output_bytes)
            fail(pos, "tojson output exceeds the output limit");
        return Value(out);
    }
    if (name == "length" || name == "count") {
        const int64_t n = length_of(v);
        if (n < 0) fail(pos, std::string("a ") + kind_name(v) + " has no length");
        return Value(n);
    }
    if (name == "string") return Value(text(v));
    if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
        if (name == "safe") return v;
        std::string out;
        for (char c : text(v)) {
            switch (c) {
                case '&':
                    out += "&amp;";
                    break;
                case '<':
                    out += "&lt;";
                    break;
                case '>':
                    out += "&gt;";
                    break;
                case '"':
                    out += "&#34;";
                    break;
                case '\'':
                    out += "&#39;";
                    break;
                default:
                    out += c;
            }
        }
        return Value(out);
    }
    if (name == "lower") return Value(lower(need_string()));
    if (name == "upper") return Value(upper(need_string()));
    if (name == "title") return Value(title(need_string()));
    if (name == "capitalize") {
        const std::string s = need_string();
        return Value(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1)));
    }
    if (name == "replace") {
        const Value from = kwarg(a, 0, "old"), to = kwarg(a, 1, "new"),
                    count = kwarg(a, 2, "count");
        if (!from.is_string() || !to.is_string()) fail(pos, "replace needs two strings");
        return Value(replace_all(need_string(), from.as_string(), to.as_string(),
                                 count.kind() == K::Int ? count.as_int() : -1));
    }
    if (name == "default" || name == "d") {
        const Value dflt = kwarg(a, 0, "default_value", Value(""));
        const bool boolean = kwarg(a, 1, "boolean", Value(false)).truthy();
        if (v.is_undefined() || (boolean && !v.truthy())) return dflt;
        return v;
    }
    if (name == "first" || name == "last") {
        const std::vector<Value> items = iterate(v, pos);
        if (items.empty()) return Value();
        return name == "first" ? items.front() : items.back();
    }
    if (name == "list") return Value(iterate(v, pos));
    if (name == "items") {
        if (v.is_undefined()) return Value(Array{});
        if (!v.is_object()) fail(pos, std::string("items of a ") + kind_name(v));
        CallArgs none;
        return method(v, "items", none, pos);
    }
    if (name == "reverse") {
        if (v.is_string()) {
            auto chars = characters(v.as_string());
            std::string out;
            for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
            return Value(out);
        }
        std::vector<Value> items = iterate(v, pos);
        std::reverse(items.begin(), items.end());
        return Value(std::move(items));
    }
    if (name == "join") {
        const Value sep = kwarg(a, 0, "d", Value(""));
        const Value attr = kwarg(a, 1, "attribute");
        std::string out;
        const std::vector<Value> items = iterate(v, pos);
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += text(sep);
            out += attr.is_string() ? text(attribute(items[i], attr.as_string(), pos))
                                    : text(items[i]);
            if (out.size() > limits_.max_output_bytes)
                fail(pos, "join grows past the output limit");
        }
        return Value(std::move(out));
    }
    if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
        const bool by_attr = name == "selectattr" || name == "rejectattr";
        const bool keep = name == "selectattr" || name == "select";
        size_t i = 0;
        std::string attr;
        if (by_attr) {
            if (a.positional.empty() || !a.positional[0].is_string())
                fail(pos, name + " needs an attribute name");
            attr = a.positional[0].as_string();
            i = 1;
        }
        std::string tname;
        if (i < a.positional.size()) {
            if (!a.positional[i].is_string()) fail(pos, name + " needs a test name");
            tname = a.positional[i].as_string();
        }
        const std::vector<Value> targs(a.positional.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                  a.positional.size(), i + 1)),
                                       a.positional.end());
        Array out;
        if (!v.truthy()) return Value(std::move(out));  // Jinja2 skips a falsy sequence (none)
        for (const Value& x : iterate(v, pos)) {
            count_iteration(pos);
            const Value subject = by_attr ? (x.is_object() ? attribute(x, attr, pos) : Value()) : x;
            const bool r = tname.empty() ? subject.truthy() : test(tname, subject, targs, pos);
            if (r == keep) out.push_back(x);
        }
        return Value(std::move(out));
    }
    if (name == "map") {
        if (!v.truthy())
            return Value(Array{});  // as Jinja2, a falsy sequence (none) maps to nothing
        Value attr;
        for (const auto& [k, x] : a.keyword)
            if (k == "attribute") attr = x;
        Array out;
        if (attr.is_string()) {
            const Value dflt = kwarg(a, 99, "default");
            for (const Value& x : iterate(v, pos)) {
                Value r = attribute(x, attr.as_string(), pos);
                out.push_back(r.is_undefined() && !dflt.is_undefined() ? dflt : r);
            }
            return Value(std::move(out));
        }
        if (a.positional.empty() || !a.positional[0].is_string())
            fail(pos, "map needs a filter name or attribute=");
        const std::string fname = a.positional[0].as_string();
        CallArgs rest;
        rest.positional.assign(a.positional.begin() + 1, a.positional.end());
        rest.keyword = a.keyword;
        for (const Value& x : iterate(v, pos)) {
            count_iteration(pos);
            out.push_back(filter(fname, x, rest, scope, pos));
        }
        return Value(std::move(out));
    }
    if (name == "unique") {
        Array out;
        for (const Value& x : iterate(v, pos))
            if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
        return Value(std::move(out));
    }
    if (name == "sort" || name == "dictsort") {
        std::vector<Value> items;
        if (name == "dictsort") {
            if (!v.is_object()) fail(pos, "dictsort needs a dict");
            CallArgs none;
            items = method(v, "items", none, pos).array();
        } else {
            items = iterate(v, pos);
        }
        const bool reverse = kwarg(a, name == "sort" ? 0 : 2, "reverse", Value(false)).truthy();
        const bool cs = kwarg(a, name == "sort" ? 1 : 0, "case_sensitive", Value(false)).truthy();
        const Value attr = kwarg(a, 2, "attribute");
        const auto key = [&](const Value& x) {
            Value k = name == "dictsort" ? x.array()[0]
                      : attr.is_string() ? attribute(x, attr.as_string(), pos)
                                         : x;
            if (!cs && k.is_string()) k = Value(lower(k.as_string()));
            return k;
        };
        std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
            return reverse ? compare(key(y), key(x), pos) < 0 : compare(key(x), key(y), pos) < 0;
        });
        return Value(std::move(items));
    }
    if (name == "int") {
        if (v.kind() == K::Int) return v;
        if (v.kind() == K::Bool) return Value(int64_t{v.as_bool()});
        if (v.kind() == K::Float && std::isfinite(v.as_double()) && std::fabs(v.as_double()) < 9e18)
            return Value(static_cast<int64_t>(v.as_double()));
        if (v.is_string()) {
            try {
                size_t used = 0;
                const long long i = std::stoll(strip(v.as_string(), kSpace, true, true), &used);
                return Value(static_cast<int64_t>(i));
            } catch (const std::exception&) {
            }
        }
        return kwarg(a, 0, "default", Value(int64_t{0}));
    }
    if (name == "float") {
        if (v.is_number()) return Value(v.as_double());
        if (v.is_string()) {
            try {
                return Value(std::stod(v.as_string()));
            } catch (const std::exception&) {
            }
        }
        return kwarg(a, 0, "default", Value(0.0));
    }
    if (name == "abs") {
        if (v.kind() == K::Int)
            return v.as_int() == INT64_MIN ? Value(-static_cast<double>(v.as_int()))
                                           : Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
        if (v.kind() == K::Float) return Value(std::fabs(v.as_double()));
        fail(pos, std::string("abs of a ") + kind_name(v));
    }
    if (name == "round") {
        // Python's round(): the correctly rounded decimal, ties to even.
        const Value prec = kwarg(a, 0, "precision", Value(int64_t{0}));
        if (!v.is_number()) fail(pos, "round needs a number");
        const int digits =
            static_cast<int>(std::clamp<int64_t>(prec.kind() == K::Int ? prec.as_int() : 0, 0, 17));
        char buf[512];
        std::snprintf(buf, sizeof buf, "%.*f", digits, v.as_double());
        return Value(std::strtod(buf, nullptr));
    }
    if (name == "sum" || name == "min" || name == "max") {
        const std::vector<Value> items = iterate(v, pos);
        if (name == "sum") {
            Value acc(int64_t{0});
            for (const Value& x : items) acc = binary("+", acc, x, pos);
            return acc;
        }
        if (items.empty()) return Value();
        Value best = items[0];
        for (const Value& x : items)
            if ((name == "min") == (compare(x, best, pos) < 0) && !(x == best)) best = x;
        return best;
    }
    if (name == "indent") {
        const Value w = kwarg(a, 0, "width", Value(int64_t{4}));
        const bool first = kwarg(a, 1, "first", Value(false)).truthy();
        const bool blank = kwarg(a, 2, "blank", Value(false)).truthy();
        const std::string pad = w.is_string()
                                    ? w.as_string()
                                    : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                                      w.kind() == K::Int ? w.as_int() : 4, 0, 256)),
                                                  ' ');
        const std::vector<std::string> lines = split(need_string(), Value("\n"), -1);
        std::string out;
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i) out += '\n';
            if ((i > 0 || first) && (blank || !lines[i].empty())) out += pad;
            out += lines[i];
            if (out.size() > limits_.max_output_bytes)
                fail(pos, "indent grows past the output limit");
        }
        return Value(std::move(out));
    }
    if (name == "wordcount")
        return Value(static_cast<int64_t>(split(need_string(), Value::none(), -1).size()));
    fail(pos, "unknown filter '" + name + "'");
}

}  // namespace

namespace {

// An error names text from the template and the conversation (a test's name,
// raise_exception()'s message): kept to one line of bounded length.
std::string one_line(const std::string& what) {
    constexpr size_t kMax = 400;
    std::string out;
    for (const char c : what) {
        if (out.size() >= kMax) {
            out += "...";
            break;
        }
        const auto u = static_cast<unsigned char>(c);
        if (c == '\n') {
            out += "\\n";
        } else if (u < 0x20 || u == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out += c;
        }
    }
    return out;
}

}  // namespace

Template Template::parse(std::string_view source) {
    Template t;
    t.source_ = std::make_shared<const std::string>(source);
    try {
        t.root_ = parse_template(*t.source_);
    } catch (const SyntaxError& e) {
        throw Error(DWELL_ERR_UNSUPPORTED,
                    "chat template " + position_text(*t.source_, e.pos) + ": " + one_line(e.what));
    }
    return t;
}

std::string Template::render(const Value& context, const Limits& limits) const {
    Scope root;
    if (context.is_object())
        for (const auto& kv : context.object()) root.vars.push_back(kv);
    Renderer r(limits, root);
    std::string out;
    try {
        r.exec(root_->body, root, out);
    } catch (const SyntaxError& e) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "chat template " + position_text(*source_, e.pos) + ": " + one_line(e.what));
    } catch (const std::invalid_argument& e) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "chat template: " + one_line(e.what()));
    }
    return out;
}

}  // namespace dwell::jinja
