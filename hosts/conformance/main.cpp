// `dwell-conformance`: runs every conformance case (cases.hpp) as a one-node
// graph on one backend plugin, through the runtime as the scheduler runs
// it, and compares the result with the double-precision reference.
//
// The plugin's conformance.toml (expectations.hpp; by default beside the
// plugin as libdwell-NAME.conformance.toml) lists the cases it declines by
// design. Every case ends as one of: pass, declined as expected, FAILED
// (wrong result or compute error), UNEXPECTED PASS (listed as declined, but
// taken and right: the list is stale), UNEXPECTED DECLINE (declined, not
// listed). Exit 0 when every case is pass or declined as expected, 1
// otherwise, 2 for a bad option or expectations file (before any plugin
// loads), 77 when the plugin found no usable device (nothing was tested).
#include <fnmatch.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cases.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "expectations.hpp"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace dwell::conformance {
namespace {

constexpr int kUsage = 2;
constexpr int kNoDevice = 77;

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A private folder for the generated manifest, removed on every exit path.
class TempDir {
public:
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "dwell-conformance-XXXXXX").string();
        if (!::mkdtemp(tmpl.data()))
            throw std::runtime_error("cannot create a temporary folder under " +
                                     fs::temp_directory_path().string());
        path_ = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

// "cpu" for .../libdwell-cpu.so; empty when the file is not so named (the
// runtime finds plugins by that name).
std::string plugin_name_of(const fs::path& file) {
    const std::string f = file.filename().string();
    const std::string prefix = "libdwell-", suffix = ".so";
    if (f.size() <= prefix.size() + suffix.size() || f.rfind(prefix, 0) != 0 ||
        f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0)
        return {};
    return f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
}

// The plugin path as the runtime searches it after a manifest's folders:
// $DWELL_PLUGIN_PATH, then <exe>/../lib/dwell.
std::vector<fs::path> plugin_path() {
    std::vector<fs::path> dirs;
    if (const char* env = std::getenv("DWELL_PLUGIN_PATH"); env && *env) {
        std::stringstream ss(env);
        std::string item;
        while (std::getline(ss, item, ':'))
            if (!item.empty()) dirs.emplace_back(item);
    }
    boost::dll::fs::error_code ec;
    const fs::path exe = boost::dll::program_location(ec);
    if (!ec) dirs.push_back((exe.parent_path() / ".." / "lib" / "dwell").lexically_normal());
    return dirs;
}

// Why `p` is not a regular file, for a one-line message: missing, or what it is.
std::string not_a_file(const fs::path& p) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::exists(st)) return "no such file";
    if (fs::is_directory(st)) return "a folder, not a file";
    return "not a regular file (a FIFO, socket or device)";
}

// --plugin is a file (.../libdwell-NAME.so) or a plugin name looked up on
// the plugin path.
fs::path resolve_plugin(const std::string& arg) {
    if (arg.find('/') != std::string::npos || arg.ends_with(".so")) {
        std::error_code ec;
        if (!fs::is_regular_file(arg, ec))
            throw UsageError("--plugin " + arg + ": " + not_a_file(arg) +
                             " (give libdwell-NAME.so or a name)");
        if (plugin_name_of(arg).empty())
            throw UsageError("--plugin " + arg +
                             ": a plugin file must be named libdwell-NAME.so (the runtime finds "
                             "plugins by that name)");
        return fs::absolute(arg).lexically_normal();
    }
    std::string tried;
    for (const fs::path& d : plugin_path()) {
        const fs::path f = d / ("libdwell-" + arg + ".so");
        std::error_code ec;
        if (fs::is_regular_file(f, ec)) return fs::absolute(f).lexically_normal();
        tried += (tried.empty() ? "" : ", ") + d.string();
    }
    throw UsageError("--plugin " + arg + ": libdwell-" + arg + ".so is in no plugin folder (" +
                     (tried.empty() ? "none" : tried) +
                     "); give its path, or add its folder to DWELL_PLUGIN_PATH");
}

