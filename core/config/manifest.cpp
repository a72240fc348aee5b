// Device manifest parsing on toml++. The schema is documented in
// manifests/README.md; keep the two in step.
//
// Every problem becomes one dwell::Error line "file:line:column: what", so a
// host can print it verbatim and an editor can jump to it. We are strict about
// unknown sections and keys because a misspelt key silently falling back to a
// default (e.g. "budget_mib") is far harder to debug on a phone than a refusal.
#include "dwell/core/config/manifest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/graph.h"
#include "dwell/status.h"

namespace dwell {
namespace {

constexpr int64_t kMaxBudgetMb = int64_t{1} << 30;  // 1 PiB: far above any device, overflow-safe
constexpr int64_t kMinPageKb = 4;
constexpr int64_t kMaxPageKb = 1024;
constexpr int64_t kMaxThreads = 1024;
constexpr int64_t kMaxStepTimeoutMs = 600000;  // ten minutes: beyond that, no deadline is meant

constexpr std::array kTopLevelSections = {"device", "backend", "memory",  "cpu",
                                          "kv",     "thermal", "plugins", "sparsity"};
constexpr std::array kKvDtypes = {DWELL_F16, DWELL_F32, DWELL_Q8_0, DWELL_FP8_E4M3};

const char* type_name(toml::node_type t) {
    switch (t) {
        case toml::node_type::table:
            return "table";
        case toml::node_type::array:
            return "array";
        case toml::node_type::string:
            return "string";
        case toml::node_type::integer:
            return "integer";
        case toml::node_type::floating_point:
            return "float";
        case toml::node_type::boolean:
            return "bool";
        case toml::node_type::date:
            return "date";
        case toml::node_type::time:
            return "time";
        case toml::node_type::date_time:
            return "date-time";
        default:
            return "nothing";
    }
}

template <typename Names>
std::string join(const Names& names) {
    std::string out;
    for (const auto& n : names) {
        if (!out.empty()) out += ", ";
        out += n;
    }
    return out;
}

// Holds the file name used in every message and the folder that relative
// plugin search paths are resolved against.
class Parser {
public:
    Parser(std::string file, std::filesystem::path base_dir)
        : file_(std::move(file)), base_dir_(std::move(base_dir)) {}

    Manifest run(std::string_view text, const std::filesystem::path& source) {
        toml::table root;
        try {
            root = toml::parse(text, file_);
        } catch (const toml::parse_error& e) {
            fail(e.source().begin, std::string(e.description()));
        }

        Manifest m;
        m.source = source;
        check_keys(root, "the top level", kTopLevelSections, /*sections=*/true);

        if (const toml::node* n = root.get("device")) parse_device(table_of(*n, "[device]"), m);
        parse_backends(root.get("backend"), m);
        if (const toml::node* n = root.get("memory")) parse_memory(table_of(*n, "[memory]"), m);
        if (const toml::node* n = root.get("cpu")) parse_cpu(table_of(*n, "[cpu]"), m);
        if (const toml::node* n = root.get("kv")) parse_kv(table_of(*n, "[kv]"), m);
        if (const toml::node* n = root.get("sparsity"))
            parse_sparsity(table_of(*n, "[sparsity]"), m);
        if (const toml::node* n = root.get("thermal")) parse_thermal(table_of(*n, "[thermal]"), m);
        if (const toml::node* n = root.get("plugins")) parse_plugins(table_of(*n, "[plugins]"), m);
        return m;
    }

private:
    [[noreturn]] void fail(const toml::source_position& at, std::string what) const {
        // The message must stay one line; toml++ descriptions and user strings
        // quoted back to the user could otherwise smuggle in line breaks.
        std::replace(what.begin(), what.end(), '\n', ' ');
        std::replace(what.begin(), what.end(), '\r', ' ');
        const unsigned line = at.line ? at.line : 1;
        const unsigned column = at.column ? at.column : 1;
        throw Error(DWELL_ERR_INVALID_ARGUMENT, file_ + ":" + std::to_string(line) + ":" +
                                                    std::to_string(column) + ": " + what);
    }
    [[noreturn]] void fail(const toml::node& at, std::string what) const {
        fail(at.source().begin, std::move(what));
    }
    [[noreturn]] void wrong_type(const toml::node& n, const std::string& what,
                                 const char* expected) const {
        fail(n, what + " must be " + expected + ", got " + type_name(n.type()));
    }

