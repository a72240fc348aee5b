// Jinja values with Python's semantics: truth, equality, str(), repr() and
// json.dumps() as the reference (Jinja2 on CPython) prints them, since a
// chat template's output is compared byte for byte with it.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "dwell/core/text/jinja.hpp"

namespace dwell::jinja {

Value Value::none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
}
Value::Value(bool b) : kind_(Kind::Bool), b_(b) {}
Value::Value(int64_t v) : kind_(Kind::Int), i_(v) {}
Value::Value(double v) : kind_(Kind::Float), f_(v) {}
Value::Value(std::string s)
    : kind_(Kind::String), s_(std::make_shared<std::string>(std::move(s))) {}
Value::Value(Array a) : kind_(Kind::Array), depth_(1), a_(std::make_shared<Array>(std::move(a))) {
    for (const Value& v : *a_) {
        depth_ = std::max(depth_, v.depth_ + 1);
        holds_namespace_ = holds_namespace_ || v.holds_namespace_;
    }
}
Value::Value(Object o)
    : kind_(Kind::Object), depth_(1), o_(std::make_shared<Object>(std::move(o))) {
    for (const auto& kv : *o_) {
        depth_ = std::max(depth_, kv.second.depth_ + 1);
        holds_namespace_ = holds_namespace_ || kv.second.holds_namespace_;
    }
}
Value Value::function(Function f) {
    Value v;
    v.kind_ = Kind::Function;
    v.fn_ = std::make_shared<Function>(std::move(f));
    return v;
}
Value Value::namespace_object(Object o) {
    Value v(std::move(o));
    v.namespace_ = true;
    v.holds_namespace_ = true;
    return v;
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::Undefined:
        case Kind::None:
            return false;
        case Kind::Bool:
            return b_;
        case Kind::Int:
            return i_ != 0;
        case Kind::Float:
            return f_ != 0;
        case Kind::String:
            return !s_->empty();
        case Kind::Array:
            return !a_->empty();
        case Kind::Object:
            return namespace_ || !o_->empty();
        case Kind::Function:
            return true;
    }
    return false;
}

const Value* Value::find(std::string_view key) const {
    if (kind_ != Kind::Object) return nullptr;
    for (const auto& [k, v] : *o_)
        if (k == key) return &v;
    return nullptr;
}

void Value::set(const std::string& key, Value v) {
    depth_ = std::max(depth_, v.depth_ + 1);
    holds_namespace_ = holds_namespace_ || v.holds_namespace_;
    for (auto& [k, old] : *o_) {
        if (k == key) {
            old = std::move(v);
            return;
        }
    }
    o_->emplace_back(key, std::move(v));
}

namespace {

// repr(float): the shortest digits that read back, fixed notation for
// decimal exponents -4..15, else d.ddde+XX.
std::string float_repr(double f) {
    if (std::isnan(f)) return "nan";
    if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
    std::string sci(buf, r.ptr);
    const size_t e = sci.find('e');
    std::string mant = sci.substr(0, e);
    const int exp = std::stoi(sci.substr(e + 1));
    bool neg = false;
    if (!mant.empty() && mant[0] == '-') {
        neg = true;
        mant.erase(0, 1);
    }
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    std::string out;
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
        } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
            out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." +
                  digits.substr(static_cast<size_t>(exp) + 1);
        }
        return neg ? "-" + out : out;
    }
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
        out += '.';
        out.append(digits, 1);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += ebuf;
    return neg ? "-" + out : out;
}

// repr(str): single quotes unless the text has ' and no ".
std::string string_repr(const std::string& s) {
    const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
    const char q = dq ? '"' : '\'';
    std::string out(1, q);
    for (unsigned char c : s) {
        if (c == q || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    out += q;
    return out;
}

// Decodes one UTF-8 character at s[i] (advancing i); invalid bytes read as
// themselves so that hostile text cannot stop the encoder.
uint32_t next_code_point(const std::string& s, size_t& i) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : 0;
    if (n == 0 || i + n >= s.size()) {
        ++i;
        return b;
    }
    uint32_t cp = b & (0x3Fu >> n);
    for (size_t k = 1; k <= n; ++k) {
        const auto c = static_cast<unsigned char>(s[i + k]);
        if ((c & 0xC0) != 0x80) {
            ++i;
            return b;
        }
        cp = (cp << 6) | (c & 0x3F);
    }
    i += n + 1;
    return cp;
}

void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80 && ensure_ascii) {
            uint32_t cp = next_code_point(s, i);
            char buf[16];
            if (cp >= 0x10000) {
                cp -= 0x10000;
                std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10),
                              0xDC00 + (cp & 0x3FF));
            } else {
                std::snprintf(buf, sizeof buf, "\\u%04x", cp);
            }
            out += buf;
            continue;
        }
        ++i;
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += '"';
}

void check_budget(const std::string& out, size_t max_bytes) {
    if (out.size() > max_bytes)
        throw std::length_error("the text of a value exceeds " + std::to_string(max_bytes) +
                                " bytes");
}

