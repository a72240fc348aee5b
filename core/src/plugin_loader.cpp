#include "dwell/core/plugin_loader.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <set>
#include <sstream>

#include "dwell/core/error.hpp"

namespace dwell {

namespace fs = std::filesystem;

LoadedPlugin::LoadedPlugin(boost::dll::shared_library library, fs::path path,
                           const dwell_plugin_info& info)
    : library_(std::move(library)), path_(std::move(path)), info_(info) {}

std::string LoadedPlugin::abi_version() const {
    return std::to_string(info_.abi_major) + "." + std::to_string(info_.abi_minor);
}

const dwell_backend_plugin* LoadedPlugin::backend() const {
    return info_.kind == DWELL_PLUGIN_BACKEND && DWELL_HAS_FIELD(&info_, dwell_plugin_info, backend)
               ? info_.backend
               : nullptr;
}

const dwell_model_plugin* LoadedPlugin::model() const {
    return info_.kind == DWELL_PLUGIN_MODEL && DWELL_HAS_FIELD(&info_, dwell_plugin_info, model)
               ? info_.model
               : nullptr;
}

namespace {

// Every function of the 1.0 tables is required; a table that is too short
// or has NULL entries would otherwise be called through garbage.
std::string missing_functions(const dwell_plugin_info& info) {
    std::string missing;
    auto need = [&](bool present, const char* name) {
        if (!present) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
#define DWELL_NEED(table, type, fn) need(DWELL_HAS_FIELD(table, type, fn) && (table)->fn, #fn)
    if (const dwell_backend_plugin* b =
            info.kind == DWELL_PLUGIN_BACKEND ? info.backend : nullptr) {
        DWELL_NEED(b, dwell_backend_plugin, device_count);
        DWELL_NEED(b, dwell_backend_plugin, device_info);
        DWELL_NEED(b, dwell_backend_plugin, last_error);
        DWELL_NEED(b, dwell_backend_plugin, context_create);
        DWELL_NEED(b, dwell_backend_plugin, context_destroy);
        DWELL_NEED(b, dwell_backend_plugin, context_last_error);
        DWELL_NEED(b, dwell_backend_plugin, supports_op);
        DWELL_NEED(b, dwell_backend_plugin, graph_compute);
    }
    if (const dwell_model_plugin* m = info.kind == DWELL_PLUGIN_MODEL ? info.model : nullptr) {
        DWELL_NEED(m, dwell_model_plugin, architectures);
        DWELL_NEED(m, dwell_model_plugin, create);
        DWELL_NEED(m, dwell_model_plugin, destroy);
        DWELL_NEED(m, dwell_model_plugin, last_error);
        DWELL_NEED(m, dwell_model_plugin, get_info);
        DWELL_NEED(m, dwell_model_plugin, declare_tensors);
        DWELL_NEED(m, dwell_model_plugin, build_graph);
    }
#undef DWELL_NEED
    return missing;
}

}  // namespace

std::string PluginLoader::file_name_for(std::string_view plugin_name) {
    return "libdwell-" + std::string(plugin_name) + ".so";
}

PluginLoader::PluginLoader(const std::vector<fs::path>& manifest_dirs,
                           const dwell_host_services* host)
    : host_(host) {
    std::set<fs::path> seen;
    auto add = [&](const fs::path& p) {
        if (p.empty()) return;
        fs::path norm = p.lexically_normal();
        if (seen.insert(norm).second) dirs_.push_back(norm);
    };
    for (const auto& d : manifest_dirs) add(d);
    if (const char* env = std::getenv("DWELL_PLUGIN_PATH"); env && *env) {
        std::stringstream ss(env);
        std::string item;
        while (std::getline(ss, item, ':')) add(item);
    }
    boost::dll::fs::error_code ec;
    fs::path exe = boost::dll::program_location(ec);
    if (!ec) add(exe.parent_path() / ".." / "lib" / "dwell");
    // An application embedding libdwell (the C API, JNI on a JVM or in an
    // APK) is not installed beside it: look beside the library too.
    const fs::path lib = boost::dll::this_line_location(ec);
    if (!ec) add(lib.parent_path() / "dwell");
}

std::shared_ptr<LoadedPlugin> PluginLoader::load_file(const fs::path& path) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(path, ec);
    if (ec) canonical = path;
    if (auto it = loaded_.find(canonical); it != loaded_.end()) return it->second;

