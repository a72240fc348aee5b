// The opencl backend plugin: runs graph nodes with the portable OpenCL C 1.2
// kernels (kernels_portable.cl) on the device the manifest names. The
// library is loaded at probe time; without it, or without a platform, the
// plugin reports one unavailable device saying why, and the manifest falls
// through to the next backend.
//
// Memory: dwell's tensors live in host memory (DWELL_BUFFER_HOST); each node
// wraps the ranges it touches in CL_MEM_USE_HOST_PTR buffers (zero-copy on
// devices sharing host memory, such as PoCL and Adreno's host-mapped
// buffers) and maps what it wrote before returning, so the next node — on
// this backend or another — reads coherent host memory.
//
// Thread-safety: probe calls from any thread; a context is used by one
// thread at a time (the host serialises). Ownership: contexts own their CL
// objects; the compiled program is cached on disk per device, driver and
// source.
#include <dwell/backend.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "backend_plugin_kit.hpp"
#include "cl_api.hpp"
#include "kernels_adreno_source.hpp"
#include "kernels_portable_source.hpp"
#include "weight_release.hpp"

struct dwell_backend_context {
    const dwell::opencl::ClApi* cl = nullptr;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;
    cl_program program = nullptr;
    std::map<std::string, cl_kernel> kernels;
    std::string last_error;
    std::string device_name;
    // Device time per op kind, from profiling events.
    std::map<dwell_op, std::pair<uint64_t, double>> times;
    // The Adreno-tuned set is built too (kernels_adreno.cl).
    bool adreno = false;
    const dwell_host_services* host = nullptr;  // told when weights are copied
    cl_device_id device = nullptr;
    // Q4_0 weights rearranged for the Adreno set, by (address, k, n).
    struct Prepared {
        cl_mem quants = nullptr, scales = nullptr, image = nullptr;
    };
    std::map<std::tuple<const void*, int64_t, int64_t>, Prepared> prepared;

    void drop(Prepared& p) const {
        for (cl_mem m : {p.image, p.quants, p.scales})
            if (m) cl->ReleaseMemObject(m);
    }

    dwell_backend_context() = default;
    dwell_backend_context(const dwell_backend_context&) = delete;
    dwell_backend_context& operator=(const dwell_backend_context&) = delete;
    ~dwell_backend_context() {
        if (cl == nullptr) return;
        for (auto& [key, p] : prepared) drop(p);
        for (auto& [name, k] : kernels) cl->ReleaseKernel(k);
        if (program) cl->ReleaseProgram(program);
        if (queue) cl->ReleaseCommandQueue(queue);
        if (context) cl->ReleaseContext(context);
    }
};