void json_dump(const Value& v, int indent, bool ascii, int level, std::string& out,
               size_t max_bytes) {
    check_budget(out, max_bytes);
    const auto newline = [&](int lv) {
        out += '\n';
        out.append(static_cast<size_t>(indent) * static_cast<size_t>(lv), ' ');
    };
    switch (v.kind()) {
        case Value::Kind::Undefined:
        case Value::Kind::None:
            out += "null";
            return;
        case Value::Kind::Bool:
            out += v.as_bool() ? "true" : "false";
            return;
        case Value::Kind::Int:
            out += std::to_string(v.as_int());
            return;
        case Value::Kind::Float: {
            const double f = v.as_double();
            out += std::isnan(f)   ? "NaN"
                   : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity")
                                   : float_repr(f);
            return;
        }
        case Value::Kind::String:
            json_string(v.as_string(), ascii, out);
            return;
        case Value::Kind::Function:
            out += "null";
            return;
        case Value::Kind::Array: {
            const Array& a = v.array();
            if (a.empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (size_t i = 0; i < a.size(); ++i) {
                if (i) out += indent >= 0 ? "," : ", ";
                if (indent >= 0) newline(level + 1);
                json_dump(a[i], indent, ascii, level + 1, out, max_bytes);
            }
            if (indent >= 0) newline(level);
            out += ']';
            return;
        }
        case Value::Kind::Object: {
            if (v.is_namespace())
                throw std::invalid_argument("a namespace() is not JSON serializable");
            const Object& o = v.object();
            if (o.empty()) {
                out += "{}";
                return;
            }
            out += '{';
            for (size_t i = 0; i < o.size(); ++i) {
                if (i) out += indent >= 0 ? "," : ", ";
                if (indent >= 0) newline(level + 1);
                json_string(o[i].first, ascii, out);
                out += ": ";
                json_dump(o[i].second, indent, ascii, level + 1, out, max_bytes);
            }
            if (indent >= 0) newline(level);
            out += '}';
            return;
        }
    }
}

}  // namespace

namespace {

void repr_into(const Value& v, std::string& out, size_t max_bytes) {
    check_budget(out, max_bytes);
    switch (v.kind()) {
        case Value::Kind::Undefined:
            out += "Undefined";
            return;
        case Value::Kind::None:
            out += "None";
            return;
        case Value::Kind::Bool:
            out += v.as_bool() ? "True" : "False";
            return;
        case Value::Kind::Int:
            out += std::to_string(v.as_int());
            return;
        case Value::Kind::Float:
            out += float_repr(v.as_double());
            return;
        case Value::Kind::String:
            out += string_repr(v.as_string());
            return;
        case Value::Kind::Function:
            out += "<function>";
            return;
        case Value::Kind::Array:
            out += '[';
            for (size_t i = 0; i < v.array().size(); ++i) {
                if (i) out += ", ";
                repr_into(v.array()[i], out, max_bytes);
            }
            out += ']';
            return;
        case Value::Kind::Object:
            if (v.is_namespace()) {
                out += "<Namespace>";
                return;
            }
            out += '{';
            for (size_t i = 0; i < v.object().size(); ++i) {
                if (i) out += ", ";
                out += string_repr(v.object()[i].first);
                out += ": ";
                repr_into(v.object()[i].second, out, max_bytes);
            }
            out += '}';
            return;
    }
}

}  // namespace

std::string Value::str(size_t max_bytes) const {
    if (kind_ == Kind::Undefined) return {};
    if (kind_ == Kind::String) {
        std::string out = *s_;
        check_budget(out, max_bytes);
        return out;
    }
    return repr(max_bytes);
}

std::string Value::repr(size_t max_bytes) const {
    std::string out;
    repr_into(*this, out, max_bytes);
    check_budget(out, max_bytes);
    return out;
}

std::string Value::to_json(int indent, bool ensure_ascii, size_t max_bytes) const {
    std::string out;
    json_dump(*this, indent, ensure_ascii, 0, out, max_bytes);
    check_budget(out, max_bytes);
    return out;
}

namespace {
bool equal(const Value& a, const Value& b, int64_t& budget);
}

bool operator==(const Value& a, const Value& b) {
    int64_t budget = 10'000'000;
    return equal(a, b, budget);
}

namespace {
bool equal(const Value& a, const Value& b, int64_t& budget) {
    if (--budget < 0) throw std::length_error("comparing the values takes too long");
    using K = Value::Kind;
    const auto numeric = [](const Value& v) {
        return v.kind() == K::Int || v.kind() == K::Float || v.kind() == K::Bool;
    };
    if (numeric(a) && numeric(b)) {
        const auto num = [](const Value& v) {
            return v.kind() == K::Bool ? (v.as_bool() ? 1.0 : 0.0) : v.as_double();
        };
        if (a.kind() == K::Float || b.kind() == K::Float) return num(a) == num(b);
        const auto inum = [](const Value& v) {
            return v.kind() == K::Bool ? int64_t{v.as_bool()} : v.as_int();
        };
        return inum(a) == inum(b);
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case K::Undefined:
        case K::None:
            return true;
        case K::String:
            return a.as_string() == b.as_string();
        case K::Array: {
            if (&a.array() == &b.array()) return true;
            if (a.array().size() != b.array().size()) return false;
            for (size_t i = 0; i < a.array().size(); ++i)
                if (!equal(a.array()[i], b.array()[i], budget)) return false;
            return true;
        }
        case K::Object: {
            // Namespaces compare by identity, as in Python.
            if (a.is_namespace() || b.is_namespace() || &a.object() == &b.object())
                return &a.object() == &b.object();
            if (a.object().size() != b.object().size()) return false;
            for (const auto& [k, v] : a.object()) {
                const Value* o = b.find(k);
                if (o == nullptr || !equal(*o, v, budget)) return false;
            }
            return true;
        }
        case K::Function:
            return &a.as_function() == &b.as_function();
        default:
            return false;
    }
}

}  // namespace

}  // namespace dwell::jinja
