// The syntax tree of a parsed Jinja template (internal to the engine of
// dwell/core/text/jinja.hpp: jinja_parse.cpp builds it, jinja_render.cpp
// walks it). Every node keeps its byte offset in the template for errors.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dwell/core/text/jinja.hpp"

namespace dwell::jinja {

struct Expr;
using ExprP = std::unique_ptr<Expr>;

struct Expr {
    enum class T {
        Literal,
        Name,
        List,
        Dict,
        Tuple,
        Attr,
        Item,
        Slice,
        Call,
        Filter,
        Test,
        Neg,
        Pos,
        Not,
        Binary,
        Cond
    };
    Expr(T t, size_t p) : type(t), pos(p) {}
    T type;
    size_t pos;
    int depth = 1;         // of the subtree, bounded by the parser
    bool negated = false;  // `is not`
    std::string name;      // variable, attribute, filter, test or operator
    Value literal;
    // Operands: Attr/Item/Slice/Call/Filter/Test have their subject first
    // (a Slice has 3 more, null when absent); Dict alternates key, value;
    // Cond is then, condition[, else].
    std::vector<ExprP> args;
    std::vector<std::pair<std::string, ExprP>> kwargs;
};

struct Node;
using NodeP = std::unique_ptr<Node>;

struct Node {
    enum class T {
        Block,
        Text,
        Output,
        If,
        For,
        Set,
        SetBlock,
        Macro,
        Break,
        Continue,
        FilterBlock
    };
    Node(T t, size_t p) : type(t), pos(p) {}
    T type;
    size_t pos;
    std::string text;
    ExprP expr;  // Output's value, For's sequence, Set's value, FilterBlock's call args
    ExprP cond;  // For's `if`
    std::vector<std::pair<ExprP, std::vector<NodeP>>> branches;  // If; else has no condition
    std::vector<std::string> targets;                   // For/Set names, Macro/FilterBlock name
    std::string attr;                                   // `set ns.attr`
    std::vector<std::pair<std::string, ExprP>> params;  // Macro
    std::vector<NodeP> body, else_body;
};

// A template error at a byte offset; the public API turns it into one
// dwell::Error line.
struct SyntaxError {
    size_t pos;
    std::string what;
};

NodeP parse_template(const std::string& source);
// "line L column C" of a byte offset.
std::string position_text(const std::string& source, size_t pos);

}  // namespace dwell::jinja