namespace dwell::opencl {
namespace {

constexpr const char* kPluginName = "opencl";
constexpr const char* kPluginVersion = "0.1.0";

thread_local std::string g_plugin_error;

struct Device {
    cl_device_id id = nullptr;
    std::string name;  // "opencl0", ...
    std::string description;
    std::string hardware_id;
    std::string driver;
    dwell_device_kind kind = DWELL_DEVICE_GPU;
    uint64_t memory = 0;
    bool available = false;
    std::string why;  // when unavailable
};

std::string device_string(const ClApi& cl, cl_device_id d, cl_device_info what) {
    size_t n = 0;
    if (cl.GetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
    std::string s(n, '\0');
    cl.GetDeviceInfo(d, what, n, s.data(), nullptr);
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

std::string platform_string(const ClApi& cl, cl_platform_id p, cl_platform_info what) {
    size_t n = 0;
    if (cl.GetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
    std::string s(n, '\0');
    cl.GetPlatformInfo(p, what, n, s.data(), nullptr);
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

struct Probe {
    const ClApi* cl = nullptr;
    std::vector<Device> devices;
};

Probe do_probe() {
    Probe p;
    std::string why;
    p.cl = load_cl_api(why);
    const auto unavailable = [&](std::string reason) {
        Device d;
        d.name = "opencl0";
        d.description = "no OpenCL device";
        d.hardware_id = "opencl:none";
        d.why = std::move(reason);
        p.devices.push_back(std::move(d));
    };
    if (p.cl == nullptr) {
        unavailable(why);
        return p;
    }
    cl_uint n_platforms = 0;
    cl_int err = p.cl->GetPlatformIDs(0, nullptr, &n_platforms);
    if (err != CL_SUCCESS || n_platforms == 0) {
        unavailable("no OpenCL platform (" + cl_error_name(err) +
                    "): install a driver, e.g. pocl-opencl-icd");
        return p;
    }
    std::vector<cl_platform_id> platforms(n_platforms);
    p.cl->GetPlatformIDs(n_platforms, platforms.data(), nullptr);
    for (cl_platform_id pl : platforms) {
        cl_uint n = 0;
        if (p.cl->GetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS) continue;
        std::vector<cl_device_id> ids(n);
        p.cl->GetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr);
        const std::string platform = platform_string(*p.cl, pl, CL_PLATFORM_NAME);
        for (cl_device_id id : ids) {
            Device d;
            d.id = id;
            d.name = "opencl" + std::to_string(p.devices.size());
            const std::string dev = device_string(*p.cl, id, CL_DEVICE_NAME);
            d.description = platform + ": " + dev;
            d.driver = device_string(*p.cl, id, CL_DRIVER_VERSION);
            d.hardware_id = "opencl:" + platform + ":" + dev;
            cl_device_type type = 0;
            p.cl->GetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
            d.kind = (type & CL_DEVICE_TYPE_CPU) ? DWELL_DEVICE_CPU : DWELL_DEVICE_GPU;
            cl_ulong mem = 0;
            p.cl->GetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
            d.memory = mem;
            cl_bool ok = CL_FALSE;
            p.cl->GetDeviceInfo(id, CL_DEVICE_AVAILABLE, sizeof ok, &ok, nullptr);
            d.available = ok == CL_TRUE;
            if (!d.available) d.why = "the driver reports the device unavailable";
            p.devices.push_back(std::move(d));
        }
    }
    if (p.devices.empty()) unavailable("the OpenCL platforms list no devices");
    return p;
}

Probe& probe() {
    static Probe p = do_probe();
    return p;
}

dwell_status fail_plugin(dwell_status st, std::string message) {
    g_plugin_error = "opencl plugin: " + std::move(message);
    return st;
}

// ---------------------------------------------------------------------------
// Program: built once per device and driver, cached on disk.

// The [[backend]] options this plugin takes.
struct Options {
    std::filesystem::path cache_dir;  // empty: the default below
    std::string kernels = "auto";     // auto | portable | adreno
};

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

// ---------------------------------------------------------------------------
// Tensors

uint64_t tensor_bytes(const dwell_tensor& t) {
    uint64_t last = 0;
    for (int d = 1; d < DWELL_MAX_DIMS; ++d) last += static_cast<uint64_t>(t.ne[d] - 1) * t.nb[d];
    return last + dwell_row_bytes(t.dtype, t.ne[0]);
}

bool contiguous(const dwell_tensor& t) {
    if (t.nb[0] != dwell_dtype_block_bytes(t.dtype)) return false;
    if (t.nb[1] != dwell_row_bytes(t.dtype, t.ne[0])) return false;
    for (int d = 2; d < DWELL_MAX_DIMS; ++d)
        if (t.nb[d] != t.nb[d - 1] * static_cast<uint64_t>(t.ne[d - 1])) return false;
    return true;
}

bool weight_dtype(dwell_dtype t) {
    return t == DWELL_F32 || t == DWELL_F16 || t == DWELL_Q8_0 || t == DWELL_Q4_0;
}

const dwell_tensor& tensor(const dwell_graph* g, int32_t id) {
    return *dwell_graph_tensor(g, id);
}

// Why node `id` cannot run here, or "" when it can.
std::string check(const dwell_graph* g, int32_t id) {
    const dwell_node* n = dwell_graph_node(g, id);
    if (n == nullptr) return "no such node";
    for (int i = 0; i < n->n_inputs; ++i) {
        if (dwell_graph_tensor(g, n->inputs[i]) == nullptr) return "an input is missing";
    }
    const dwell_tensor* out = dwell_graph_tensor(g, n->output);
    if (out == nullptr) return "the output is missing";
    const auto in = [&](int i) -> const dwell_tensor& { return tensor(g, n->inputs[i]); };
    const auto f32 = [&](const dwell_tensor& t) { return t.dtype == DWELL_F32 && contiguous(t); };
    const bool paged = n->op == DWELL_OP_ATTENTION && n->n_inputs > 4 && in(4).dtype == DWELL_I32;
    if (!contiguous(*out) && !(n->op == DWELL_OP_ATTENTION)) return "the output is not contiguous";
    switch (n->op) {
        case DWELL_OP_GET_ROWS:
            if (!weight_dtype(in(0).dtype) || !contiguous(in(0))) return "table dtype/layout";
            return in(1).dtype == DWELL_I32 && f32(*out) ? "" : "ids must be I32";
        case DWELL_OP_MATMUL:
            if (!weight_dtype(in(0).dtype) || !contiguous(in(0))) {
                return std::string("weight dtype ") + dwell_dtype_name(in(0).dtype) +
                       " (portable kernels: f32, f16, q8_0, q4_0)";
            }
            return f32(in(1)) && f32(*out) ? "" : "x must be contiguous F32";
        case DWELL_OP_ADD:
        case DWELL_OP_MUL: {
            if (!f32(in(0)) || !f32(in(1)) || !f32(*out)) return "operands must be F32";
            const int64_t a = dwell_tensor_nelements(&in(0)), b = dwell_tensor_nelements(&in(1));
            return b == a || b == in(0).ne[0] ? "" : "in1 must match in0 or be one row";
        }
        case DWELL_OP_SCALE:
        case DWELL_OP_SILU:
        case DWELL_OP_GELU:
        case DWELL_OP_RMS_NORM:
        case DWELL_OP_LAYER_NORM:
        case DWELL_OP_SOFTMAX:
            return f32(in(0)) && f32(*out) ? "" : "operands must be F32";
        case DWELL_OP_CPY: {
            const dwell_dtype to = out->dtype;
            if (!f32(in(0))) return "CPY from F32 only";
            if (to != DWELL_F32 && to != DWELL_F16 && to != DWELL_Q8_0 && to != DWELL_FP8_E4M3)
                return std::string("CPY to ") + dwell_dtype_name(to) +
                       " (portable: f32, f16, q8_0, fp8_e4m3)";
            if (to == DWELL_Q8_0 && in(0).ne[0] % 32 != 0) return "q8_0 rows must be whole blocks";
            return dwell_tensor_nelements(&in(0)) == dwell_tensor_nelements(out) ? ""
                                                                                 : "shapes differ";
        }
        case DWELL_OP_GATHER:
            return f32(in(0)) && in(1).dtype == DWELL_I32 && contiguous(in(1)) && f32(*out)
                       ? ""
                       : "gather operands";
        case DWELL_OP_TOPK:
            return f32(in(0)) && out->dtype == DWELL_I32 && contiguous(*out) ? "" : "topk operands";
        case DWELL_OP_EXPERT_MATMUL:
            if (!weight_dtype(in(0).dtype) || !contiguous(in(0))) {
                return std::string("expert weight dtype ") + dwell_dtype_name(in(0).dtype);
            }
            return f32(in(1)) && in(2).dtype == DWELL_I32 && contiguous(in(2)) && f32(*out)
                       ? ""
                       : "expert_matmul operands";
        case DWELL_OP_MOE_COMBINE:
            return f32(in(0)) && f32(in(1)) && f32(*out) ? "" : "moe_combine operands";
        case DWELL_OP_SWIGLU:
            return f32(in(0)) && f32(in(1)) && f32(*out) ? "" : "operands must be F32";
        case DWELL_OP_ROPE:
            return f32(in(0)) && f32(*out) && in(1).dtype == DWELL_I32 ? "" : "rope operands";
        case DWELL_OP_ATTENTION: {
            const dwell_tensor& cache = in(3);
            if (cache.dtype != DWELL_F32 && cache.dtype != DWELL_F16 && cache.dtype != DWELL_Q8_0 &&
                cache.dtype != DWELL_FP8_E4M3) {
                return std::string("KV cache ") + dwell_dtype_name(cache.dtype);
            }
            if (cache.dtype == DWELL_Q8_0 && cache.ne[0] % 32 != 0)
                return "q8_0 rows of whole blocks";
            if (in(0).ne[0] > 256) return "head_dim above 256";
            if (!f32(in(0)) || !f32(in(1)) || !f32(in(2)) || !f32(*out)) return "q/k/v must be F32";
            if (!paged && in(4).dtype != cache.dtype) return "K and V caches differ in dtype";
            return "";
        }
        default:
            return std::string(dwell_op_name(n->op)) + " has no portable OpenCL kernel";
    }
}

// ---------------------------------------------------------------------------
// Running a node

class NodeRun {
public:
    NodeRun(dwell_backend_context& c, const dwell_graph* g) : c_(c), g_(g) {}
    ~NodeRun() {
        for (cl_event e : events_) c_.cl->ReleaseEvent(e);
        for (auto& [key, b] : bufs_) c_.cl->ReleaseMemObject(b.mem);
    }
    NodeRun(const NodeRun&) = delete;
    NodeRun& operator=(const NodeRun&) = delete;

    cl_mem wrap(const dwell_tensor& t, bool written) {
        return wrap_range(t.data, tensor_bytes(t), written);
    }

    cl_mem wrap_range(void* data, uint64_t bytes, bool written) {
        auto [it, fresh] = bufs_.try_emplace(data);
        if (!fresh) {
            it->second.written |= written;
            return it->second.mem;
        }
        cl_int err = CL_SUCCESS;
        it->second.mem = c_.cl->CreateBuffer(c_.context, CL_MEM_USE_HOST_PTR | CL_MEM_READ_WRITE,
                                             bytes, data, &err);
        if (err != CL_SUCCESS) {
            bufs_.erase(it);
            throw std::runtime_error("wrapping " + std::to_string(bytes) +
                                     " bytes failed: " + cl_error_name(err));
        }
        it->second.bytes = bytes;
        it->second.written = written;
        return it->second.mem;
    }

    template <typename... Args>
    void launch(const char* kernel, std::vector<size_t> global, const Args&... args) {
        auto it = c_.kernels.find(kernel);
        if (it == c_.kernels.end()) {
            cl_int err = CL_SUCCESS;
            cl_kernel k = c_.cl->CreateKernel(c_.program, kernel, &err);
            if (err != CL_SUCCESS) {
                throw std::runtime_error(std::string("kernel ") + kernel + ": " +
                                         cl_error_name(err));
            }
            it = c_.kernels.emplace(kernel, k).first;
        }
        cl_uint i = 0;
        (set(it->second, i++, args), ...);
        for (size_t g : global) {
            if (g == 0) return;  // nothing to do
        }
        cl_event done = nullptr;
        const cl_int err =
            c_.cl->EnqueueNDRangeKernel(c_.queue, it->second, static_cast<cl_uint>(global.size()),
                                        nullptr, global.data(), nullptr, 0, nullptr, &done);
        if (done != nullptr) events_.push_back(done);
        if (err != CL_SUCCESS) {
            throw std::runtime_error(std::string("running ") + kernel + ": " + cl_error_name(err));
        }
    }

    // Makes what the kernels wrote visible in host memory.
    void sync() {
        for (auto& [key, b] : bufs_) {
            if (!b.written) continue;
            cl_int err = CL_SUCCESS;
            void* p = c_.cl->EnqueueMapBuffer(c_.queue, b.mem, CL_TRUE, CL_MAP_READ, 0, b.bytes, 0,
                                              nullptr, nullptr, &err);
            if (err != CL_SUCCESS)
                throw std::runtime_error("mapping a result: " + cl_error_name(err));
            c_.cl->EnqueueUnmapMemObject(c_.queue, b.mem, p, 0, nullptr, nullptr);
        }
        const cl_int err = c_.cl->Finish(c_.queue);
        if (err != CL_SUCCESS) throw std::runtime_error("finishing: " + cl_error_name(err));
    }

    // Adds the kernels' device time to the context's times for `op`.
    void account(dwell_op op) {
        double seconds = 0;
        for (cl_event e : events_) {
            cl_ulong start = 0, end = 0;
            if (c_.cl->GetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof start, &start,
                                             nullptr) == CL_SUCCESS &&
                c_.cl->GetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof end, &end,
                                             nullptr) == CL_SUCCESS &&
                end >= start) {
                seconds += static_cast<double>(end - start) * 1e-9;
            }
        }
        auto& [count, total] = c_.times[op];
        count += 1;
        total += seconds;
    }

private:
    template <typename T>
    void set(cl_kernel k, cl_uint i, const T& v) {
        const cl_int err = c_.cl->SetKernelArg(k, i, sizeof(T), &v);
        if (err != CL_SUCCESS) {
            throw std::runtime_error("argument " + std::to_string(i) + ": " + cl_error_name(err));
        }
    }

    struct Buf {
        cl_mem mem = nullptr;
        uint64_t bytes = 0;
        bool written = false;
    };
    dwell_backend_context& c_;
    const dwell_graph* g_;
    std::map<const void*, Buf> bufs_;
    std::vector<cl_event> events_;
};

// Q4_0 weight `w` rearranged for matmul_q4_0_t (kernels_adreno.cl): block b
// of row n at texel b * N + n, scales in the same order; made once per
// weight. Null when the device's image buffers are too small for it.
const dwell_backend_context::Prepared* prepare_q4_0(dwell_backend_context& c,
                                                    const dwell_tensor& w) {
    const int64_t k = w.ne[0], n = w.ne[1], blocks = k / 32;
    const auto key = std::make_tuple(static_cast<const void*>(w.data), k, n);
    if (auto it = c.prepared.find(key); it != c.prepared.end()) return &it->second;
    size_t max_texels = 0;
    c.cl->GetDeviceInfo(c.device, CL_DEVICE_IMAGE_MAX_BUFFER_SIZE, sizeof max_texels, &max_texels,
                        nullptr);
    if (static_cast<uint64_t>(blocks * n) > max_texels) return nullptr;
    std::vector<uint8_t> quants(static_cast<size_t>(blocks * n) * 16);
    std::vector<uint16_t> scales(static_cast<size_t>(blocks * n));
    for (int64_t r = 0; r < n; ++r) {
        const auto* row = static_cast<const uint8_t*>(w.data) + static_cast<uint64_t>(r) * w.nb[1];
        for (int64_t b = 0; b < blocks; ++b) {
            const uint8_t* blk = row + b * 18;
            std::memcpy(&scales[static_cast<size_t>(b * n + r)], blk, 2);
            std::memcpy(&quants[static_cast<size_t>(b * n + r) * 16], blk + 2, 16);
        }
    }
    dwell_backend_context::Prepared p;
    cl_int err = CL_SUCCESS;
    p.quants = c.cl->CreateBuffer(c.context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, quants.size(),
                                  quants.data(), &err);
    if (err == CL_SUCCESS) {
        p.scales = c.cl->CreateBuffer(c.context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                      scales.size() * 2, scales.data(), &err);
    }
    if (err == CL_SUCCESS) {
        const cl_image_format format{CL_RGBA, CL_UNSIGNED_INT32};
        cl_image_desc desc{};
        desc.image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER;
        desc.image_width = static_cast<size_t>(blocks * n);
        desc.buffer = p.quants;
        p.image = c.cl->CreateImage(c.context, CL_MEM_READ_ONLY, &format, &desc, nullptr, &err);
    }
    if (err != CL_SUCCESS) {
        c.drop(p);
        throw std::runtime_error("uploading a q4_0 weight [" + std::to_string(k) + ", " +
                                 std::to_string(n) + "] failed: " + cl_error_name(err));
    }
    // The device holds its own copy now: the host may drop the mapped pages.
    if (c.host != nullptr && DWELL_HAS_FIELD(c.host, dwell_host_services, weights_copied) &&
        c.host->weights_copied != nullptr) {
        c.host->weights_copied(c.host->host, w.data, static_cast<size_t>(w.nb[1] * n));
    }
    return &c.prepared.emplace(key, p).first->second;
}

void run_node(dwell_backend_context& c, const dwell_graph* g, int32_t id,
              const std::vector<bool>& written) {
    const dwell_node& n = *dwell_graph_node(g, id);
    const auto in = [&](int i) -> const dwell_tensor& { return tensor(g, n.inputs[i]); };
    const dwell_tensor& out = tensor(g, n.output);
    NodeRun r(c, g);
    const auto count = static_cast<size_t>(dwell_tensor_nelements(&out));
    const auto rows = static_cast<size_t>(dwell_tensor_nrows(&out));
    switch (n.op) {
        case DWELL_OP_GET_ROWS: {
            const cl_mem table = r.wrap(in(0), false), ids = r.wrap(in(1), false);
            const cl_mem o = r.wrap(out, true);
            r.launch("get_rows", {static_cast<size_t>(out.ne[0]), rows}, table,
                     cl_ulong{in(0).nb[1]}, cl_int{in(0).dtype}, ids, o, cl_int(out.ne[0]));
            break;
        }
        case DWELL_OP_MATMUL: {
            const dwell_tensor& wt = in(0);
            // A weight: no node writes it and its buffer keeps it.
            const bool stable =
                !written[static_cast<size_t>(n.inputs[0])] &&
                (dwell_graph_tensor_flags(g, n.inputs[0]) & DWELL_TENSOR_VOLATILE) == 0;
            const cl_int k = cl_int(wt.ne[0]), n_out = cl_int(out.ne[0]);
            if (c.adreno && stable && wt.dtype == DWELL_Q4_0) {
                if (const auto* p = prepare_q4_0(c, wt)) {
                    const cl_mem x = r.wrap(in(1), false), o = r.wrap(out, true);
                    r.launch("matmul_q4_0_t", {static_cast<size_t>(n_out), rows}, p->image,
                             p->scales, x, o, k, n_out);
                    break;
                }
            }
            if (c.adreno && wt.dtype == DWELL_F16 && k % 4 == 0) {
                const cl_mem w = r.wrap(wt, false), x = r.wrap(in(1), false);
                const cl_mem o = r.wrap(out, true);
                r.launch("matmul_f16_h", {static_cast<size_t>(n_out), rows}, w, x, o, k, n_out);
                break;
            }
            const cl_mem w = r.wrap(in(0), false), x = r.wrap(in(1), false);
            const cl_mem o = r.wrap(out, true);
            r.launch("matmul", {static_cast<size_t>(out.ne[0]), rows}, w, cl_ulong{in(0).nb[1]},
                     cl_int{in(0).dtype}, x, o, cl_int(in(0).ne[0]), cl_int(out.ne[0]));
            break;
        }
        case DWELL_OP_ADD:
        case DWELL_OP_MUL: {
            const cl_mem a = r.wrap(in(0), false), b = r.wrap(in(1), false);
            const cl_mem o = r.wrap(out, true);
            r.launch("binary", {count}, a, b, o, cl_int(n.op == DWELL_OP_ADD ? 0 : 1),
                     cl_int(dwell_tensor_nelements(&in(1))));
            break;
        }
        case DWELL_OP_SCALE:
        case DWELL_OP_SILU:
        case DWELL_OP_GELU: {
            const cl_mem a = r.wrap(in(0), false), o = r.wrap(out, true);
            const cl_int op = n.op == DWELL_OP_SCALE ? 0 : n.op == DWELL_OP_SILU ? 1 : 2;
            r.launch("unary", {count}, a, o, op, cl_float(n.fparams[0]));
            break;
        }
        case DWELL_OP_SWIGLU: {
            const cl_mem a = r.wrap(in(0), false), b = r.wrap(in(1), false);
            const cl_mem o = r.wrap(out, true);
            r.launch("swiglu", {count}, a, b, o);
            break;
        }
        case DWELL_OP_RMS_NORM:
        case DWELL_OP_LAYER_NORM:
        case DWELL_OP_SOFTMAX: {
            const cl_mem a = r.wrap(in(0), false), o = r.wrap(out, true);
            if (n.op != DWELL_OP_SOFTMAX) {
                r.launch(n.op == DWELL_OP_RMS_NORM ? "rms_norm" : "layer_norm", {rows}, a, o,
                         cl_int(out.ne[0]), cl_float(n.fparams[0]));
            } else {
                r.launch("softmax", {rows}, a, o, cl_int(out.ne[0]));
            }
            break;
        }
        case DWELL_OP_ROPE: {
            const dwell_tensor& x = in(0);
            const cl_mem a = r.wrap(x, false), pos = r.wrap(in(1), false);
            const cl_mem o = r.wrap(out, true);
            const cl_int hd = cl_int(x.ne[0]), n_head = cl_int(x.ne[1]);
            const cl_int n_rot = n.iparams[1] > 0 ? n.iparams[1] : hd;
            if (n_rot < hd && x.data != out.data) {
                r.launch("copy_tail", {static_cast<size_t>(hd - n_rot), rows}, a, o, hd, n_rot);
            }
            r.launch("rope",
                     {static_cast<size_t>(n_rot / 2), static_cast<size_t>(n_head),
                      static_cast<size_t>(x.ne[2])},
                     a, o, pos, hd, n_head, n_rot, cl_int(n.iparams[0] == DWELL_ROPE_NEOX),
                     cl_float(n.fparams[0]), cl_float(n.fparams[1] != 0 ? n.fparams[1] : 1.0f));
            break;
        }
        case DWELL_OP_ATTENTION: {
            const dwell_tensor& q = in(0);
            const dwell_tensor& cache = in(3);
            const bool paged = in(4).dtype == DWELL_I32;
            // A page space is address space for every session: wrap only
            // the pages this op's table names, from the lowest.
            cl_int base_page = 0;
            void* cache_data = cache.data;
            uint64_t cache_bytes = tensor_bytes(cache);
            if (paged) {
                const auto* pos = static_cast<const int32_t*>(in(5).data);
                const int32_t max_pos = *std::max_element(pos, pos + in(5).ne[0]);
                const int64_t used = max_pos / cache.ne[1] + 1;
                const auto* table = static_cast<const int32_t*>(in(4).data);
                int32_t lo = table[0], hi = table[0];
                for (int64_t i = 0; i < 2 * used; ++i) {
                    lo = std::min(lo, table[i]);
                    hi = std::max(hi, table[i]);
                }
                base_page = lo;
                cache_data = static_cast<unsigned char*>(cache.data) + uint64_t(lo) * cache.nb[2];
                cache_bytes = uint64_t(hi - lo + 1) * cache.nb[2];
            }
            const cl_mem qm = r.wrap(q, false), km = r.wrap(in(1), false),
                         vm = r.wrap(in(2), false);
            const cl_mem kc = r.wrap_range(cache_data, cache_bytes, true);
            const cl_mem vc = paged ? kc : r.wrap(in(4), true);
            const cl_mem table = paged ? r.wrap(in(4), false) : kc;
            const cl_mem pos = r.wrap(in(5), false);
            const cl_mem o = r.wrap(out, true);
            const cl_int hd = cl_int(q.ne[0]), n_head = cl_int(q.ne[1]), n_kv = cl_int(in(1).ne[1]);
            const auto T = static_cast<size_t>(q.ne[2]);
            const cl_int dtype = cache.dtype;
            const cl_ulong row_bytes = cache.nb[1];
            const cl_ulong page_bytes = paged ? cache.nb[2] : 0;
            const cl_int rpp = paged ? cl_int(cache.ne[1]) : 1;
            const size_t width = static_cast<size_t>(hd) * n_kv;
            // Q8_0 rows are stored a block of 32 per work-item; FP8 keys a KV
            // head per work-item, in token order (their offsets need the rows
            // before them).
            const bool fp8 = cache.dtype == DWELL_FP8_E4M3;
            if (fp8) {
                r.launch("attention_store_fp8_keys", {static_cast<size_t>(n_kv)}, qm, km, kc, vc,
                         table, cl_int(paged), base_page, row_bytes, page_bytes, rpp, pos, hd,
                         n_head, n_kv, cl_int(T));
            }
            r.launch("attention_store", {cache.dtype == DWELL_Q8_0 ? width / 32 : width, T}, km, vm,
                     kc, vc, table, cl_int(paged), base_page, row_bytes, page_bytes, rpp, pos,
                     cl_int(width), dtype, cl_int(fp8 ? 1 : 0));
            r.launch("attention", {static_cast<size_t>(n_head), T}, qm, kc, vc, table,
                     cl_int(paged), base_page, row_bytes, page_bytes, rpp, pos, o, hd, n_head, n_kv,
                     dtype, cl_float(n.fparams[0]));
            break;
        }
        case DWELL_OP_CPY: {
            const cl_mem a = r.wrap(in(0), false), o = r.wrap(out, true);
            const auto n0 = static_cast<size_t>(in(0).ne[0]);
            r.launch("cpy_f32", {out.dtype == DWELL_Q8_0 ? n0 / 32 : n0, rows}, a, o,
                     cl_ulong{out.nb[1]}, cl_int(n0), cl_int{out.dtype});
            break;
        }
        case DWELL_OP_GATHER: {
            const cl_mem a = r.wrap(in(0), false), ids = r.wrap(in(1), false);
            const cl_mem o = r.wrap(out, true);
            r.launch("gather", {static_cast<size_t>(out.ne[0]), rows}, a, ids, o,
                     cl_int(in(0).ne[0]), cl_int(out.ne[0]));
            break;
        }
        case DWELL_OP_TOPK: {
            const cl_mem a = r.wrap(in(0), false), o = r.wrap(out, true);
            r.launch("topk", {rows}, a, o, cl_int(in(0).ne[0]), cl_int(out.ne[0]));
            break;
        }
        case DWELL_OP_EXPERT_MATMUL: {
            const cl_mem w = r.wrap(in(0), false), x = r.wrap(in(1), false);
            const cl_mem ids = r.wrap(in(2), false), o = r.wrap(out, true);
            r.launch("expert_matmul",
                     {static_cast<size_t>(out.ne[0]), static_cast<size_t>(out.ne[1]),
                      static_cast<size_t>(out.ne[2])},
                     w, cl_ulong{in(0).nb[1]}, cl_int{in(0).dtype}, x, ids, o, cl_int(in(0).ne[0]),
                     cl_int(out.ne[0]), cl_int(out.ne[1]));
            break;
        }
        case DWELL_OP_MOE_COMBINE: {
            const cl_mem y = r.wrap(in(0), false), w = r.wrap(in(1), false);
            const cl_mem o = r.wrap(out, true);
            r.launch("moe_combine",
                     {static_cast<size_t>(out.ne[0]), static_cast<size_t>(out.ne[1])}, y, w, o,
                     cl_int(out.ne[0]), cl_int(in(1).ne[0]));
            break;
        }
        default:
            throw std::runtime_error(std::string("no kernel for ") + dwell_op_name(n.op));
    }
    r.sync();
    r.account(n.op);
}

// ---------------------------------------------------------------------------
// The vtable

dwell_status device_count(void*, uint32_t* count) {
    if (count == nullptr) return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "null count");
    *count = static_cast<uint32_t>(probe().devices.size());
    return DWELL_OK;
}

dwell_status device_info(void*, uint32_t index, dwell_device_info* info) {
    const Probe& p = probe();
    if (info == nullptr) return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "null info");
    if (index >= p.devices.size()) {
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT,
                           "device index " + std::to_string(index) + " is out of range");
    }
    const Device& d = p.devices[index];
    plugin_kit::DeviceFacts f;
    f.name = d.name.c_str();
    f.description = d.description.c_str();
    f.kind = d.kind;
    f.hardware_id = d.hardware_id.c_str();
    f.memory_total = d.memory;
    f.buffer_kind = DWELL_BUFFER_HOST;
    f.unavailable_reason = d.available ? nullptr : d.why.c_str();
    return plugin_kit::describe_device(info, f);
}