std::pair<std::string, std::string> key_value(const std::string& flag, const std::string& s) {
    const size_t eq = s.find('=');
    if (eq == 0 || eq == std::string::npos)
        throw UsageError(flag + " " + s + ": expected KEY=VALUE");
    return {s.substr(0, eq), s.substr(eq + 1)};
}

double max_abs(const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::fabs(x));
    return m;
}

std::string fmt(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", x);
    return b;
}

struct Settings {
    fs::path plugin;
    std::string name;
    std::optional<uint32_t> device;
    std::map<std::string, std::string> options;
};

std::unique_ptr<Runtime> make_runtime(const Settings& s, const TempDir& dir,
                                      const std::optional<std::string>& device_name) {
    toml::table entry{{"plugin", s.name}};
    if (device_name) entry.insert("device", *device_name);
    if (!s.options.empty()) {
        toml::table opts;
        for (const auto& [k, v] : s.options) opts.insert(k, v);
        entry.insert("options", std::move(opts));
    }
    const toml::table manifest{
        {"device", toml::table{{"name", "conformance"}}},
        {"backend", toml::array{std::move(entry)}},
        {"plugins", toml::table{{"search_paths", toml::array{s.plugin.parent_path().string()}}}}};
    const fs::path file = dir.path() / "manifest.toml";
    {
        std::ofstream out(file);
        out << manifest << "\n";
        if (!out) throw std::runtime_error("cannot write " + file.string());
    }
    RuntimeOptions o;
    o.manifest = file;
    o.require_backend = false;
    return std::make_unique<Runtime>(o);
}

enum class Outcome { Pass, DeclinedAsExpected, Failed, UnexpectedPass, UnexpectedDecline };

// --plugin and --device.
Settings plugin_settings(const po::variables_map& vm) {
    Settings s;
    s.plugin = resolve_plugin(vm["plugin"].as<std::string>());
    s.name = plugin_name_of(s.plugin);
    if (vm.count("device")) {
        const int d = vm["device"].as<int>();
        if (d < 0) throw UsageError("--device " + std::to_string(d) + ": must be 0 or more");
        s.device = static_cast<uint32_t>(d);
    }
    return s;
}

// The --filter globs, each of which must match some case.
std::vector<std::string> checked_filters(const po::variables_map& vm,
                                         const std::vector<std::string>& names) {
    std::vector<std::string> filters;
    if (vm.count("filter")) filters = vm["filter"].as<std::vector<std::string>>();
    for (const std::string& f : filters) {
        bool any = false;
        for (const std::string& n : names) any = any || ::fnmatch(f.c_str(), n.c_str(), 0) == 0;
        if (!any) throw UsageError("--filter " + f + ": matches no case (--list names them)");
    }
    return filters;
}

bool is_selected(const std::vector<std::string>& filters, const std::string& name) {
    bool selected = filters.empty();
    for (const std::string& f : filters)
        selected = selected || ::fnmatch(f.c_str(), name.c_str(), 0) == 0;
    return selected;
}

// The expectations file: --expectations, else beside the plugin; empty
// when there is none.
fs::path expectations_file(const po::variables_map& vm, const Settings& s) {
    fs::path efile;
    if (vm.count("expectations")) {
        efile = vm["expectations"].as<std::string>();
        std::error_code ec;
        if (!fs::is_regular_file(efile, ec))
            throw UsageError("--expectations " + efile.string() + ": " + not_a_file(efile));
    } else {
        const fs::path beside =
            s.plugin.parent_path() / ("libdwell-" + s.name + ".conformance.toml");
        std::error_code ec;
        if (fs::is_regular_file(beside, ec)) efile = beside;
    }
    return efile;
}

Expectations read_expectations(const fs::path& efile, const std::vector<std::string>& names) {
    if (efile.empty()) return {};
    try {
        return load_expectations(efile, names);
    } catch (const std::runtime_error& e) {
        throw UsageError(e.what());
    }
}

