// Jinja lexer and parser: template text -> the syntax tree of
// jinja_ast.hpp, with Jinja2's whitespace rules (trim_blocks, lstrip_blocks,
// "-" and "+" markers) applied to the text between tags. Nesting is bounded
// here, so that rendering the tree recurses a bounded number of times.
#include <cctype>
#include <charconv>

#include "dwell/core/base/error.hpp"
#include "dwell/core/text/jinja_ast.hpp"

namespace dwell::jinja {

std::string position_text(const std::string& source, size_t pos) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < source.size(); ++i) {
        if (source[i] == '\n') {
            ++line;
            col = 1;
        } else if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
            ++col;
        }
    }
    return "line " + std::to_string(line) + " column " + std::to_string(col);
}

namespace {

enum class TK {
    Text,
    VarBegin,
    VarEnd,
    BlockBegin,
    BlockEnd,
    Comment,
    Name,
    Int,
    Float,
    Str,
    Op,
    Eof
};

struct Tok {
    TK kind;
    std::string s;
    size_t pos = 0;
    char left = 0;   // Begin/Comment: '-', '+' or 0
    char right = 0;  // End/Comment: '-', '+' or 0
    bool ate_newline = false;
    int64_t i = 0;
    double f = 0;
};

[[noreturn]] void fail(size_t pos, const std::string& what) {
    throw SyntaxError{pos, what};
}

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class Lexer {
public:
    explicit Lexer(const std::string& src) : s_(src) {}

    std::vector<Tok> run() {
        while (p_ < s_.size()) {
            const size_t open = find_open(p_);
            if (open > p_) push_text(p_, open);
            if (open >= s_.size()) break;
            p_ = open;
            const char type = s_[p_ + 1];
            char left = 0;
            if (p_ + 2 < s_.size() && (s_[p_ + 2] == '-' || s_[p_ + 2] == '+')) left = s_[p_ + 2];
            const size_t start = p_;
            p_ += left ? 3 : 2;
            if (type == '#') {
                comment(start, left);
            } else {
                Tok b{type == '{' ? TK::VarBegin : TK::BlockBegin, {}, start};
                b.left = left;
                toks_.push_back(b);
                tag(type == '{' ? '}' : '%');
            }
        }
        toks_.push_back(Tok{TK::Eof, {}, s_.size()});
        whitespace();
        std::vector<Tok> out;
        out.reserve(toks_.size());
        for (Tok& t : toks_)
            if (t.kind != TK::Comment) out.push_back(std::move(t));
        return out;
    }

private:
    size_t find_open(size_t from) const {
        for (size_t i = from; i + 1 < s_.size(); ++i)
            if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#'))
                return i;
        return s_.size();
    }
    void push_text(size_t a, size_t b) { toks_.push_back(Tok{TK::Text, s_.substr(a, b - a), a}); }

    // After "%}" or "#}": trim_blocks eats one newline.
    bool eat_newline(char right) {
        if (right == '+' || right == '-') return false;
        if (p_ < s_.size() && s_[p_] == '\n') {
            ++p_;
            return true;
        }
        if (p_ + 1 < s_.size() && s_[p_] == '\r' && s_[p_ + 1] == '\n') {
            p_ += 2;
            return true;
        }
        return false;
    }

    void comment(size_t start, char left) {
        const size_t end = s_.find("#}", p_);
        if (end == std::string::npos) fail(start, "the comment is never closed with '#}'");
        Tok c{TK::Comment, {}, start};
        c.left = left;
        c.right = end > p_ && (s_[end - 1] == '-' || s_[end - 1] == '+') ? s_[end - 1] : 0;
        p_ = end + 2;
        c.ate_newline = eat_newline(c.right);
        toks_.push_back(c);
    }

    // The tokens of one {{ }} or {% %} up to its end marker (outside brackets
    // and strings).
    void tag(char closer) {
        int depth = 0;
        const size_t tag_start = toks_.back().pos;
        for (;;) {
            while (p_ < s_.size() && is_space(s_[p_])) ++p_;
            if (p_ >= s_.size())
                fail(tag_start, std::string("the tag is never closed with '") + closer + "}'");
            const char c = s_[p_];
            if (depth == 0) {
                char right = 0;
                size_t q = p_;
                if ((c == '-' || c == '+') && q + 2 < s_.size() && s_[q + 1] == closer &&
                    s_[q + 2] == '}') {
                    right = c;
                    ++q;
                }
                if (q + 1 < s_.size() && s_[q] == closer && s_[q + 1] == '}') {
                    Tok e{closer == '}' ? TK::VarEnd : TK::BlockEnd, {}, p_};
                    e.right = right;
                    p_ = q + 2;
                    if (closer == '%') e.ate_newline = eat_newline(right);
                    toks_.push_back(e);
                    return;
                }
            }
            const size_t at = p_;
            if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
                while (p_ < s_.size() &&
                       (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_'))
                    ++p_;
                toks_.push_back(Tok{TK::Name, s_.substr(at, p_ - at), at});
            } else if (std::isdigit(static_cast<unsigned char>(c))) {
                number(at);
            } else if (c == '\'' || c == '"') {
                string(at, c);
            } else {
                static const char* const kOps[] = {
                    "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                    ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", ";"};
                const char* hit = nullptr;
                for (const char* op : kOps) {
                    const std::string_view v(op);
                    if (s_.compare(p_, v.size(), v) == 0) {
                        hit = op;
                        break;
                    }
                }
                if (hit == nullptr) fail(at, std::string("unexpected character '") + c + "'");
                const std::string op(hit);
                if (op == "(" || op == "[" || op == "{") ++depth;
                if (op == ")" || op == "]" || op == "}") {
                    if (--depth < 0) fail(at, "unbalanced '" + op + "'");
                }
                p_ += op.size();
                toks_.push_back(Tok{TK::Op, op, at});
            }
        }
    }

    void number(size_t at) {
        while (p_ < s_.size() &&
               (std::isdigit(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_'))
            ++p_;
        bool is_float = false;
        if (p_ + 1 < s_.size() && s_[p_] == '.' &&
            std::isdigit(static_cast<unsigned char>(s_[p_ + 1]))) {
            is_float = true;
            ++p_;
            while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
        }
        if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
            size_t q = p_ + 1;
            if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
            if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
                is_float = true;
                p_ = q;
                while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) ++p_;
            }
        }
        std::string text;
        for (size_t k = at; k < p_; ++k)
            if (s_[k] != '_') text += s_[k];
        Tok t{is_float ? TK::Float : TK::Int, text, at};
        if (is_float) {
            const auto r = std::from_chars(text.data(), text.data() + text.size(), t.f);
            if (r.ec != std::errc()) fail(at, "the number '" + text + "' is out of range");
        } else {
            const auto r = std::from_chars(text.data(), text.data() + text.size(), t.i);
            if (r.ec != std::errc()) fail(at, "the integer '" + text + "' is out of range");
        }
        toks_.push_back(t);
    }

    static void append_utf8(std::string& out, uint32_t cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    // Python's string literal escapes (Jinja reads literals as Python does).
    void string(size_t at, char quote) {
        ++p_;
        std::string out;
        for (;;) {
            if (p_ >= s_.size()) fail(at, "the string is never closed");
            const char c = s_[p_++];
            if (c == quote) break;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (p_ >= s_.size()) fail(at, "the string is never closed");
            const char e = s_[p_++];
            switch (e) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case '0':
                    out += '\0';
                    break;
                case 'a':
                    out += '\a';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'v':
                    out += '\v';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '\'':
                    out += '\'';
                    break;
                case '"':
                    out += '"';
                    break;
                case '\n':
                    break;
                case 'x':
                case 'u':
                case 'U': {
                    const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    uint32_t cp = 0;
                    if (p_ + n > s_.size())
                        fail(at, "a \\" + std::string(1, e) + " escape is cut short");
                    const auto r = std::from_chars(s_.data() + p_, s_.data() + p_ + n, cp, 16);
                    if (r.ptr != s_.data() + p_ + n || cp > 0x10FFFF)
                        fail(p_, "a \\" + std::string(1, e) + " escape is not hexadecimal");
                    p_ += n;
                    append_utf8(out, cp);
                    break;
                }
                default:
                    out += '\\';
                    out += e;
            }
        }
        toks_.push_back(Tok{TK::Str, std::move(out), at});
    }

    // Jinja2's whitespace rules on the text tokens, given the tags around them.
    void whitespace() {
        for (size_t k = 0; k < toks_.size(); ++k) {
            Tok& t = toks_[k];
            if (t.kind != TK::Text) continue;
            const Tok* prev = k > 0 ? &toks_[k - 1] : nullptr;
            const Tok* next = k + 1 < toks_.size() ? &toks_[k + 1] : nullptr;
            const bool line_starting = prev == nullptr || prev->ate_newline;
            if (prev &&
                (prev->kind == TK::VarEnd || prev->kind == TK::BlockEnd ||
                 prev->kind == TK::Comment) &&
                prev->right == '-') {
                size_t a = 0;
                while (a < t.s.size() && is_space(t.s[a])) ++a;
                t.s.erase(0, a);
            }
            if (next && (next->kind == TK::VarBegin || next->kind == TK::BlockBegin ||
                         next->kind == TK::Comment)) {
                if (next->left == '-') {
                    size_t b = t.s.size();
                    while (b > 0 && is_space(t.s[b - 1])) --b;
                    t.s.resize(b);
                } else if (next->left != '+' && next->kind != TK::VarBegin) {
                    const size_t nl = t.s.rfind('\n');
                    const size_t from = nl == std::string::npos ? 0 : nl + 1;
                    if (nl != std::string::npos || line_starting) {
                        bool blank = true;
                        for (size_t q = from; q < t.s.size(); ++q)
                            if (!is_space(t.s[q])) blank = false;
                        if (blank) t.s.resize(from);
                    }
                }
            }
        }
    }

    const std::string& s_;
    size_t p_ = 0;
    std::vector<Tok> toks_;
};

constexpr int kMaxExprDepth = 200;
constexpr int kMaxBlockDepth = 64;

class Parser {
public:
    explicit Parser(std::vector<Tok> toks) : t_(std::move(toks)) {}

    NodeP run() {
        auto root = std::make_unique<Node>(Node::T::Block, 0);
        std::string stop;
        root->body = body({}, stop);
        return root;
    }

private:
    const Tok& cur() const { return t_[k_]; }
    const Tok& peek(size_t n = 1) const { return t_[std::min(k_ + n, t_.size() - 1)]; }
    bool is_op(const char* op) const { return cur().kind == TK::Op && cur().s == op; }
    bool is_name(const char* n) const { return cur().kind == TK::Name && cur().s == n; }
    void expect_op(const char* op) {
        if (!is_op(op)) fail(cur().pos, std::string("expected '") + op + "'" + got());
        ++k_;
    }
    std::string got() const {
        switch (cur().kind) {
            case TK::Name:
                return ", found '" + cur().s + "'";
            case TK::Op:
                return ", found '" + cur().s + "'";
            case TK::VarEnd:
                return ", found the end of the '{{ }}'";
            case TK::BlockEnd:
                return ", found the end of the tag";
            case TK::Eof:
                return ", found the end of the template";
            default:
                return {};
        }
    }
    std::string name() {
        if (cur().kind != TK::Name) fail(cur().pos, "expected a name" + got());
        return t_[k_++].s;
    }
    void block_end() {
        if (cur().kind != TK::BlockEnd)
            fail(cur().pos, "expected the end of the tag ('%}')" + got());
        ++k_;
    }

    // Statements until one of the tags in `stops` (its name is left in
    // `stop`, its tokens after the name unread).
    std::vector<NodeP> body(const std::vector<std::string>& stops, std::string& stop) {
        if (++block_depth_ > kMaxBlockDepth)
            fail(cur().pos,
                 "blocks are nested deeper than " + std::to_string(kMaxBlockDepth) + " levels");
        std::vector<NodeP> out;
        for (;;) {
            const Tok& t = cur();
            if (t.kind == TK::Eof) {
                if (!stops.empty())
                    fail(t.pos, "the template ends before '{% " + stops.back() + " %}'");
                break;
            }
            if (t.kind == TK::Text) {
                if (!t.s.empty()) {
                    auto n = std::make_unique<Node>(Node::T::Text, t.pos);
                    n->text = t.s;
                    out.push_back(std::move(n));
                }
                ++k_;
            } else if (t.kind == TK::VarBegin) {
                ++k_;
                auto n = std::make_unique<Node>(Node::T::Output, t.pos);
                n->expr = expression();
                if (cur().kind != TK::VarEnd) fail(cur().pos, "expected '}}'" + got());
                ++k_;
                out.push_back(std::move(n));
            } else if (t.kind == TK::BlockBegin) {
                const size_t at = t.pos;
                ++k_;
                const std::string tag = name();
                if (std::find(stops.begin(), stops.end(), tag) != stops.end()) {
                    stop = tag;
                    break;
                }
                out.push_back(statement(tag, at));
            } else {
                fail(t.pos, "unexpected token" + got());
            }
        }
        --block_depth_;
        return out;
    }

    NodeP statement(const std::string& tag, size_t at) {
        if (tag == "if") {
            auto n = std::make_unique<Node>(Node::T::If, at);
            for (std::string kw = "if";;) {
                ExprP cond = kw == "else" ? nullptr : expression();
                block_end();
                std::string stop;
                auto b = body({"elif", "else", "endif"}, stop);
                n->branches.emplace_back(std::move(cond), std::move(b));
                if (stop == "endif") break;
                if (kw == "else") fail(cur().pos, "'{% " + stop + " %}' after '{% else %}'");
                kw = stop;
            }
            block_end();
            return n;
        }
        if (tag == "for") {
            auto n = std::make_unique<Node>(Node::T::For, at);
            n->targets.push_back(name());
            while (is_op(",")) {
                ++k_;
                n->targets.push_back(name());
            }
            if (!is_name("in")) fail(cur().pos, "expected 'in'" + got());
            ++k_;
            n->expr = expression(/*allow_cond=*/false);
            if (is_name("if")) {
                ++k_;
                n->cond = expression(false);
            }
            if (is_name("recursive")) fail(cur().pos, "recursive for loops are not supported");
            block_end();
            std::string stop;
            n->body = body({"else", "endfor"}, stop);
            block_end();
            if (stop == "else") {
                n->else_body = body({"endfor"}, stop);
                block_end();
            }
            return n;
        }
        if (tag == "set") {
            std::vector<std::string> targets{name()};
            std::string attr;
            if (is_op(".")) {
                ++k_;
                attr = name();
            }
            while (attr.empty() && is_op(",")) {
                ++k_;
                targets.push_back(name());
            }
            if (cur().kind == TK::BlockEnd && attr.empty() && targets.size() == 1) {
                ++k_;
                auto n = std::make_unique<Node>(Node::T::SetBlock, at);
                n->targets = std::move(targets);
                std::string stop;
                n->body = body({"endset"}, stop);
                block_end();
                return n;
            }
            expect_op("=");
            auto n = std::make_unique<Node>(Node::T::Set, at);
            n->targets = std::move(targets);
            n->attr = std::move(attr);
            n->expr = expression();
            if (is_op(",")) n->expr = tuple_rest(std::move(n->expr));
            block_end();
            return n;
        }
        if (tag == "macro") {
            auto n = std::make_unique<Node>(Node::T::Macro, at);
            n->targets.push_back(name());
            expect_op("(");
            while (!is_op(")")) {
                std::string param = name();
                ExprP def;
                if (is_op("=")) {
                    ++k_;
                    def = expression();
                }
                n->params.emplace_back(std::move(param), std::move(def));
                if (!is_op(")")) expect_op(",");
            }
            ++k_;
            block_end();
            std::string stop;
            n->body = body({"endmacro"}, stop);
            if (cur().kind == TK::Name) ++k_;  // {% endmacro name %}
            block_end();
            return n;
        }
        if (tag == "break" || tag == "continue") {
            block_end();
            return std::make_unique<Node>(tag == "break" ? Node::T::Break : Node::T::Continue, at);
        }
        if (tag == "generation") {  // transformers' assistant-mask marker
            block_end();
            auto n = std::make_unique<Node>(Node::T::Block, at);
            std::string stop;
            n->body = body({"endgeneration"}, stop);
            block_end();
            return n;
        }
        if (tag == "filter") {
            auto n = std::make_unique<Node>(Node::T::FilterBlock, at);
            n->targets.push_back(name());
            if (is_op("(")) {
                ++k_;
                auto call = std::make_unique<Expr>(Expr::T::Call, at);
                call_args(*call);
                n->expr = std::move(call);
            }
            block_end();
            std::string stop;
            n->body = body({"endfilter"}, stop);
            block_end();
            return n;
        }
        fail(at, "'{% " + tag + " %}' is not a tag this engine supports (or is out of place)");
    }

    ExprP make(Expr::T type, size_t pos) { return std::make_unique<Expr>(type, pos); }
    ExprP add(ExprP e, ExprP child) {
        if (child) {
            e->depth = std::max(e->depth, child->depth + 1);
            if (e->depth > kMaxExprDepth)
                fail(e->pos, "the expression is nested deeper than " +
                                 std::to_string(kMaxExprDepth) + " levels");
        }
        e->args.push_back(std::move(child));
        return e;
    }

    ExprP tuple_rest(ExprP first) {
        auto t = make(Expr::T::Tuple, first->pos);
        t = add(std::move(t), std::move(first));
        while (is_op(",")) {
            ++k_;
            if (cur().kind == TK::BlockEnd || cur().kind == TK::VarEnd || is_op(")")) break;
            t = add(std::move(t), expression());
        }
        return t;
    }

    ExprP expression(bool allow_cond = true) {
        ExprP e = or_expr();
        while (allow_cond && is_name("if")) {
            const size_t at = cur().pos;
            ++k_;
            auto c = make(Expr::T::Cond, at);
            c = add(std::move(c), std::move(e));
            c = add(std::move(c), or_expr());
            if (is_name("else")) {
                ++k_;
                c = add(std::move(c), or_expr());
            }
            e = std::move(c);
        }
        return e;
    }

    ExprP binary(const std::string& op, ExprP a, ExprP b, size_t at) {
        auto e = make(Expr::T::Binary, at);
        e->name = op;
        e = add(std::move(e), std::move(a));
        return add(std::move(e), std::move(b));
    }

    ExprP or_expr() {
        ExprP e = and_expr();
        while (is_name("or")) {
            const size_t at = cur().pos;
            ++k_;
            e = binary("or", std::move(e), and_expr(), at);
        }
        return e;
    }
    ExprP and_expr() {
        ExprP e = not_expr();
        while (is_name("and")) {
            const size_t at = cur().pos;
            ++k_;
            e = binary("and", std::move(e), not_expr(), at);
        }
        return e;
    }
    ExprP not_expr() {
        if (is_name("not")) {
            const size_t at = cur().pos;
            ++k_;
            guard(at);
            auto e = make(Expr::T::Not, at);
            e = add(std::move(e), not_expr());
            --nesting_;
            return e;
        }
        return compare();
    }
    ExprP compare() {
        ExprP e = math1();
        for (;;) {
            const size_t at = cur().pos;
            std::string op;
            if (cur().kind == TK::Op && (cur().s == "==" || cur().s == "!=" || cur().s == "<" ||
                                         cur().s == ">" || cur().s == "<=" || cur().s == ">=")) {
                op = cur().s;
                ++k_;
            } else if (is_name("in")) {
                op = "in";
                ++k_;
            } else if (is_name("not") && peek().kind == TK::Name && peek().s == "in") {
                op = "not in";
                k_ += 2;
            } else {
                return e;
            }
            e = binary(op, std::move(e), math1(), at);
        }
    }
    ExprP math1() {
        ExprP e = concat();
        while (is_op("+") || is_op("-")) {
            const std::string op = cur().s;
            const size_t at = cur().pos;
            ++k_;
            e = binary(op, std::move(e), concat(), at);
        }
        return e;
    }
    ExprP concat() {
        ExprP e = math2();
        while (is_op("~")) {
            const size_t at = cur().pos;
            ++k_;
            e = binary("~", std::move(e), math2(), at);
        }
        return e;
    }
    ExprP math2() {
        ExprP e = power();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = cur().s;
            const size_t at = cur().pos;
            ++k_;
            e = binary(op, std::move(e), power(), at);
        }
        return e;
    }
    ExprP power() {
        ExprP e = unary(true);
        while (is_op("**")) {
            const size_t at = cur().pos;
            ++k_;
            e = binary("**", std::move(e), unary(true), at);
        }
        return e;
    }
    void guard(size_t at) {
        if (++nesting_ > kMaxExprDepth)
            fail(at, "the expression is nested deeper than " + std::to_string(kMaxExprDepth) +
                         " levels");
    }
    ExprP unary(bool with_filter) {
        ExprP e;
        if (is_op("-") || is_op("+")) {
            const size_t at = cur().pos;
            const bool neg = cur().s == "-";
            ++k_;
            guard(at);
            e = make(neg ? Expr::T::Neg : Expr::T::Pos, at);
            e = add(std::move(e), unary(false));
            --nesting_;
        } else {
            e = postfix(primary());
        }
        if (with_filter) e = filters(std::move(e));
        return e;
    }

    ExprP primary() {
        const Tok& t = cur();
        const size_t at = t.pos;
        switch (t.kind) {
            case TK::Name: {
                ++k_;
                if (t.s == "true" || t.s == "True") return literal(Value(true), at);
                if (t.s == "false" || t.s == "False") return literal(Value(false), at);
                if (t.s == "none" || t.s == "None") return literal(Value::none(), at);
                auto e = make(Expr::T::Name, at);
                e->name = t.s;
                return e;
            }
            case TK::Int:
                ++k_;
                return literal(Value(t.i), at);
            case TK::Float:
                ++k_;
                return literal(Value(t.f), at);
            case TK::Str: {
                std::string s;
                while (cur().kind == TK::Str) s += t_[k_++].s;  // adjacent literals join
                return literal(Value(std::move(s)), at);
            }
            case TK::Op:
                if (t.s == "(") {
                    ++k_;
                    guard(at);
                    ExprP e;
                    if (is_op(")")) {
                        e = make(Expr::T::Tuple, at);
                    } else {
                        e = expression();
                        if (is_op(",")) e = tuple_rest(std::move(e));
                    }
                    expect_op(")");
                    --nesting_;
                    return e;
                }
                if (t.s == "[") {
                    ++k_;
                    guard(at);
                    auto e = make(Expr::T::List, at);
                    while (!is_op("]")) {
                        e = add(std::move(e), expression());
                        if (!is_op("]")) expect_op(",");
                    }
                    ++k_;
                    --nesting_;
                    return e;
                }
                if (t.s == "{") {
                    ++k_;
                    guard(at);
                    auto e = make(Expr::T::Dict, at);
                    while (!is_op("}")) {
                        e = add(std::move(e), expression());
                        expect_op(":");
                        e = add(std::move(e), expression());
                        if (!is_op("}")) expect_op(",");
                    }
                    ++k_;
                    --nesting_;
                    return e;
                }
                break;
            default:
                break;
        }
        fail(at, "expected a value" + got());
    }

    ExprP literal(Value v, size_t at) {
        auto e = make(Expr::T::Literal, at);
        e->literal = std::move(v);
        return e;
    }

    void call_args(Expr& call) {
        guard(call.pos);
        while (!is_op(")")) {
            if (cur().kind == TK::Name && peek().kind == TK::Op && peek().s == "=") {
                std::string key = t_[k_].s;
                k_ += 2;
                ExprP v = expression();
                call.depth = std::max(call.depth, v->depth + 1);
                call.kwargs.emplace_back(std::move(key), std::move(v));
            } else {
                ExprP v = expression();
                call.depth = std::max(call.depth, v->depth + 1);
                call.args.push_back(std::move(v));
            }
            if (!is_op(")")) expect_op(",");
        }
        ++k_;
        --nesting_;
        if (call.depth > kMaxExprDepth)
            fail(call.pos, "the expression is nested deeper than " + std::to_string(kMaxExprDepth) +
                               " levels");
    }

    ExprP postfix(ExprP e) {
        for (;;) {
            const size_t at = cur().pos;
            if (is_op(".")) {
                ++k_;
                auto a = make(Expr::T::Attr, at);
                if (cur().kind == TK::Int) {
                    const Value index(cur().i);  // x.0: Jinja reads it as x[0]
                    a->type = Expr::T::Item;
                    ++k_;
                    a = add(std::move(a), std::move(e));
                    ExprP key = literal(index, at);
                    a = add(std::move(a), std::move(key));
                } else {
                    a->name = name();
                    a = add(std::move(a), std::move(e));
                }
                e = std::move(a);
            } else if (is_op("[")) {
                ++k_;
                guard(at);
                ExprP parts[3];
                bool slice = false;
                int n = 0;
                for (;;) {
                    if (!is_op(":") && !is_op("]")) parts[n] = expression();
                    if (is_op(":") && n < 2) {
                        slice = true;
                        ++n;
                        ++k_;
                        continue;
                    }
                    break;
                }
                expect_op("]");
                --nesting_;
                auto s = make(slice ? Expr::T::Slice : Expr::T::Item, at);
                s = add(std::move(s), std::move(e));
                if (!slice && !parts[0]) fail(at, "empty subscript '[]'");
                for (int q = 0; q < (slice ? 3 : 1); ++q)
                    s = add(std::move(s), std::move(parts[q]));
                e = std::move(s);
            } else if (is_op("(")) {
                ++k_;
                auto c = make(Expr::T::Call, e->pos);  // errors point at the callee
                c = add(std::move(c), std::move(e));
                call_args(*c);
                e = std::move(c);
            } else {
                return e;
            }
        }
    }

    ExprP filters(ExprP e) {
        for (;;) {
            const size_t at = cur().pos;
            if (is_op("|")) {
                ++k_;
                auto f = make(Expr::T::Filter, at);
                f->name = name();
                while (is_op(".")) {  // dotted filter names do not exist; refuse clearly
                    fail(cur().pos, "unknown filter '" + f->name + ".'");
                }
                f = add(std::move(f), std::move(e));
                if (is_op("(")) {
                    ++k_;
                    call_args(*f);
                }
                e = std::move(f);
            } else if (is_name("is")) {
                ++k_;
                auto t = make(Expr::T::Test, at);
                if (is_name("not")) {
                    t->negated = true;
                    ++k_;
                }
                t->name = name();
                t = add(std::move(t), std::move(e));
                if (is_op("(")) {
                    ++k_;
                    call_args(*t);
                } else if ((cur().kind == TK::Name || cur().kind == TK::Str ||
                            cur().kind == TK::Int || cur().kind == TK::Float || is_op("[") ||
                            is_op("{")) &&
                           !is_name("else") && !is_name("or") && !is_name("and") &&
                           !is_name("if") && !is_name("in") && !is_name("not") && !is_name("is")) {
                    guard(at);
                    t = add(std::move(t), postfix(primary()));
                    --nesting_;
                }
                e = std::move(t);
            } else {
                return e;
            }
        }
    }

    std::vector<Tok> t_;
    size_t k_ = 0;
    int nesting_ = 0;
    int block_depth_ = 0;
};

}  // namespace

NodeP parse_template(const std::string& source) {
    return Parser(Lexer(source).run()).run();
}

}  // namespace dwell::jinja