const char* last_error(void*) {
    return plugin_kit::message_or_none(g_plugin_error);
}

dwell_status context_create(void*, uint32_t device, const dwell_option* options, size_t n_options,
                            const dwell_host_services* host, dwell_backend_context** out) {
    if (out == nullptr) return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "null output");
    const Probe& p = probe();
    if (device >= p.devices.size() || !p.devices[device].available) {
        return fail_plugin(DWELL_ERR_UNAVAILABLE,
                           device < p.devices.size() ? p.devices[device].why : "no such device");
    }
    const Device& d = p.devices[device];
    auto c = std::make_unique<dwell_backend_context>();
    c->cl = p.cl;
    c->device_name = d.description;
    cl_int err = CL_SUCCESS;
    c->context = p.cl->CreateContext(nullptr, 1, &d.id, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) {
        return fail_plugin(DWELL_ERR_UNAVAILABLE,
                           d.description + ": creating a context failed: " + cl_error_name(err));
    }
    c->queue = p.cl->CreateCommandQueue(c->context, d.id, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        return fail_plugin(DWELL_ERR_UNAVAILABLE,
                           d.description + ": creating a queue failed: " + cl_error_name(err));
    }
    Options opts;
    try {
        opts = parse_options(options, n_options);
    } catch (const std::exception& e) {
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, e.what());
    }
    c->device = d.id;
    c->host = host;
    c->adreno = opts.kernels == "adreno" ||
                (opts.kernels == "auto" && d.description.find("Adreno") != std::string::npos);
    try {
        c->program = build_program(*c, d, opts);
    } catch (const std::exception& e) {
        return fail_plugin(DWELL_ERR_UNAVAILABLE, d.description + ": " + e.what());
    }
    *out = c.release();
    return DWELL_OK;
}

