#include "dwell/core/runtime/runtime.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "dwell/core/backend/host_services.hpp"
#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/config/device_facts.hpp"
#include "dwell/core/config/manifest_choice.hpp"
#include "dwell/core/kv/kv_page_pool.hpp"
#include "dwell/core/kv/kv_prefix_cache.hpp"
#include "dwell/core/platform/system_memory.hpp"
#include "dwell/core/runtime/runtime_thermal.hpp"
#include "dwell/core/thermal/thermal_governor.hpp"
#include "dwell/core/thermal/thermal_sensors.hpp"

namespace dwell {

namespace fs = std::filesystem;

namespace {

// Used only when no manifest folder exists at all (e.g. a bare test binary).
constexpr const char* kBuiltinManifest = R"(
[device]
name = "built-in default"
[[backend]]
plugin = "cpu"
)";

}  // namespace

struct Runtime::Impl {
    Impl(const Runtime* owner, const RuntimeOptions& options);
    ~Impl();
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;

    void choose_manifest(const RuntimeOptions& options);
    void select_backends(const RuntimeOptions& options);
    void start_thermal(const RuntimeOptions& options);

    Manifest manifest_;
    std::optional<SparsityThresholds> thresholds_;
    std::string manifest_choice_;
    DeviceFacts device_facts_;
    std::vector<ManifestCandidate> manifest_candidates_;
    std::unique_ptr<MemoryPool> pool_;
    std::unique_ptr<KvPagePool> kv_pages_;        // after pool_: goes first
    std::unique_ptr<KvPrefixCache> kv_prefixes_;  // holds pages: goes before kv_pages_
    std::atomic<uint64_t> model_ids_{0};
    dwell_host_services services_{};
    std::unique_ptr<PluginLoader> loader_;
    std::vector<std::unique_ptr<Backend>> backends_;
    std::vector<BackendChoice> choices_;
    bool strict_ = false;
    std::filesystem::path memory_root_ = "/";  // where /proc and /sys are read
    // After backends_: stops (and restores the device) before they go.
    std::unique_ptr<ThermalSensors> thermal_sensors_;
    std::unique_ptr<RuntimeThermal> thermal_;
    std::unique_ptr<ThermalGovernor> governor_;
    std::shared_ptr<const Runtime*> lifetime_;
};

std::string_view Runtime::builtin_manifest() {
    return kBuiltinManifest;
}

std::vector<fs::path> Runtime::manifest_dirs() {
    std::vector<fs::path> dirs;
    if (const char* env = std::getenv("DWELL_MANIFEST_DIR"); env && *env) dirs.emplace_back(env);
    boost::dll::fs::error_code ec;
    fs::path exe = boost::dll::program_location(ec);
    if (!ec)
        dirs.push_back(
            (exe.parent_path() / ".." / "share" / "dwell" / "manifests").lexically_normal());
    // Embedded (C API, JNI): beside libdwell's own install prefix too.
    const fs::path lib = boost::dll::this_line_location(ec);
    if (!ec) {
        const fs::path beside =
            (lib.parent_path() / ".." / "share" / "dwell" / "manifests").lexically_normal();
        if (std::find(dirs.begin(), dirs.end(), beside) == dirs.end()) dirs.push_back(beside);
    }
    return dirs;
}

Runtime::Runtime(const RuntimeOptions& options) : impl_(std::make_unique<Impl>(this, options)) {}

Runtime::~Runtime() = default;

