#include "program_cache.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>

#include "backend/backend_plugin_kit.hpp"
#include "cl_api.hpp"
#include "kernels_adreno_source.hpp"
#include "kernels_portable_source.hpp"

namespace dwell::opencl {

Options parse_options(const dwell_option* options, size_t n) {
    Options o;
    for (size_t i = 0; i < n; ++i) {
        const auto [key, value] = plugin_kit::option_text(options[i]);
        if (key == "cache_dir") {
            o.cache_dir = value;
        } else if (key == "kernels") {
            if (value != "auto" && value != "portable" && value != "adreno") {
                throw std::invalid_argument(
                    "opencl backend option 'kernels' must be \"auto\", "
                    "\"portable\" or \"adreno\", got '" +
                    value + "'");
            }
            o.kernels = value;
        } else if (plugin_kit::is_host_option(key)) {
            // Host-wide CPU settings the runtime passes to every backend.
        } else {
            throw std::invalid_argument("unknown opencl backend option '" + key +
                                        "' (known: kernels, cache_dir)");
        }
    }
    return o;
}

namespace {

std::filesystem::path cache_dir(const Options& o) {
    if (!o.cache_dir.empty()) return o.cache_dir;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
        return std::filesystem::path(x) / "dwell" / "opencl";
    if (const char* h = std::getenv("HOME"); h && *h)
        return std::filesystem::path(h) / ".cache" / "dwell" / "opencl";
    return {};
}

std::string build_log(const ClApi& cl, cl_program prog, cl_device_id dev) {
    size_t n = 0;
    cl.GetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string s(n, '\0');
    if (n) cl.GetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, s.data(), nullptr);
    std::replace(s.begin(), s.end(), '\n', ' ');
    return s.substr(0, 400);
}

}  // namespace

cl_program build_program(dwell_backend_context& c, const Device& d, const Options& options) {
    const ClApi& cl = *c.cl;
    // The Adreno set uses the portable set's helpers: one program.
    const std::string source = std::string(kPortableKernelSource) +
                               (c.adreno ? std::string("\n") + kAdrenoKernelSource : "");
    const std::string variant = c.adreno ? "adreno" : "portable";
    const std::string key =
        std::to_string(std::hash<std::string>{}(d.description + "\n" + d.driver + "\n" + source));
    const std::filesystem::path dir = cache_dir(options);
    const std::filesystem::path file = dir.empty() ? dir : dir / (variant + "-" + key + ".bin");
    cl_int err = CL_SUCCESS;
    if (!file.empty()) {
        std::ifstream in(file, std::ios::binary);
        std::string bin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!bin.empty()) {
            const size_t size = bin.size();
            const auto* data = reinterpret_cast<const unsigned char*>(bin.data());
            cl_int status = CL_SUCCESS;
            cl_program prog =
                cl.CreateProgramWithBinary(c.context, 1, &d.id, &size, &data, &status, &err);
            if (prog != nullptr && err == CL_SUCCESS && status == CL_SUCCESS &&
                cl.BuildProgram(prog, 1, &d.id, "", nullptr, nullptr) == CL_SUCCESS) {
                return prog;
            }
            if (prog != nullptr) cl.ReleaseProgram(prog);  // stale binary: rebuild from source
        }
    }
    const char* src = source.c_str();
    cl_program prog = cl.CreateProgramWithSource(c.context, 1, &src, nullptr, &err);
    if (prog == nullptr || err != CL_SUCCESS) {
        throw std::runtime_error("creating the program failed: " + cl_error_name(err));
    }
    err = cl.BuildProgram(prog, 1, &d.id, "-cl-std=CL1.2", nullptr, nullptr);
    if (err != CL_SUCCESS) {
        const std::string log = build_log(cl, prog, d.id);
        cl.ReleaseProgram(prog);
        throw std::runtime_error("building the " + variant + " kernels failed (" +
                                 cl_error_name(err) + "): " + log);
    }
    if (!file.empty()) {
        size_t size = 0;
        if (cl.GetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) ==
                CL_SUCCESS &&
            size > 0) {
            std::string bin(size, '\0');
            unsigned char* ptr = reinterpret_cast<unsigned char*>(bin.data());
            if (cl.GetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) ==
                CL_SUCCESS) {
                std::error_code ec;
                std::filesystem::create_directories(dir, ec);
                const std::filesystem::path tmp = file.string() + ".tmp";
                std::ofstream(tmp, std::ios::binary).write(bin.data(), static_cast<long>(size));
                std::filesystem::rename(tmp, file, ec);  // a cache: failure is harmless
            }
        }
    }
    return prog;
}

}  // namespace dwell::opencl
