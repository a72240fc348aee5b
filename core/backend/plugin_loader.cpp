#include "dwell/core/backend/plugin_loader.hpp"

#include <elf.h>
#include <fcntl.h>
#include <grp.h>
#include <link.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/platform/file_sha256.hpp"

namespace dwell {

namespace fs = std::filesystem;

LoadedPlugin::LoadedPlugin(boost::dll::shared_library library, fs::path path,
                           const dwell_plugin_info& info, int pinned_fd)
    : library_(std::move(library)), path_(std::move(path)), info_(info), pinned_fd_(pinned_fd) {}

LoadedPlugin::~LoadedPlugin() {
    library_.unload();  // while /proc/self/fd/N still names it
    if (pinned_fd_ >= 0) ::close(pinned_fd_);
}

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

// A descriptor closed when it goes out of scope, unless released.
class OpenFile {
public:
    explicit OpenFile(int fd) : fd_(fd) {}
    ~OpenFile() {
        if (fd_ >= 0) ::close(fd_);
    }
    OpenFile(const OpenFile&) = delete;
    OpenFile& operator=(const OpenFile&) = delete;
    int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }

private:
    int fd_;
};

std::string octal_mode(mode_t mode) {
    std::array<char, 8> buf{};
    std::snprintf(buf.data(), buf.size(), "%04o", static_cast<unsigned>(mode & 07777));
    return buf.data();
}

std::string group_name(gid_t gid) {
    struct group entry {};
    struct group* found = nullptr;
    std::array<char, 1024> buf{};
    if (getgrgid_r(gid, &entry, buf.data(), buf.size(), &found) == 0 && found && found->gr_name)
        return std::string("'") + found->gr_name + "'";
    return std::to_string(gid);
}

// "" when no one but its owner (and root) can change `st`; otherwise one
// line saying who else can, and the chmod that stops it.
std::string writable_by_others(const struct stat& st, const fs::path& path, const char* what) {
    const std::string mode = " (mode " + octal_mode(st.st_mode) + ")";
    if (st.st_mode & S_IWOTH) {
        return std::string(what) + " " + path.string() + " is world-writable" + mode +
               ", so any user could replace the plugin: refused; chmod o-w " + path.string();
    }
    if ((st.st_mode & S_IWGRP) && st.st_gid != getegid()) {
        return std::string(what) + " " + path.string() + " is writable by group " +
               group_name(st.st_gid) + mode +
               ", so its members could replace the plugin: refused; chmod g-w " + path.string();
    }
    return {};
}

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#elif defined(__i386__)
constexpr uint16_t kHostMachine = EM_386;
#elif defined(__arm__)
constexpr uint16_t kHostMachine = EM_ARM;
#elif defined(__riscv)
constexpr uint16_t kHostMachine = EM_RISCV;
#else
constexpr uint16_t kHostMachine = EM_NONE;  // not checked
#endif

// "" when `fd` holds a complete shared object for this machine; otherwise
// why not. dlopen maps whatever the headers claim, so a truncated file
// (one still being copied) would fault when its missing pages are touched.
std::string not_a_complete_library(int fd, uint64_t file_size) {
    ElfW(Ehdr) eh{};
    if (file_size < sizeof eh || ::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh))
        return "is too short to be a shared library (" + std::to_string(file_size) + " bytes)";
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return "is not an ELF file";
#if __SIZEOF_POINTER__ == 8
    constexpr unsigned char kClass = ELFCLASS64;
#else
    constexpr unsigned char kClass = ELFCLASS32;
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    constexpr unsigned char kData = ELFDATA2LSB;
#else
    constexpr unsigned char kData = ELFDATA2MSB;