Runtime::Impl::Impl(const Runtime* owner, const RuntimeOptions& options)
    : strict_(options.strict),
      memory_root_(options.device_root.value_or("/")),
      lifetime_(std::make_shared<const Runtime*>(owner)) {
    choose_manifest(options);
    if (options.weights) manifest_.memory.weights = *options.weights;
    if (options.weight_budget_bytes)
        manifest_.memory.weight_budget_bytes = *options.weight_budget_bytes;
    if (options.prefetch_layers) manifest_.memory.prefetch_layers = *options.prefetch_layers;
    if (options.sparsity) {
        manifest_.sparsity.fraction = *options.sparsity;
        manifest_.sparsity.thresholds.clear();
    }
    if (options.sparsity_thresholds) {
        manifest_.sparsity.thresholds = *options.sparsity_thresholds;
        manifest_.sparsity.fraction = 0.0f;
    }
    // Read now, so a bad file fails before any model loads.
    if (!manifest_.sparsity.thresholds.empty())
        thresholds_ = read_sparsity_thresholds(manifest_.sparsity.thresholds);
    uint64_t budget = options.memory_budget_bytes.value_or(manifest_.memory.budget_bytes);
    pool_ = std::make_unique<MemoryPool>(manifest_.memory.page_size, budget);
    // The page space is address space only: as large as the budget, else
    // as the memory the system has, else (memory unknown: no readable
    // proc/meminfo, as in a captured tree) a phone-sized default rather than
    // no KV page at all.
    uint64_t kv_space = budget ? budget : physical_memory_bytes(memory_root_);
    if (kv_space == 0) {
        kv_space = kUnknownMemoryKvSpaceBytes;
        spdlog::warn(
            "cannot tell how much memory this device has (no readable proc/meminfo under {}); "
            "the KV cache may use up to {}: set --memory-budget or [memory] budget_mb to "
            "choose",
            printable_name(memory_root_.string(), 240), format_bytes(kv_space));
    }
    kv_pages_ = std::make_unique<KvPagePool>(*pool_, kv_space);
    kv_prefixes_ = std::make_unique<KvPrefixCache>(
        *kv_pages_, *pool_,
        static_cast<int64_t>(options.prefix_cache_bytes.value_or(manifest_.kv.prefix_cache_bytes) /
                             kv_pages_->page_bytes()));
    kv_pages_->set_reclaimer([cache = kv_prefixes_.get()](int64_t n) { return cache->reclaim(n); });
    pool_->set_reclaimer([cache = kv_prefixes_.get(), page = kv_pages_->page_bytes()](uint64_t b) {
        const auto pages = static_cast<int64_t>(b / page + (b % page != 0));
        return static_cast<uint64_t>(cache->reclaim(pages)) * page;
    });

    services_ = host_services_for(*pool_);

    loader_ = std::make_unique<PluginLoader>(manifest_.plugins.search_paths, &services_,
                                             manifest_.plugins.sha256);
    select_backends(options);
    start_thermal(options);
}

void Runtime::Impl::start_thermal(const RuntimeOptions& options) {
    const ThermalConfig& tc = manifest_.thermal;
    const bool wanted = options.thermal.value_or(manifest_.has_thermal && tc.enabled);
    if (!wanted) return;
    if (tc.zones.empty()) {
        spdlog::warn("{}: [thermal] names no zones; the thermal governor is off",
                     manifest_.source.string());
        return;
    }
    const fs::path root = options.thermal_root.value_or(options.device_root.value_or("/"));
    thermal_sensors_ = std::make_unique<ThermalSensors>(root, tc);
    thermal_ = std::make_unique<RuntimeThermal>(tc, backends_, root);
    governor_ = std::make_unique<ThermalGovernor>(
        tc, [s = thermal_sensors_.get()] { return s->read(); }, *thermal_);
    spdlog::info("thermal: governor on ({} zone(s), target {} C, limit {} C, every {} ms)",
                 thermal_sensors_->zone_dirs().size(), tc.target_c, tc.limit_c, tc.period_ms);
}

Runtime::Impl::~Impl() {
    // The governor stops and restores the device while the backends live.
    governor_.reset();
    thermal_.reset();
    // Contexts go before the libraries that implement them.
    backends_.clear();
}

const SparsityThresholds* Runtime::sparsity_thresholds() const {
    return impl_->thresholds_ ? &*impl_->thresholds_ : nullptr;
}

const Manifest& Runtime::manifest() const {
    return impl_->manifest_;
}
const std::string& Runtime::manifest_choice() const {
    return impl_->manifest_choice_;
}
const DeviceFacts& Runtime::device_facts() const {
    return impl_->device_facts_;
}
const std::vector<ManifestCandidate>& Runtime::manifest_candidates() const {
    return impl_->manifest_candidates_;
}
MemoryPool& Runtime::pool() {
    return *impl_->pool_;
}
const MemoryPool& Runtime::pool() const {
    return *impl_->pool_;
}
KvPagePool& Runtime::kv_pages() {
    return *impl_->kv_pages_;
}
KvPrefixCache& Runtime::kv_prefixes() {
    return *impl_->kv_prefixes_;
}
uint64_t Runtime::next_model_id() {
    return ++impl_->model_ids_;
}
void Runtime::forget_model(uint64_t model_id) const {
    impl_->kv_prefixes_->forget_model(model_id);
}
void Runtime::uncharge(uint64_t bytes, MemoryUse use) const {
    impl_->pool_->uncharge(bytes, use);
}
PluginLoader& Runtime::loader() {
    return *impl_->loader_;
}
const dwell_host_services* Runtime::host_services() const {
    return &impl_->services_;
}
const std::vector<std::unique_ptr<Backend>>& Runtime::backends() const {
    return impl_->backends_;
}
const std::vector<BackendChoice>& Runtime::backend_choices() const {
    return impl_->choices_;
}
bool Runtime::strict() const {
    return impl_->strict_;
}
std::weak_ptr<const Runtime*> Runtime::lifetime() const {
    return impl_->lifetime_;
}