// The backend options: the expectations file's, then --option over them.
void apply_options(const po::variables_map& vm, const Expectations& expect, Settings& s) {
    s.options = expect.options;
    if (vm.count("option"))
        for (const std::string& kv : vm["option"].as<std::vector<std::string>>()) {
            auto [k, v] = key_value("--option", kv);
            s.options[k] = v;
        }
}

// Vendor libraries (or their test doubles) that a plugin finds through
// the environment; set before the plugin loads.
void export_env(const po::variables_map& vm) {
    if (vm.count("env"))
        for (const std::string& kv : vm["env"].as<std::vector<std::string>>()) {
            auto [k, v] = key_value("--env", kv);
            ::setenv(k.c_str(), v.c_str(), 1);
        }
}

// With --device N, the runtime again with that device named in the
// manifest when the first one is another; false (after saying why) when
// the plugin has no device N.
bool select_device(const Settings& s, const TempDir& dir, std::unique_ptr<Runtime>& runtime) {
    if (!s.device || runtime->backends().empty()) return true;
    // Device N by index: its name, for the manifest.
    const Backend& first = *runtime->backends().front();
    uint32_t count = 0;
    dwell_device_info info{};
    info.struct_size = sizeof(info);
    if (first.api().device_count(first.api().self, &count) != DWELL_OK || *s.device >= count ||
        first.api().device_info(first.api().self, *s.device, &info) != DWELL_OK) {
        std::cerr << "dwell-conformance: --device " << *s.device << ": the plugin has " << count
                  << " device(s) (0.." << (count ? count - 1 : 0) << ")\n";
        return false;
    }
    const std::string want = info.name ? info.name : "";
    const char* chosen = first.device_info().name;
    if (want != (chosen ? chosen : "")) {
        runtime.reset();
        runtime = make_runtime(s, dir, want);
    }
    return true;
}

// The exit code when the runtime did not get the plugin's backend (nothing
// to test, or a failure), else nullopt.
std::optional<int> backend_missing(const Runtime& runtime, const Settings& s) {
    if (runtime.backends().empty()) {
        std::string why = "not selected";
        for (const auto& c : runtime.backend_choices()) why = c.reason;
        // No device is nothing tested; a plugin that cannot load, or fails
        // on a device it found, is a failure.
        if (why.rfind("plugin ", 0) == 0 ||
            why.find("initialisation failed") != std::string::npos) {
            std::cout << "dwell-conformance: " << s.plugin.string() << ": " << why << "\n";
            return 1;
        }
        std::cout << "SKIPPED: " << s.name << " backend unavailable: " << why << "\n";
        return kNoDevice;
    }
    const Backend& be = *runtime.backends().front();
    if (fs::weakly_canonical(be.plugin().path()) != fs::weakly_canonical(s.plugin)) {
        std::cout << "dwell-conformance: the runtime loaded " << be.plugin().path().string()
                  << ", not " << s.plugin.string() << "\n";
        return 1;
    }
    return std::nullopt;
}

void print_header(const Backend& be, const Settings& s, const fs::path& efile,
                  const Expectations& expect) {
    std::cout << "dwell-conformance: " << be.label() << " (" << s.plugin.string() << ", "
              << be.plugin().version() << ")\n";
    std::cout << "expectations: "
              << (efile.empty() ? "none (every case must pass)" : efile.string()) << "\n";
    if (!s.options.empty()) {
        std::cout << "options:";
        for (const auto& [k, v] : s.options) std::cout << " " << k << "=" << v;
        std::cout << "\n";
    }
    for (const auto& [op, tol] : expect.tolerance)
        std::cout << "tolerance: " << op << " " << fmt(tol) << " (the plugin's override)\n";
}

// How a case ended, and what its report line says.
struct Verdict {
    Outcome outcome;
    std::string label;
    std::string detail;
};

// A case the plugin's supports_op declined: as expected when listed.
Verdict judge_decline(const Decline* declined_by_design, const std::string& why) {
    if (declined_by_design)
        return {Outcome::DeclinedAsExpected, "declined as expected",
                declined_by_design->reason + (why.empty() ? "" : " (the plugin: " + why + ")")};
    return {Outcome::UnexpectedDecline, "UNEXPECTED DECLINE",
            "the plugin says: " + (why.empty() ? std::string("(no reason)") : why) +
                " (fix supports_op, or list the case in conformance.toml with why it "
                "is declined by design)"};
}