    // Refuses the first unknown key in file order, naming the key, the
    // section and the keys that are allowed there.
    template <typename Names>
    void check_keys(const toml::table& t, const std::string& section, const Names& allowed,
                    bool sections = false) const {
        const toml::key* first = nullptr;
        for (auto&& entry : t) {
            // Not a structured binding: clang before 16 cannot capture one in a lambda.
            const toml::key& k = entry.first;
            const bool known = std::any_of(std::begin(allowed), std::end(allowed),
                                           [&](std::string_view a) { return k.str() == a; });
            if (known) continue;
            const auto& p = k.source().begin;
            if (!first || p.line < first->source().begin.line ||
                (p.line == first->source().begin.line && p.column < first->source().begin.column))
                first = &k;
        }
        if (!first) return;
        const std::string name(first->str());
        if (sections) {
            // A plain `key = value` above the first header is most likely a
            // key that belongs in a section; say so rather than "section".
            const toml::node* v = t.get(first->str());
            const bool is_section =
                v->is_table() || (v->is_array() && v->as_array()->is_array_of_tables());
            fail(first->source().begin, (is_section ? "unknown section [" + name + "]"
                                                    : "unknown top-level key '" + name + "'") +
                                            " (known sections: " + join(allowed) + ")");
        }
        fail(first->source().begin,
             "unknown key '" + name + "' in " + section + " (known: " + join(allowed) + ")");
    }

    const toml::table& table_of(const toml::node& n, const std::string& what) const {
        if (const toml::table* t = n.as_table()) return *t;
        wrong_type(n, what, "a table");
    }

    std::string string_of(const toml::node& n, const std::string& what) const {
        if (const auto* s = n.as_string()) return one_line(n.source().begin, s->get(), what);
        wrong_type(n, what, "a string");
    }

    // Manifest strings reappear in other one-line messages (match reports,
    // plugin and device names, paths), so they may not break lines.
    std::string one_line(const toml::source_position& at, std::string s,
                         const std::string& what) const {
        for (size_t i = 0; i < s.size(); ++i) {
            const auto c = static_cast<unsigned char>(s[i]);
            if ((c < 0x20 && c != '\t') || c == 0x7F) {
                char byte[8];
                std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned>(c));
                fail(at, what + " must be one line of text (byte " + std::to_string(i) + " is " +
                             byte + ", a control character)");
            }
        }
        return s;
    }

    int64_t int_of(const toml::node& n, const std::string& what, int64_t lo, int64_t hi) const {
        const auto* i = n.as_integer();
        if (!i) wrong_type(n, what, "an integer");
        const int64_t v = i->get();
        if (v < lo || v > hi) {
            fail(n, what + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                        ", got " + std::to_string(v));
        }
        return v;
    }

    double double_of(const toml::node& n, const std::string& what, double lo, double hi) const {
        double v = 0;
        if (const auto* i = n.as_integer()) {
            v = static_cast<double>(i->get());
        } else if (const auto* f = n.as_floating_point()) {
            v = f->get();
        } else {
            wrong_type(n, what, "a number");
        }
        if (!(v >= lo && v <= hi)) {
            fail(n, what + " must be between " + toml_number(lo) + " and " + toml_number(hi) +
                        ", got " + toml_number(v));
        }
        return v;
    }

    static std::string toml_number(double v) {
        std::ostringstream out;
        out << v;
        return out.str();
    }

    bool bool_of(const toml::node& n, const std::string& what) const {
        if (const auto* b = n.as_boolean()) return b->get();
        wrong_type(n, what, "a bool");
    }