uint64_t Runtime::available_memory() const {
    return available_memory_bytes(impl_->memory_root_);
}

std::optional<ThermalState> Runtime::thermal_state() const {
    if (!impl_->governor_) return std::nullopt;
    return impl_->governor_->state();
}

void Runtime::pace(double step_seconds) const {
    if (impl_->thermal_) impl_->thermal_->pace(step_seconds);
}

void Runtime::release_weights(const void* data, size_t bytes) const {
    for (const auto& b : impl_->backends_) {
        const dwell_backend_plugin& api = b->api();
        // Taken even when there is nothing to tell: a call abandoned past its
        // deadline holds it and may still read these weights.
        std::lock_guard lock(b->mutex());
        if (DWELL_HAS_FIELD(&api, dwell_backend_plugin, release_weights) &&
            api.release_weights != nullptr) {
            api.release_weights(b->context(), data, bytes);
        }
    }
}

void Runtime::Impl::choose_manifest(const RuntimeOptions& options) {
    if (options.manifest) {
        manifest_ = Manifest::load(*options.manifest);
        manifest_choice_ = "given with --manifest";
        return;
    }
    // Probed only here: with --manifest the device facts are not needed.
    DeviceProbeOptions probe;
    if (options.device_root) probe.root = *options.device_root;
    probe.getprop_file = options.getprop_file;
    device_facts_ = DeviceFacts::probe(probe);
    ManifestChoice choice =
        dwell::choose_manifest(device_facts_, manifest_dirs(), kBuiltinManifest);
    manifest_ = std::move(choice.manifest);
    manifest_choice_ = std::move(choice.reason);
    manifest_candidates_ = std::move(choice.candidates);
}