// The computed output as doubles, read as the case says.
std::vector<double> read_output(OpTestGraph& g, const Case& c, int out) {
    std::vector<double> got;
    if (c.out == Case::Out::F32)
        for (float v : g.f32(out)) got.push_back(v);
    if (c.out == Case::Out::Decoded) got = decode_rows(g, out);
    if (c.out == Case::Out::I32)
        for (int32_t v : g.i32(out)) got.push_back(v);
    return got;
}

// A computed output against the reference, within the bound.
Verdict judge_values(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const Decline* declined_by_design) {
    if (got.size() != want.size()) {
        return {Outcome::Failed, "FAILED",
                std::to_string(got.size()) + " values, want " + std::to_string(want.size())};
    }
    const double bound = tol * std::max(1.0, max_abs(want));
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double e = std::fabs(got[i] - want[i]);
        if (!(e <= bound)) ++bad;
        // NaN counts as the worst error.
        worst = std::isnan(e) ? e : std::max(worst, e);
    }
    const std::string error = "worst error " + fmt(worst) + ", bound " + fmt(bound);
    if (bad != 0) {
        return {Outcome::Failed, "FAILED",
                std::to_string(bad) + " of " + std::to_string(got.size()) + " values off; " +
                    error + (declined_by_design ? " (and conformance.toml says it declines)" : "")};
    }
    if (declined_by_design) {
        return {Outcome::UnexpectedPass, "UNEXPECTED PASS",
                "taken and right, but conformance.toml (line " +
                    std::to_string(declined_by_design->line) + ") says it declines (" +
                    declined_by_design->reason + "): remove the case from the list"};
    }
    return {Outcome::Pass, "pass", error};
}

// Case `c` as a one-node graph on the backend, against its reference.
Verdict run_case(const Backend& be, const Case& c, const Expectations& expect) {
    const Decline* declined_by_design = expect.decline_for(c.name);
    OpTestGraph g;
    const std::vector<double> want = c.build(g);
    const dwell_graph cg = g.graph();
    const int32_t node = cg.n_nodes - 1;
    const std::string op = dwell_op_name(dwell_graph_node(&cg, node)->op);
    if (!be.api().supports_op(be.context(), &cg, node))
        return judge_decline(declined_by_design, be.last_error());
    for (int call = 0; call < c.calls; ++call) {
        if (be.api().graph_compute(be.context(), &cg, &node, 1) != DWELL_OK)
            return {Outcome::Failed, "FAILED", "graph_compute: " + be.last_error()};
    }
    const dwell_node& n = *dwell_graph_node(&cg, node);
    std::vector<double> got = read_output(g, c, n.output);
    if (c.written_input >= 0 && c.written_input < n.n_inputs)
        for (float v : g.f32(n.inputs[c.written_input])) got.push_back(v);
    const auto tol_it = expect.tolerance.find(op);
    const double tol = tol_it != expect.tolerance.end() ? tol_it->second : c.tol;
    return judge_values(got, want, tol, declined_by_design);
}

void print_verdict(const Verdict& v, const Case& c) {
    std::cout << v.label << std::string(v.label.size() < 22 ? 22 - v.label.size() : 1, ' ')
              << c.name << (v.detail.empty() ? "" : ": " + v.detail) << "\n";
}

// The totals line; 0 when every case passed or was declined as expected.
int print_summary(std::map<Outcome, int>& counts) {
    int total = 0;
    for (const auto& [o, n] : counts) total += n;
    std::cout << total << " cases: " << counts[Outcome::Pass] << " passed, "
              << counts[Outcome::DeclinedAsExpected] << " declined as expected, "
              << counts[Outcome::Failed] << " failed, " << counts[Outcome::UnexpectedPass]
              << " unexpected passes, " << counts[Outcome::UnexpectedDecline]
              << " unexpected declines\n";
    const bool ok = counts[Outcome::Failed] + counts[Outcome::UnexpectedPass] +
                        counts[Outcome::UnexpectedDecline] ==
                    0;
    return ok ? 0 : 1;
}