    std::string choice_of(const toml::node& n, const std::string& what,
                          std::initializer_list<std::string_view> choices) const {
        std::string v = string_of(n, what);
        if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
            fail(n, what + " must be one of " + join(choices) + ", got '" + v + "'");
        }
        return v;
    }

    const toml::array& array_of(const toml::node& n, const std::string& what) const {
        if (const toml::array* a = n.as_array()) return *a;
        wrong_type(n, what, "an array");
    }

    std::vector<std::string> strings_of(const toml::node& n, const std::string& what) const {
        std::vector<std::string> out;
        const toml::array& a = array_of(n, what);
        for (size_t i = 0; i < a.size(); ++i) {
            out.push_back(string_of(a[i], what + "[" + std::to_string(i) + "]"));
        }
        return out;
    }

    void parse_device(const toml::table& t, Manifest& m) const {
        check_keys(t, "[device]",
                   std::array{"name", "match", "storage_read_mb_s", "dram_bandwidth_gb_s"});
        if (const toml::node* n = t.get("name")) m.name = string_of(*n, "[device] name");
        // Bounds well past any device of the next decade, so a unit mix-up
        // (bytes for MB, MB for GB) is refused rather than projected.
        if (const toml::node* n = t.get("storage_read_mb_s"))
            m.storage_read_mb_s = double_of(*n, "[device] storage_read_mb_s", 1, 1e6);
        if (const toml::node* n = t.get("dram_bandwidth_gb_s"))
            m.dram_bandwidth_gb_s = double_of(*n, "[device] dram_bandwidth_gb_s", 0.1, 1e4);
        if (const toml::node* n = t.get("match")) {
            const toml::table& mt = table_of(*n, "[device] match");
            check_keys(mt, "[device.match]",
                       std::array{"soc_model", "soc_manufacturer", "platform", "hardware", "soc_id",
                                  "soc_machine", "product", "cpu_part", "arch"});
            const auto list = [&](const char* key, std::vector<std::string>& dst) {
                if (const toml::node* v = mt.get(key))
                    dst = strings_of(*v, std::string("[device.match] ") + key);
            };
            list("soc_model", m.match.soc_model);
            list("soc_manufacturer", m.match.soc_manufacturer);
            list("platform", m.match.platform);
            list("hardware", m.match.hardware);
            list("soc_id", m.match.soc_id);
            list("soc_machine", m.match.soc_machine);
            list("product", m.match.product);
            list("cpu_part", m.match.cpu_part);
            list("arch", m.match.arch);
        }
    }

    void parse_backends(const toml::node* n, Manifest& m) const {
        if (!n) fail(toml::source_position{1, 1}, "no [[backend]] entry; at least one is required");
        const toml::array* a = n->as_array();
        if (!a || !a->is_array_of_tables()) {
            // `backend = []` is an empty array, and an empty array counts as
            // an array of tables for toml++; it is caught just below.
            if (n->is_table())
                fail(*n, "backend entries must be written [[backend]], not [backend]");
            if (!a) wrong_type(*n, "backend", "an array of tables ([[backend]])");
            if (!a->empty()) fail(*n, "backend must be an array of tables ([[backend]])");
        }
        if (a->empty()) fail(*n, "no [[backend]] entry; at least one is required");
        for (const toml::node& e : *a) {
            m.backends.push_back(parse_backend(*e.as_table()));
        }
    }