void Runtime::Impl::select_backends(const RuntimeOptions& options) {
    std::set<std::string> hardware_taken;
    for (const ManifestBackend& entry : manifest_.backends) {
        BackendChoice choice;
        choice.plugin = entry.plugin;
        auto skip = [&](const std::string& why) {
            choice.reason = why;
            spdlog::warn("{}:{}: backend '{}' skipped: {}", manifest_.source.string(), entry.line,
                         entry.plugin, why);
            choices_.push_back(choice);
        };
        std::vector<PluginFailure> failures;
        auto plugin = loader_->find(entry.plugin, failures);
        if (!plugin) {
            std::string tried;
            for (const auto& f : failures) {
                tried += (tried.empty() ? "" : "; ") + f.path.string() + " (" + f.reason + ")";
            }
            skip("plugin " + PluginLoader::file_name_for(entry.plugin) +
                 " not usable, tried: " + (tried.empty() ? "no search folder exists" : tried));
            continue;
        }
        choice.path = plugin->path();
        const dwell_backend_plugin* api = plugin->backend();
        if (!api) {
            skip("plugin " + plugin->path().string() + " is not a backend plugin");
            continue;
        }
        uint32_t count = 0;
        if (api->device_count(api->self, &count) != DWELL_OK) {
            const char* e = api->last_error ? api->last_error(api->self) : nullptr;
            skip(std::string("probe failed: ") + (e ? e : "no message"));
            continue;
        }
        std::optional<uint32_t> chosen;
        dwell_device_info info{};
        std::string why_none = count == 0 ? "the plugin found no device" : "";
        for (uint32_t i = 0; i < count; ++i) {
            dwell_device_info di{};
            di.struct_size = sizeof(di);
            if (api->device_info(api->self, i, &di) != DWELL_OK) continue;
            const std::string dname = di.name ? di.name : "";
            if (entry.device && *entry.device != dname) continue;
            if (!di.available) {
                why_none = "device " + dname + " unavailable: " +
                           (di.unavailable_reason ? di.unavailable_reason : "no reason given");
                continue;
            }
            const std::string hw = di.hardware_id ? di.hardware_id : "";
            if (!hw.empty() && hardware_taken.count(hw)) {
                why_none = "device " + dname + " is hardware " + hw +
                           ", already used by a higher-priority backend";
                continue;
            }
            chosen = i;
            info = di;
            break;
        }
        if (!chosen) {
            skip(why_none.empty() ? "no device named '" + entry.device.value_or("") + "'"
                                  : why_none);
            continue;
        }
        choice.device = info.name ? info.name : "";
        std::map<std::string, std::string> opts = entry.options;
        if (info.kind == DWELL_DEVICE_CPU && !opts.count("threads")) {
            int32_t threads = options.threads > 0 ? options.threads : manifest_.cpu.threads;
            if (threads > 0) opts["threads"] = std::to_string(threads);
        } else if (info.kind == DWELL_DEVICE_CPU && options.threads > 0) {
            opts["threads"] = std::to_string(options.threads);
        }
        if (info.kind == DWELL_DEVICE_CPU && !opts.count("affinity") &&
            manifest_.cpu.affinity != "any") {
            opts["affinity"] = manifest_.cpu.affinity;
        }
        std::vector<dwell_option> c_opts;
        c_opts.reserve(opts.size());
        for (const auto& [k, v] : opts) c_opts.push_back({k.c_str(), v.c_str()});
        dwell_backend_context* ctx = nullptr;
        dwell_status st =
            api->context_create(api->self, *chosen, c_opts.data(), c_opts.size(), &services_, &ctx);
        if (st != DWELL_OK || !ctx) {
            const char* e = api->last_error ? api->last_error(api->self) : nullptr;
            skip(std::string("initialisation failed: ") + (e && *e ? e : dwell_status_name(st)));
            continue;
        }
        if (info.hardware_id && *info.hardware_id) hardware_taken.insert(info.hardware_id);
        choice.selected = true;
        choice.reason = "selected";
        choices_.push_back(choice);
        backends_.push_back(std::make_unique<Backend>(plugin, *chosen, info, ctx, entry));
        spdlog::info("backend {} selected ({})", backends_.back()->label(),
                     plugin->path().string());
    }
    if (backends_.empty() && options.require_backend) {
        std::string why;
        for (const auto& c : choices_)
            why += (why.empty() ? "" : "; ") + c.plugin + ": " + c.reason;
        throw Error(DWELL_ERR_UNAVAILABLE, manifest_.source.string() + ": no usable backend (" +
                                               (why.empty() ? "the manifest lists none" : why) +
                                               ")");
    }
}

std::vector<std::shared_ptr<LoadedPlugin>> Runtime::model_plugins_for(
    const std::string& architecture, const fs::path& model_path) {
    auto found = impl_->loader_->discover_all();
    std::vector<std::shared_ptr<LoadedPlugin>> serving;
    // Architecture -> the plugins serving it, sorted: several plugins may
    // serve one architecture (llama and mixtral both read "llama" files).
    std::map<std::string, std::set<std::string>> by_architecture;
    for (const auto& p : found.plugins) {
        const dwell_model_plugin* m = p->model();
        if (!m) continue;
        bool serves = false;
        for (size_t i = 0; i < m->n_architectures; ++i) {
            const char* a = m->architectures[i];
            if (a && architecture == a) serves = true;
            by_architecture[a ? a : "?"].insert(p->name());
        }
        if (serves) serving.push_back(p);
    }
    // Refused files were warned about by the loader.
    if (!serving.empty()) return serving;
    std::string served;
    for (const auto& [arch, plugins] : by_architecture) {
        served.append(served.empty() ? "" : ", ").append(arch).append(" (");
        for (const auto& name : plugins)
            served.append(&name == &*plugins.begin() ? "" : ", ").append(name);
        served.append(plugins.size() == 1 ? " plugin)" : " plugins)");
    }
    std::string dirs;
    for (const auto& d : impl_->loader_->search_dirs())
        dirs += (dirs.empty() ? "" : ", ") + d.string();
    throw Error(DWELL_ERR_UNSUPPORTED,
                model_path.string() + ": no model plugin serves architecture '" + architecture +
                    "' (architectures served: " + (served.empty() ? "none" : served) +
                    "; plugin folders: " + dirs + ")");
}

}  // namespace dwell