int run(const po::variables_map& vm) {
    Settings s = plugin_settings(vm);
    const std::vector<Case> cases = all_cases();
    std::vector<std::string> names;
    for (const Case& c : cases) names.push_back(c.name);
    const std::vector<std::string> filters = checked_filters(vm, names);
    const fs::path efile = expectations_file(vm, s);
    const Expectations expect = read_expectations(efile, names);
    apply_options(vm, expect, s);
    export_env(vm);

    const TempDir dir;
    std::unique_ptr<Runtime> runtime = make_runtime(s, dir, std::nullopt);
    if (!select_device(s, dir, runtime)) return kUsage;
    if (const std::optional<int> code = backend_missing(*runtime, s)) return *code;
    const Backend& be = *runtime->backends().front();
    print_header(be, s, efile, expect);

    std::map<Outcome, int> counts;
    for (const Case& c : cases) {
        if (!is_selected(filters, c.name)) continue;
        const Verdict v = run_case(be, c, expect);
        ++counts[v.outcome];
        print_verdict(v, c);
    }
    return print_summary(counts);
}

}  // namespace
}  // namespace dwell::conformance

int main(int argc, char** argv) {
    po::options_description desc(
        "usage: dwell-conformance --plugin PATH/libdwell-NAME.so|NAME [options]\n"
        "Runs every conformance case on one backend plugin against double-precision\n"
        "references. Exit: 0 all as expected, 1 a failure, unexpected pass or\n"
        "unexpected decline, 2 bad usage, 77 no usable device.\noptions");
    desc.add_options()("help,h", "this text")(
        "plugin", po::value<std::string>(),
        "the backend plugin: a libdwell-NAME.so file, or NAME looked up on the plugin path "
        "($DWELL_PLUGIN_PATH, then <exe>/../lib/dwell)")(
        "device", po::value<int>(), "the plugin's device N (default: its first available)")(
        "expectations", po::value<std::string>(),
        "the plugin's conformance.toml (default: libdwell-NAME.conformance.toml beside it)")(
        "option", po::value<std::vector<std::string>>(),
        "KEY=VALUE: a backend option, as in a manifest's options (repeatable)")(
        "env", po::value<std::vector<std::string>>(),
        "NAME=VALUE: set in the environment before the plugin loads, e.g. where a vendor "
        "library is (repeatable)")("filter", po::value<std::vector<std::string>>(),
                                   "GLOB: only the cases it matches (repeatable)")(
        "list", "print the case names and exit")("verbose,v", "log the runtime's info messages");
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        std::cerr << "dwell-conformance: " << e.what() << " (see --help)\n";
        return dwell::conformance::kUsage;
    }
    if (vm.count("help")) {
        std::cout << desc << "\n";
        return 0;
    }
    if (vm.count("list")) {
        for (const auto& c : dwell::conformance::all_cases()) std::cout << c.name << "\n";
        return 0;
    }
    if (!vm.count("plugin")) {
        std::cerr << "dwell-conformance: --plugin is required (see --help)\n";
        return dwell::conformance::kUsage;
    }
    auto logger = spdlog::stderr_color_mt("dwell");
    spdlog::set_default_logger(logger);
    // The runtime's warnings name the generated manifest; the program says
    // the same in its own words.
    spdlog::set_level(vm.count("verbose") ? spdlog::level::info : spdlog::level::err);
    try {
        return dwell::conformance::run(vm);
    } catch (const dwell::conformance::UsageError& e) {
        std::cerr << "dwell-conformance: " << e.what() << "\n";
        return dwell::conformance::kUsage;
    } catch (const std::exception& e) {
        std::cerr << "dwell-conformance: error: " << e.what() << "\n";
        return 1;
    }
}