    ManifestBackend parse_backend(const toml::table& t) const {
        check_keys(t, "[[backend]]",
                   std::array{"plugin", "device", "options", "ops", "layers", "step_timeout_ms"});
        ManifestBackend b;
        b.line = static_cast<int32_t>(t.source().begin.line);
        const toml::node* plugin = t.get("plugin");
        if (!plugin) fail(t, "[[backend]] entry has no plugin (e.g. plugin = \"cpu\")");
        b.plugin = string_of(*plugin, "[[backend]] plugin");
        if (b.plugin.empty()) fail(*plugin, "[[backend]] plugin must not be empty");
        if (const toml::node* d = t.get("device")) b.device = string_of(*d, "[[backend]] device");
        if (const toml::node* o = t.get("options")) {
            for (auto&& [k, v] : table_of(*o, "[[backend]] options")) {
                const std::string key =
                    one_line(k.source().begin, std::string(k.str()), "[[backend]] option name");
                b.options.emplace(key, option_string(v, "[[backend]] options." + key));
            }
        }
        if (const toml::node* ops = t.get("ops")) {
            b.ops = strings_of(*ops, "[[backend]] ops");
            const toml::array& a = *ops->as_array();
            for (size_t i = 0; i < b.ops.size(); ++i) {
                if (!is_op_name(b.ops[i])) {
                    fail(a[i], "[[backend]] ops: unknown op '" + b.ops[i] +
                                   "' (known: " + join(op_names()) + ")");
                }
            }
        }
        if (const toml::node* layers = t.get("layers")) {
            const toml::array& a = array_of(*layers, "[[backend]] layers");
            for (size_t i = 0; i < a.size(); ++i) {
                b.layers.push_back(static_cast<int32_t>(
                    int_of(a[i], "[[backend]] layers[" + std::to_string(i) + "]", 0, INT32_MAX)));
            }
        }
        if (const toml::node* n = t.get("step_timeout_ms")) {
            b.step_timeout_ms = static_cast<int32_t>(
                int_of(*n, "[[backend]] step_timeout_ms", 1, kMaxStepTimeoutMs));
        }
        return b;
    }

    // Plugins take options as strings so that the ABI stays a flat list of
    // key/value pairs; convert here so each plugin does not re-implement it.
    std::string option_string(const toml::node& v, const std::string& what) const {
        switch (v.type()) {
            case toml::node_type::string:
                return one_line(v.source().begin, v.as_string()->get(), what);
            case toml::node_type::integer:
                return std::to_string(v.as_integer()->get());
            case toml::node_type::boolean:
                return v.as_boolean()->get() ? "true" : "false";
            case toml::node_type::floating_point: {
                // Shortest text that reads back to the same double, independent
                // of the C locale (unlike printf).
                std::array<char, 64> buf{};
                const auto r = std::to_chars(buf.data(), buf.data() + buf.size(),
                                             v.as_floating_point()->get());
                return std::string(buf.data(), r.ptr);
            }
            default:
                wrong_type(v, what, "a string, integer, float or bool");
        }
    }

    static std::vector<std::string_view> op_names() {
        std::vector<std::string_view> names;
        // Op 0 ("none") marks leaves; no backend executes it, so it cannot be
        // assigned.
        for (int op = 1; op < DWELL_OP_COUNT; ++op)
            names.emplace_back(dwell_op_name(static_cast<dwell_op>(op)));
        return names;
    }
    static bool is_op_name(std::string_view s) {
        const auto names = op_names();
        return std::find(names.begin(), names.end(), s) != names.end();
    }