    boost::dll::shared_library lib;
    try {
        lib.load(canonical, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
        // Boost.DLL's message carries dlerror()'s text (missing symbol, bad ELF, ...).
        throw Error(DWELL_ERR_UNAVAILABLE,
                    "plugin " + path.string() + " failed to load: " + e.what());
    }
    if (!lib.has(DWELL_PLUGIN_QUERY_SYMBOL)) {
        throw Error(DWELL_ERR_UNAVAILABLE, "plugin " + path.string() +
                                               " is not a dwell plugin: it does not export " +
                                               DWELL_PLUGIN_QUERY_SYMBOL);
    }
    auto query = lib.get<dwell_status(const dwell_host_services*, dwell_plugin_info*)>(
        DWELL_PLUGIN_QUERY_SYMBOL);
    dwell_plugin_info info{};
    info.struct_size = sizeof(info);
    const dwell_status st = query(host_, &info);
    const std::string host_abi =
        std::to_string(DWELL_ABI_MAJOR) + "." + std::to_string(DWELL_ABI_MINOR);
    const std::string plugin_abi =
        std::to_string(info.abi_major) + "." + std::to_string(info.abi_minor);
    const std::string rebuild =
        ": rebuild the plugin against the dwell " + std::to_string(DWELL_ABI_MAJOR) + ".x SDK";
    if (st == DWELL_ERR_ABI_MISMATCH || (st == DWELL_OK && info.abi_major != DWELL_ABI_MAJOR)) {
        throw Error(DWELL_ERR_ABI_MISMATCH, "plugin " + path.string() + " speaks dwell ABI " +
                                                plugin_abi + ", this runtime speaks " + host_abi +
                                                rebuild);
    }
    if (st != DWELL_OK) {
        std::string why = info.error ? info.error : dwell_status_name(st);
        throw Error(st, "plugin " + path.string() + " refused to initialise: " + why);
    }
    // struct_size now says how much the plugin filled in.
    const bool described = DWELL_HAS_FIELD(&info, dwell_plugin_info, model) && info.name &&
                           (info.kind == DWELL_PLUGIN_BACKEND || info.kind == DWELL_PLUGIN_MODEL);
    if (!described || (info.kind == DWELL_PLUGIN_BACKEND && !info.backend) ||
        (info.kind == DWELL_PLUGIN_MODEL && !info.model)) {
        throw Error(
            DWELL_ERR_INVALID_ARGUMENT,
            "plugin " + path.string() +
                " returned an incomplete description (name, kind or interface table missing)");
    }
    if (const std::string missing = missing_functions(info); !missing.empty()) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "plugin " + path.string() + " lacks required ABI " +
                                                    host_abi + " functions: " + missing);
    }
    auto plugin = std::make_shared<LoadedPlugin>(std::move(lib), canonical, info);
    loaded_.emplace(canonical, plugin);
    return plugin;
}

std::shared_ptr<LoadedPlugin> PluginLoader::find(std::string_view name,
                                                 std::vector<PluginFailure>& failures) {
    const std::string file = file_name_for(name);
    for (const auto& dir : dirs_) {
        fs::path candidate = dir / file;
        std::error_code ec;
        if (!fs::exists(candidate, ec)) {
            failures.push_back({candidate, "not found"});
            continue;
        }
        try {
            return load_file(candidate);
        } catch (const Error& e) {
            failures.push_back({candidate, e.what()});
        }
    }
    return nullptr;
}

PluginLoader::Discovery PluginLoader::discover_all() {
    Discovery d;
    std::set<std::string> names;
    for (const auto& dir : dirs_) {
        std::error_code ec;
        if (!fs::is_directory(dir, ec)) continue;
        std::vector<fs::path> files;
        for (const auto& entry : fs::directory_iterator(dir, ec)) {
            const std::string fname = entry.path().filename().string();
            if (fname.rfind("libdwell-", 0) == 0 && entry.path().extension() == ".so")
                files.push_back(entry.path());
        }
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            try {
                auto p = load_file(f);
                if (names.insert(p->name()).second) d.plugins.push_back(p);
            } catch (const Error& e) {
                d.failures.push_back({f, e.what()});
            }
        }
    }
    return d;
}

}  // namespace dwell
