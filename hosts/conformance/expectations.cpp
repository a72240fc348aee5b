#include "expectations.hpp"

#include <fnmatch.h>
#include <toml++/toml.h>

#include <stdexcept>

#include "dwell/graph.h"

namespace dwell::conformance {
namespace {

[[noreturn]] void fail(const std::filesystem::path& file, const toml::source_region& at,
                       const std::string& what) {
    throw std::runtime_error(file.string() + ":" + std::to_string(at.begin.line) + ":" +
                             std::to_string(at.begin.column) + ": " + what);
}

bool is_op_name(const std::string& name) {
    for (int op = 1; op < DWELL_OP_COUNT; ++op)
        if (name == dwell_op_name(static_cast<dwell_op>(op))) return true;
    return false;
}

std::string op_names() {
    std::string all;
    for (int op = 1; op < DWELL_OP_COUNT; ++op)
        all += (all.empty() ? "" : ", ") + std::string(dwell_op_name(static_cast<dwell_op>(op)));
    return all;
}

}  // namespace

const Decline* Expectations::decline_for(const std::string& name) const {
    for (const Decline& d : declines)
        for (const std::string& p : d.patterns)
            if (::fnmatch(p.c_str(), name.c_str(), 0) == 0) return &d;
    return nullptr;
}

Expectations load_expectations(const std::filesystem::path& file,
                               const std::vector<std::string>& case_names) {
    Expectations e;
    e.source = file;
    toml::table root;
    try {
        root = toml::parse_file(file.string());
    } catch (const toml::parse_error& err) {
        fail(file, err.source(), std::string(err.description()));
    }
    for (const auto& [key, node] : root) {
        const std::string k(key.str());
        if (k == "decline") {
            const toml::array* list = node.as_array();
            if (!list)
                fail(file, node.source(), "decline must be an array of tables ([[decline]])");
            for (const toml::node& item : *list) {
                const toml::table* t = item.as_table();
                if (!t) fail(file, item.source(), "each [[decline]] must be a table");
                Decline d;
                d.line = static_cast<int>(item.source().begin.line);
                for (const auto& [dk, dv] : *t) {
                    const std::string name(dk.str());
                    if (name == "reason") {
                        const auto r = dv.value<std::string>();
                        if (!r || r->empty())
                            fail(file, dv.source(),
                                 "[[decline]] reason must be a non-empty string");
                        d.reason = *r;
                    } else if (name == "cases") {
                        const toml::array* a = dv.as_array();
                        if (!a || a->empty())
                            fail(file, dv.source(),
                                 "[[decline]] cases must be a non-empty array of case-name globs");
                        for (const toml::node& p : *a) {
                            const auto s = p.value<std::string>();
                            if (!s || s->empty())
                                fail(file, p.source(), "[[decline]] cases: each must be a string");
                            bool matches = false;
                            for (const std::string& c : case_names)
                                matches = matches || ::fnmatch(s->c_str(), c.c_str(), 0) == 0;
                            if (!matches)
                                fail(file, p.source(),
                                     "[[decline]] cases: '" + *s +
                                         "' matches no case (dwell-conformance --list names them)");
                            d.patterns.push_back(*s);
                        }
                    } else {
                        fail(file, dv.source(),
                             "unknown key '" + name + "' in [[decline]] (cases, reason)");
                    }
                }
                if (d.patterns.empty()) fail(file, item.source(), "[[decline]] without cases");
                if (d.reason.empty())
                    fail(file, item.source(), "[[decline]] without a reason: say why, by design");
                e.declines.push_back(std::move(d));
            }
        } else if (k == "tolerance") {
            const toml::table* t = node.as_table();
            if (!t) fail(file, node.source(), "tolerance must be a table ([tolerance])");
            for (const auto& [op, v] : *t) {
                const std::string name(op.str());
                if (!is_op_name(name))
                    fail(file, v.source(),
                         "[tolerance] '" + name + "' is not an op (" + op_names() + ")");
                const auto x = v.value<double>();
                if (!x || !(*x >= 0) || *x > 1)
                    fail(file, v.source(), "[tolerance] " + name + " must be a number in [0, 1]");
                e.tolerance[name] = *x;
            }
        } else if (k == "options") {
            const toml::table* t = node.as_table();
            if (!t) fail(file, node.source(), "options must be a table ([options])");
            for (const auto& [ok, v] : *t) {
                const auto s = v.value<std::string>();
                if (!v.is_string() || !s)
                    fail(file, v.source(),
                         "[options] " + std::string(ok.str()) +
                             " must be a string (as in a manifest)");
                e.options[std::string(ok.str())] = *s;
            }
        } else {
            fail(file, node.source(), "unknown key '" + k + "' (decline, tolerance, options)");
        }
    }
    return e;
}

}  // namespace dwell::conformance