    void parse_memory(const toml::table& t, Manifest& m) const {
        check_keys(
            t, "[memory]",
            std::array{"budget_mb", "page_kb", "weights", "mlock", "weight_budget_mb", "pin_layers",
                       "pin_auto", "prefetch_layers", "expert_prefetch_margin", "expert_readers"});
        if (const toml::node* n = t.get("budget_mb")) {
            m.memory.budget_bytes =
                static_cast<uint64_t>(int_of(*n, "[memory] budget_mb", 0, kMaxBudgetMb)) << 20;
        }
        if (const toml::node* n = t.get("page_kb")) {
            const auto* i = n->as_integer();
            if (!i) wrong_type(*n, "[memory] page_kb", "an integer");
            const int64_t kb = i->get();
            if (kb < kMinPageKb || kb > kMaxPageKb || (kb & (kb - 1)) != 0) {
                fail(*n, "[memory] page_kb must be a power of two between " +
                             std::to_string(kMinPageKb) + " and " + std::to_string(kMaxPageKb) +
                             ", got " + std::to_string(kb));
            }
            m.memory.page_size = static_cast<uint64_t>(kb) * 1024;
        }
        if (const toml::node* n = t.get("weights"))
            m.memory.weights = choice_of(*n, "[memory] weights", {"mmap", "load", "stream"});
        if (const toml::node* n = t.get("mlock")) m.memory.mlock = bool_of(*n, "[memory] mlock");
        if (const toml::node* n = t.get("weight_budget_mb")) {
            m.memory.weight_budget_bytes =
                static_cast<uint64_t>(int_of(*n, "[memory] weight_budget_mb", 0, kMaxBudgetMb))
                << 20;
        }
        if (const toml::node* n = t.get("pin_layers")) {
            const toml::array& a = array_of(*n, "[memory] pin_layers");
            for (size_t i = 0; i < a.size(); ++i) {
                m.memory.pin_layers.push_back(static_cast<int32_t>(
                    int_of(a[i], "[memory] pin_layers[" + std::to_string(i) + "]", 0, INT32_MAX)));
            }
        }
        if (const toml::node* n = t.get("pin_auto"))
            m.memory.pin_auto = bool_of(*n, "[memory] pin_auto");
        if (const toml::node* n = t.get("prefetch_layers")) {
            m.memory.prefetch_layers =
                static_cast<int32_t>(int_of(*n, "[memory] prefetch_layers", 0, 64));
        }
        if (const toml::node* n = t.get("expert_prefetch_margin")) {
            m.memory.expert_prefetch_margin =
                static_cast<int32_t>(int_of(*n, "[memory] expert_prefetch_margin", 0, 256));
        }
        if (const toml::node* n = t.get("expert_readers")) {
            m.memory.expert_readers =
                static_cast<int32_t>(int_of(*n, "[memory] expert_readers", 1, 64));
        }
    }

    void parse_cpu(const toml::table& t, Manifest& m) const {
        check_keys(t, "[cpu]", std::array{"threads", "affinity"});
        if (const toml::node* n = t.get("threads"))
            m.cpu.threads = static_cast<int32_t>(int_of(*n, "[cpu] threads", 0, kMaxThreads));
        if (const toml::node* n = t.get("affinity"))
            m.cpu.affinity = choice_of(*n, "[cpu] affinity", {"any", "big"});
    }

    void parse_sparsity(const toml::table& t, Manifest& m) const {
        check_keys(t, "[sparsity]", std::array{"fraction", "thresholds"});
        if (const toml::node* n = t.get("fraction")) {
            m.sparsity.fraction =
                static_cast<float>(double_of(*n, "[sparsity] fraction", 0, kMaxSparsity));
        }
        if (const toml::node* n = t.get("thresholds")) {
            const std::string s = string_of(*n, "[sparsity] thresholds");
            if (s.empty()) fail(*n, "[sparsity] thresholds must not be empty");
            std::filesystem::path p(s);
            if (p.is_relative()) p = base_dir_ / p;
            m.sparsity.thresholds = p.lexically_normal();
            if (m.sparsity.fraction > 0.0f) {
                fail(*n,
                     "[sparsity] has both fraction and thresholds: keep one (thresholds are "
                     "calibrated per input, fraction applies per token)");
            }
        }
    }

    void parse_kv(const toml::table& t, Manifest& m) const {
        check_keys(t, "[kv]", std::array{"dtype", "prefix_cache_mb"});
        if (const toml::node* n = t.get("prefix_cache_mb")) {
            m.kv.prefix_cache_bytes =
                static_cast<uint64_t>(int_of(*n, "[kv] prefix_cache_mb", 0, 1 << 20)) << 20;
        }
        if (const toml::node* n = t.get("dtype")) {
            const std::string v = string_of(*n, "[kv] dtype");
            std::vector<std::string_view> names;
            for (dwell_dtype d : kKvDtypes) {
                names.emplace_back(dwell_dtype_name(d));
                if (v == dwell_dtype_name(d)) {
                    m.kv.dtype = d;
                    return;
                }
            }
            fail(*n, "[kv] dtype must be one of " + join(names) + ", got '" + v + "'");
        }
    }