int32_t supports_op(dwell_backend_context* c, const dwell_graph* g, int32_t node) {
    return plugin_kit::supports_via(c, g, node, check);
}

dwell_status graph_compute(dwell_backend_context* c, const dwell_graph* g, const int32_t* ids,
                           size_t n_ids) {
    if (c == nullptr || g == nullptr || (n_ids > 0 && ids == nullptr)) {
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "graph_compute: null argument");
    }
    const std::vector<bool> written = plugin_kit::written_tensors(g);
    for (size_t i = 0; i < n_ids; ++i) {
        const std::string why = check(g, ids[i]);
        if (!why.empty()) {
            c->last_error = "node " + std::to_string(ids[i]) + ": " + why;
            return DWELL_ERR_UNSUPPORTED;
        }
        try {
            run_node(*c, g, ids[i], written);
        } catch (const std::bad_alloc&) {
            c->last_error = "out of host memory";
            return DWELL_ERR_OUT_OF_MEMORY;
        } catch (const std::exception& e) {
            c->last_error = "node " + std::to_string(ids[i]) + " (" +
                            dwell_op_name(dwell_graph_node(g, ids[i])->op) + ") on " +
                            c->device_name + ": " + e.what();
            return DWELL_ERR_INTERNAL;
        }
    }
    return DWELL_OK;
}