#endif
    if (eh.e_ident[EI_CLASS] != kClass || eh.e_ident[EI_DATA] != kData)
        return "is an ELF file for another word size or byte order";
    if (eh.e_type != ET_DYN)
        return "is not a shared library (ELF type " + std::to_string(eh.e_type) + ")";
    if (kHostMachine != EM_NONE && eh.e_machine != kHostMachine) {
        return "is built for ELF machine " + std::to_string(eh.e_machine) + ", this host is " +
               std::to_string(kHostMachine);
    }
    auto past_end = [&](uint64_t offset, uint64_t bytes) {
        return offset > file_size || bytes > file_size - offset;
    };
    const std::string truncated =
        "is truncated (" + std::to_string(file_size) + " bytes; half-copied?)";
    if (eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 ||
        past_end(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(ElfW(Phdr))))
        return truncated;
    if (eh.e_shnum != 0 && past_end(eh.e_shoff, uint64_t{eh.e_shnum} * eh.e_shentsize))
        return truncated;
    for (uint16_t i = 0; i < eh.e_phnum; ++i) {
        ElfW(Phdr) ph{};
        const off_t at = static_cast<off_t>(eh.e_phoff + uint64_t{i} * sizeof ph);
        if (::pread(fd, &ph, sizeof ph, at) != static_cast<ssize_t>(sizeof ph)) return truncated;
        if (ph.p_type == PT_LOAD && past_end(ph.p_offset, ph.p_filesz)) return truncated;
    }
    return {};
}

// Android's system user and group (AID_SYSTEM) own /data and an app's
// native library folders; they are as trusted as root there.
bool is_android_system(unsigned id) {
#ifdef __ANDROID__
    return id == 1000;
#else
    (void)id;
    return false;
#endif
}

// "" when `st` belongs to us or root; else the refusal.
std::string owned_by_others(const struct stat& st, const fs::path& path, const char* what) {
    if (st.st_uid == 0 || st.st_uid == geteuid() || is_android_system(st.st_uid)) return {};
    return std::string(what) + " " + path.string() + " is owned by uid " +
           std::to_string(st.st_uid) +
           ", neither you nor root, so its owner could replace the plugin: refused; chown it";
}

// The folders above the plugin folder: others may write them only where
// the sticky bit stops them renaming what they do not own.
std::string unsafe_ancestor(const fs::path& folder) {
    for (fs::path p = folder.parent_path(); !p.empty(); p = p.parent_path()) {
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0) {
            return "plugin folder " + folder.string() + ": cannot check " + p.string() + ": " +
                   std::strerror(errno) + ": refused";
        }
        if (std::string why = owned_by_others(st, p, "folder"); !why.empty()) return why;
        if (!(st.st_mode & S_ISVTX)) {
            const std::string mode = " (mode " + octal_mode(st.st_mode) + ")";
            if (st.st_mode & S_IWOTH) {
                return "folder " + p.string() + " above the plugins is world-writable" + mode +
                       ", so any user could replace them: refused; chmod o-w " + p.string();
            }
            if ((st.st_mode & S_IWGRP) && st.st_gid != getegid() && !is_android_system(st.st_gid)) {
                return "folder " + p.string() + " above the plugins is writable by group " +
                       group_name(st.st_gid) + mode +
                       ", so its members could replace them: refused; chmod g-w " + p.string();
            }
        }
        if (p == p.root_path()) break;
    }
    return {};
}

const char* file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    return "not a regular file";
}

// "cpu" for libdwell-cpu.so: the name pins are keyed by.
std::string plugin_name_of(const fs::path& file) {
    const std::string f = file.filename().string();
    const std::string prefix = "libdwell-", suffix = ".so";
    if (f.size() > prefix.size() + suffix.size() && f.rfind(prefix, 0) == 0 &&
        f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0)
        return f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
    return f;
}

}  // namespace

std::string PluginLoader::file_name_for(std::string_view plugin_name) {
    return "libdwell-" + std::string(plugin_name) + ".so";
}