    // [thermal]: the governor's sensors, controller and levers
    // (ThermalConfig, manifests/README.md).
    void parse_thermal(const toml::table& t, Manifest& m) const {
        check_keys(
            t, "[thermal]",
            std::array{"enabled", "zones", "battery_power", "period_ms", "target_c", "limit_c",
                       "kp", "ki", "kd", "min_duty", "min_thread_share", "offload", "devfreq"});
        ThermalConfig& c = m.thermal;
        m.has_thermal = true;
        if (const toml::node* n = t.get("enabled")) c.enabled = bool_of(*n, "[thermal] enabled");
        if (const toml::node* n = t.get("zones")) c.zones = strings_of(*n, "[thermal] zones");
        if (const toml::node* n = t.get("battery_power"))
            c.battery_power = bool_of(*n, "[thermal] battery_power");
        if (const toml::node* n = t.get("period_ms"))
            c.period_ms = static_cast<int32_t>(int_of(*n, "[thermal] period_ms", 50, 60000));
        if (const toml::node* n = t.get("target_c"))
            c.target_c = double_of(*n, "[thermal] target_c", 20, 110);
        if (const toml::node* n = t.get("limit_c"))
            c.limit_c = double_of(*n, "[thermal] limit_c", 20, 120);
        if (c.limit_c <= c.target_c)
            fail(t.source().begin, "[thermal] limit_c (" + std::to_string(c.limit_c) +
                                       ") must be above target_c (" + std::to_string(c.target_c) +
                                       ")");
        if (const toml::node* n = t.get("kp")) c.gains.kp = double_of(*n, "[thermal] kp", 0, 100);
        if (const toml::node* n = t.get("ki")) c.gains.ki = double_of(*n, "[thermal] ki", 0, 100);
        if (const toml::node* n = t.get("kd")) c.gains.kd = double_of(*n, "[thermal] kd", 0, 100);
        if (const toml::node* n = t.get("min_duty"))
            c.min_duty = double_of(*n, "[thermal] min_duty", 0.05, 1);
        if (const toml::node* n = t.get("min_thread_share"))
            c.min_thread_share = double_of(*n, "[thermal] min_thread_share", 0.05, 1);
        if (const toml::node* n = t.get("offload")) c.offload = bool_of(*n, "[thermal] offload");
        if (const toml::node* n = t.get("devfreq")) {
            const toml::array& a = array_of(*n, "[thermal] devfreq");
            for (size_t i = 0; i < a.size(); ++i) {
                const std::string what = "[thermal] devfreq[" + std::to_string(i) + "]";
                const toml::table& d = table_of(a[i], what);
                check_keys(d, what, std::array{"path", "cap_khz"});
                ThermalConfig::Devfreq df;
                if (const toml::node* p = d.get("path")) {
                    df.path = string_of(*p, what + " path");
                    // Its max_freq is written: the path must name a folder
                    // inside the device root, never climb out of it.
                    if (!devfreq_path_inside_root(df.path))
                        fail(p->source().begin,
                             what + " path '" + printable_name(df.path, 240) +
                                 "' must be an absolute device path without '..' components "
                                 "(e.g. /sys/class/devfreq/gpu)");
                } else {
                    fail(d.source().begin, what + " needs a path (a devfreq device folder)");
                }
                if (const toml::node* k = d.get("cap_khz"))
                    df.cap_khz = int_of(*k, what + " cap_khz", 0, int64_t{100} << 20);
                c.devfreq.push_back(df);
            }
        }
    }