void release_weights(dwell_backend_context* c, const void* data, size_t bytes) {
    if (c == nullptr || data == nullptr) return;
    plugin_kit::erase_weights_in(c->prepared, plugin_kit::HostRange(data, bytes),
                                 [&](auto& kv) { c->drop(kv.second); });
}

dwell_status op_times(dwell_backend_context* c, dwell_op_time* out, size_t* n, int32_t reset) {
    if (c == nullptr || n == nullptr || (*n > 0 && out == nullptr)) {
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "op_times: null argument");
    }
    size_t i = 0;
    for (const auto& [op, t] : c->times) {
        if (i < *n) out[i] = dwell_op_time{op, 0, t.first, t.second};
        ++i;
    }
    *n = i;
    if (reset) c->times.clear();
    return DWELL_OK;
}

dwell_backend_plugin make_vtable() {
    dwell_backend_plugin v{};
    v.struct_size = sizeof v;
    v.device_count = device_count;
    v.device_info = device_info;
    v.last_error = last_error;
    v.context_create = context_create;
    v.context_destroy = plugin_kit::destroy_context<dwell_backend_context>;
    v.context_last_error = plugin_kit::context_last_error<dwell_backend_context>;
    v.supports_op = supports_op;
    v.graph_compute = graph_compute;
    v.op_times = op_times;
    v.release_weights = release_weights;
    return v;
}

dwell_status query(const dwell_host_services* host, dwell_plugin_info* info) {
    static const dwell_backend_plugin vtable = make_vtable();
    return plugin_kit::describe_backend(host, info, kPluginName, kPluginVersion,
                                        "OpenCL backend: portable and Adreno-tuned kernels",
                                        &vtable,
                                        "opencl plugin: the host's ABI major version differs");
}

}  // namespace
}  // namespace dwell::opencl

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    try {
        return dwell::opencl::query(host, info);
    } catch (...) {
        return DWELL_ERR_INTERNAL;
    }
}