PluginLoader::PluginLoader(const std::vector<fs::path>& manifest_dirs,
                           const dwell_host_services* host,
                           std::map<std::string, std::string> sha256_pins)
    : host_(host), pins_(std::move(sha256_pins)) {
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

void PluginLoader::check_in_search_dirs(const fs::path& path, const fs::path& canonical) const {
    std::string dirs;
    for (const auto& d : dirs_) {
        std::error_code ec;
        const fs::path real = fs::weakly_canonical(d, ec);
        if (!ec && real == canonical.parent_path()) return;
        dirs += (dirs.empty() ? "" : ", ") + d.string();
    }
    std::error_code ec;
    const bool link = fs::absolute(path, ec).lexically_normal() != canonical;
    throw Error(DWELL_ERR_UNAVAILABLE,
                "plugin " + path.string() + (link ? " (really " + canonical.string() + ")" : "") +
                    " is not in a plugin folder (" + (dirs.empty() ? "none" : dirs) +
                    "): refused; move it into one, or add its folder to [plugins] search_paths "
                    "or DWELL_PLUGIN_PATH");
}

std::shared_ptr<LoadedPlugin> PluginLoader::load_file(const fs::path& path) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(path, ec);
    if (ec) {
        throw Error(DWELL_ERR_UNAVAILABLE,
                    "plugin " + path.string() + " failed to load: " + ec.message());
    }
    if (auto it = loaded_.find(canonical); it != loaded_.end()) return it->second;
    check_in_search_dirs(path, canonical);

    // Every check below is on the file as opened, which is what gets loaded.
    // O_NONBLOCK: opening a FIFO must not wait for a writer.
    OpenFile file(::open(canonical.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    struct stat file_stat {};
    if (file.get() < 0 || ::fstat(file.get(), &file_stat) != 0) {
        throw Error(DWELL_ERR_UNAVAILABLE,
                    "plugin " + path.string() + " failed to load: " + std::strerror(errno));
    }
    if (!S_ISREG(file_stat.st_mode)) {
        throw Error(DWELL_ERR_UNAVAILABLE, "plugin " + path.string() + " is " +
                                               file_kind(file_stat.st_mode) +
                                               ", not a regular file: refused");
    }
    std::string untrusted = owned_by_others(file_stat, canonical, "plugin");
    if (untrusted.empty()) untrusted = writable_by_others(file_stat, canonical, "plugin");
    struct stat dir {};
    if (untrusted.empty()) {
        if (::stat(canonical.parent_path().c_str(), &dir) != 0) {
            untrusted = "plugin folder " + canonical.parent_path().string() +
                        " cannot be checked: " + std::strerror(errno) + ": refused";
        }
    }
    if (untrusted.empty())
        untrusted = owned_by_others(dir, canonical.parent_path(), "plugin folder");
    if (untrusted.empty())
        untrusted = writable_by_others(dir, canonical.parent_path(), "plugin folder");
    if (untrusted.empty()) untrusted = unsafe_ancestor(canonical.parent_path());
    if (!untrusted.empty()) throw Error(DWELL_ERR_UNAVAILABLE, untrusted);
    if (const std::string why =
            not_a_complete_library(file.get(), static_cast<uint64_t>(file_stat.st_size));
        !why.empty()) {
        throw Error(DWELL_ERR_UNAVAILABLE, "plugin " + path.string() + " " + why + ": refused");
    }

    fs::path load_from = canonical;
    const std::string name = plugin_name_of(path);
    const auto pin = pins_.find(name);
    if (pin != pins_.end()) {
        const std::string actual = file_sha256(file.get(), canonical);
        if (actual != pin->second) {
            throw Error(DWELL_ERR_CORRUPT,
                        "plugin '" + name + "' (" + canonical.string() +
                            ") does not match its [plugins] sha256 pin: expected " + pin->second +
                            ", the file's is " + actual +
                            "; reinstall the plugin or update the pin");
        }
        load_from = "/proc/self/fd/" + std::to_string(file.get());
    }

    boost::dll::shared_library lib;
    try {
        lib.load(load_from, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
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
    auto plugin = std::make_shared<LoadedPlugin>(std::move(lib), canonical, info,
                                                 pin != pins_.end() ? file.release() : -1);
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
            auto plugin = load_file(candidate);
            // Those refused before this one would otherwise go unmentioned.
            for (const auto& f : failures)
                if (f.reason != "not found") warn_refused(f);
            return plugin;
        } catch (const Error& e) {
            failures.push_back({candidate, e.what()});
        }
    }
    return nullptr;
}

void PluginLoader::warn_refused(const PluginFailure& f) {
    if (warned_.insert(f.path).second) spdlog::warn("{}", f.reason);
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
                warn_refused(d.failures.back());
            }
        }
    }
    return d;
}

}  // namespace dwell