    void parse_plugins(const toml::table& t, Manifest& m) const {
        check_keys(t, "[plugins]", std::array{"search_paths", "sha256"});
        if (const toml::node* n = t.get("search_paths")) {
            const toml::array& a = array_of(*n, "[plugins] search_paths");
            for (size_t i = 0; i < a.size(); ++i) {
                const std::string what = "[plugins] search_paths[" + std::to_string(i) + "]";
                const std::string s = string_of(a[i], what);
                if (s.empty()) fail(a[i], what + " must not be empty");
                // No "~" expansion: there is no portable home folder on a
                // phone, and a literal path is what the file says.
                std::filesystem::path p(s);
                if (p.is_relative()) p = base_dir_ / p;
                m.plugins.search_paths.push_back(p.lexically_normal());
            }
        }
        if (const toml::node* n = t.get("sha256")) {
            for (auto&& [k, v] : table_of(*n, "[plugins] sha256")) {
                const std::string what = "[plugins.sha256] " + std::string(k.str());
                std::string h = string_of(v, what);
                const bool hex = h.size() == 64 && std::all_of(h.begin(), h.end(), [](char c) {
                                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
                                            (c >= 'A' && c <= 'F');
                                 });
                if (!hex) {
                    fail(v, what + " must be 64 hexadecimal digits, got " +
                                std::to_string(h.size()) + " characters '" + h + "'");
                }
                // Stored lowercase so the loader can compare with its own digest.
                std::transform(h.begin(), h.end(), h.begin(),
                               [](char c) { return (c >= 'A' && c <= 'F') ? c - 'A' + 'a' : c; });
                m.plugins.sha256.emplace(std::string(k.str()), std::move(h));
            }
        }
    }

    std::string file_;
    std::filesystem::path base_dir_;
};

// A manifest is a page of settings; anything far larger is not one.
constexpr size_t kMaxManifestBytes = size_t{1} << 20;

Error too_large(const std::string& file) {
    return Error(DWELL_ERR_INVALID_ARGUMENT, file + ": the manifest is larger than " +
                                                 std::to_string(kMaxManifestBytes >> 20) +
                                                 " MiB; is this the right file?");
}

std::filesystem::path absolute_or_same(const std::filesystem::path& p) {
    std::error_code ec;
    std::filesystem::path a = std::filesystem::absolute(p, ec);
    return ec ? p : a;
}

}  // namespace

Manifest Manifest::load(const std::filesystem::path& path) {
    const std::string file = path.string();
    // open/fread rather than ifstream so the reason (errno) reaches the user.
    // O_NONBLOCK: a FIFO must be refused, not waited on for a writer; a
    // device is read (bounded by the size limit below).
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw Error(DWELL_ERR_IO, file + ": cannot read manifest: " + std::strerror(errno));
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(::fdopen(fd, "rb"), &std::fclose);
    if (!f) {
        const int err = errno;
        ::close(fd);
        throw Error(DWELL_ERR_IO, file + ": cannot read manifest: " + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        throw Error(DWELL_ERR_IO, file + ": cannot read manifest: " + std::strerror(errno));
    if (S_ISDIR(st.st_mode))
        throw Error(DWELL_ERR_IO, file + ": cannot read manifest: " + std::strerror(EISDIR));
    if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
        throw Error(DWELL_ERR_IO, file + ": is a " + (S_ISFIFO(st.st_mode) ? "FIFO" : "socket") +
                                      ", not a manifest file: refused; give the path of a "
                                      ".toml file");
    }
    // Reads block as usual from here on (a device may need it).
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::string text;
    std::array<char, 8192> buf;
    for (;;) {
        const size_t n = std::fread(buf.data(), 1, buf.size(), f.get());
        text.append(buf.data(), n);
        // Checked while reading: the path may name an endless device.
        if (text.size() > kMaxManifestBytes) throw too_large(file);
        if (n < buf.size()) break;
    }
    if (std::ferror(f.get()))
        throw Error(DWELL_ERR_IO, file + ": cannot read manifest: " + std::strerror(errno));
    return Parser(file, absolute_or_same(path).parent_path()).run(text, path);
}

Manifest Manifest::parse(std::string_view text, const std::filesystem::path& source) {
    if (text.size() > kMaxManifestBytes)
        throw too_large(source.empty() ? std::string("<string>") : source.string());
    // A manifest given as text has no folder of its own: relative search
    // paths then resolve against the source's folder, or the working folder.
    std::error_code ec;
    const std::filesystem::path base =
        source.empty() ? std::filesystem::current_path(ec) : absolute_or_same(source).parent_path();
    return Parser(source.empty() ? std::string("<string>") : source.string(), base)
        .run(text, source.empty() ? std::filesystem::path("<string>") : source);
}

}  // namespace dwell
