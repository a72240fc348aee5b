// The NNRt test double's libneural_network_core.so: tensor descriptions,
// compilations (device, cache folder and version, performance mode,
// priority, float16), executors, tensors and devices, computed on the CPU
// with reference kernels (fp16 and per-channel int8 dequantization). Two
// devices: "fake-cpu" (id 7, OH_NN_CPU) listed before "fake-npu" (id 9,
// OH_NN_ACCELERATOR), so a plugin has to choose.
//
// Contract checks, recorded for fake_nnrt_violations(): a compilation only
// of a finished model, Build only with a device set and only once, nothing
// set after Build, an executor only from a built compilation, tensors of
// the executor's device whose descriptions and sizes match the model's
// inputs and outputs, handles live at every call, and — when asked — every
// object destroyed. The cache: Build with a cache folder writes
// fake_nnrt_model.cache there (version and the model's fingerprint); a
// later Build with the same folder, version and model loads it instead of
// compiling (a cache hit); a folder holding another model is a violation,
// since a real runtime would load that model blindly.
//
// Faults, read at each Build / RunSync from DWELL_FAKE_NNRT_FAIL:
// "build:N" (the Nth Build fails) or "run:N" (the Nth RunSync fails), N
// counted from when the variable last changed.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "fake_nnrt_state.hpp"

using fake_nnrt::Desc;
using fake_nnrt::State;

FAKE_NNRT_EXPORT State* fake_nnrt_state() {
    static State s;
    return &s;
}

namespace {

State& st() {
    return *fake_nnrt_state();
}

// The double's own IEEE half conversions (independent of the plugin's).
float half_to_float(uint16_t h) {
    const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -24);
    if (exp == 31) return man ? NAN : sign * INFINITY;
    return sign * std::ldexp(static_cast<float>(man | 0x400), exp - 25);
}

uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
    const float a = std::fabs(f);
    if (std::isnan(f)) return sign | 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
    if (a < std::ldexp(1.0f, -14)) {
        // Subnormal: units of 2^-24, ties to even (nearbyint's default mode).
        return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
    }
    int e = 0;
    const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    // 11 significant bits, ties to even; a carry into bit 11 bumps the exponent.
    const uint32_t sig = static_cast<uint32_t>(std::nearbyint(std::ldexp(m, 11)));
    const uint32_t bits = (static_cast<uint32_t>(e + 14) << 10) + (sig - 0x400);
    return sign | static_cast<uint16_t>(bits);
}

float round_to_half(float f) {
    return half_to_float(float_to_half(f));
}

std::vector<float> decode(const Desc& d, const uint8_t* p, bool as_half) {
    std::vector<float> v(d.elements());
    for (size_t i = 0; i < v.size(); ++i) {
        if (d.dtype == fake_nnrt::kFloat16) {
            uint16_t h;
            std::memcpy(&h, p + 2 * i, 2);
            v[i] = half_to_float(h);
        } else {
            std::memcpy(&v[i], p + 4 * i, 4);
            if (as_half) v[i] = round_to_half(v[i]);  // EnableFloat16 on a float32 model
        }
    }
    return v;
}

void encode(const Desc& d, const std::vector<float>& v, uint8_t* p) {
    for (size_t i = 0; i < v.size(); ++i) {
        if (d.dtype == fake_nnrt::kFloat16) {
            const uint16_t h = float_to_half(v[i]);
            std::memcpy(p + 2 * i, &h, 2);
        } else {
            std::memcpy(p + 4 * i, &v[i], 4);
        }
    }
}

// The model's content, for the cache file.
uint64_t fingerprint(const OH_NNModel& m) {
    uint64_t h = 0xcbf29ce484222325ull;
    const auto mix = [&](const void* data, size_t n) {
        for (size_t i = 0; i < n; ++i) {
            h ^= static_cast<const uint8_t*>(data)[i];
            h *= 0x100000001b3ull;
        }
    };
    for (const auto& t : m.tensors) {
        mix(&t.desc.dtype, 4);
        mix(t.desc.shape.data(), t.desc.shape.size() * 4);
        mix(t.data.data(), t.data.size());
        mix(t.scales.data(), t.scales.size() * sizeof(double));
    }
    for (const auto& op : m.ops) {
        mix(op.inputs.data(), op.inputs.size() * 4);
        mix(op.outputs.data(), op.outputs.size() * 4);
    }
    return h;
}

bool valid_device(size_t id) {
    return id == 7 || id == 9;
}

// The model's computation: FULL_CONNECTION in fp32 accumulation, outputs
// rounded to their type.
void execute(const OH_NNModel& m, bool float16, const std::vector<std::vector<float>>& inputs,
             std::vector<std::vector<float>>& outputs) {
    std::vector<std::vector<float>> value(m.tensors.size());
    for (size_t i = 0; i < m.inputs.size(); ++i) value[m.inputs[i]] = inputs[i];
    for (const auto& op : m.ops) {
        const auto& xt = m.tensors[op.inputs[0]];
        const auto& wt = m.tensors[op.inputs[1]];
        const auto& bt = m.tensors[op.inputs[2]];
        const auto& ot = m.tensors[op.outputs[0]];
        const int32_t rows = xt.desc.shape[0], k = xt.desc.shape[1], n = wt.desc.shape[0];
        const std::vector<float>& x = value[op.inputs[0]];
        std::vector<float> w(static_cast<size_t>(n) * k);
        if (wt.desc.dtype == fake_nnrt::kInt8) {
            for (int32_t r = 0; r < n; ++r)
                for (int32_t c = 0; c < k; ++c)
                    w[static_cast<size_t>(r) * k + c] = static_cast<float>(
                        static_cast<int8_t>(wt.data[static_cast<size_t>(r) * k + c]) *
                        wt.scales[static_cast<size_t>(r)]);
        } else {
            w = decode(wt.desc, wt.data.data(), float16);
        }
        const std::vector<float> b = decode(bt.desc, bt.data.data(), false);
        const int8_t fuse = static_cast<int8_t>(m.tensors[op.params[0]].data[0]);
        std::vector<float> y(static_cast<size_t>(rows) * n);
        for (int32_t r = 0; r < rows; ++r) {
            for (int32_t c = 0; c < n; ++c) {
                float s = 0;
                const float* xr = x.data() + static_cast<size_t>(r) * k;
                const float* wr = w.data() + static_cast<size_t>(c) * k;
                for (int32_t i = 0; i < k; ++i) s += xr[i] * wr[i];
                s += b[static_cast<size_t>(c)];
                if (fuse >= 1) s = std::max(s, 0.0f);
                if (fuse == 2) s = std::min(s, 6.0f);
                y[static_cast<size_t>(r) * n + c] =
                    ot.desc.dtype == fake_nnrt::kFloat16 || float16 ? round_to_half(s) : s;
            }
        }
        value[op.outputs[0]] = std::move(y);
    }
    outputs.clear();
    for (uint32_t o : m.outputs) outputs.push_back(value[o]);
}

}  // namespace

// ---------------------------------------------------------------------------
// Devices

FAKE_NNRT_EXPORT int32_t OH_NNDevice_GetAllDevicesID(const size_t** ids, uint32_t* count) {
    static const size_t kIds[] = {7, 9};
    if (ids == nullptr || count == nullptr) return fake_nnrt::kNullPtr;
    *ids = kIds;
    *count = 2;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNDevice_GetName(size_t id, const char** name) {
    if (name == nullptr || !valid_device(id)) return fake_nnrt::kInvalidParameter;
    *name = id == 7 ? "fake-cpu" : "fake-npu";
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNDevice_GetType(size_t id, int32_t* type) {
    if (type == nullptr || !valid_device(id)) return fake_nnrt::kInvalidParameter;
    *type = id == 7 ? fake_nnrt::kDeviceCpu : fake_nnrt::kDeviceAccelerator;
    return fake_nnrt::kSuccess;
}

// ---------------------------------------------------------------------------
// Tensor descriptions

FAKE_NNRT_EXPORT NN_TensorDesc* OH_NNTensorDesc_Create() {
    State& s = st();
    std::lock_guard lock(s.mutex);
    auto* d = new NN_TensorDesc();
    s.descs.insert(d);
    return d;
}

FAKE_NNRT_EXPORT int32_t OH_NNTensorDesc_Destroy(NN_TensorDesc** d) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (d == nullptr || !s.descs.count(*d)) {
        s.violate("OH_NNTensorDesc_Destroy of a handle that is not live");
        return fake_nnrt::kInvalidParameter;
    }
    s.descs.erase(*d);
    delete *d;
    *d = nullptr;
    return fake_nnrt::kSuccess;
}

namespace {

NN_TensorDesc* live_desc(State& s, NN_TensorDesc* d, const char* call) {
    if (d != nullptr && s.descs.count(d)) return d;
    s.violate(std::string(call) + " with a handle that is not a live tensor desc");
    return nullptr;
}

}  // namespace

FAKE_NNRT_EXPORT int32_t OH_NNTensorDesc_SetDataType(NN_TensorDesc* d, int32_t type) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (!live_desc(s, d, "OH_NNTensorDesc_SetDataType")) return fake_nnrt::kInvalidParameter;
    if (fake_nnrt::element_size(type) == 0) return fake_nnrt::kInvalidParameter;
    d->desc.dtype = type;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNTensorDesc_SetShape(NN_TensorDesc* d, const int32_t* shape,
                                                  size_t n) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (!live_desc(s, d, "OH_NNTensorDesc_SetShape")) return fake_nnrt::kInvalidParameter;
    if (shape == nullptr || n == 0) return fake_nnrt::kInvalidParameter;
    for (size_t i = 0; i < n; ++i) {
        if (shape[i] <= 0) {
            s.violate("OH_NNTensorDesc_SetShape with a dimension <= 0 (fixed shapes only)");
            return fake_nnrt::kInvalidParameter;
        }
    }
    d->desc.shape.assign(shape, shape + n);
    d->desc.shape_set = true;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNTensorDesc_SetFormat(NN_TensorDesc* d, int32_t format) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (!live_desc(s, d, "OH_NNTensorDesc_SetFormat")) return fake_nnrt::kInvalidParameter;
    if (format < 0 || format > 3) return fake_nnrt::kInvalidParameter;
    d->desc.format = format;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNTensorDesc_GetByteSize(const NN_TensorDesc* d, size_t* bytes) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (!live_desc(s, const_cast<NN_TensorDesc*>(d), "OH_NNTensorDesc_GetByteSize") ||
        bytes == nullptr)
        return fake_nnrt::kInvalidParameter;
    *bytes = d->desc.bytes();
    return fake_nnrt::kSuccess;
}

// ---------------------------------------------------------------------------
// Compilations

FAKE_NNRT_EXPORT OH_NNCompilation* OH_NNCompilation_Construct(const OH_NNModel* m) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (m == nullptr || !s.models.count(m)) {
        s.violate("OH_NNCompilation_Construct of a handle that is not a live model");
        return nullptr;
    }
    if (!m->finished) {
        s.violate("OH_NNCompilation_Construct of a model before OH_NNModel_Finish");
        return nullptr;
    }
    auto* c = new OH_NNCompilation();
    c->model = std::make_shared<const OH_NNModel>(*m);
    s.compilations.insert(c);
    return c;
}

FAKE_NNRT_EXPORT void OH_NNCompilation_Destroy(OH_NNCompilation** c) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (c == nullptr || !s.compilations.count(*c)) {
        s.violate("OH_NNCompilation_Destroy of a handle that is not live");
        return;
    }
    s.compilations.erase(*c);
    delete *c;
    *c = nullptr;
}

namespace {

// A live compilation not built yet, or a violation naming `call`.
int32_t configurable(State& s, OH_NNCompilation* c, const char* call) {
    if (c == nullptr || !s.compilations.count(c)) {
        s.violate(std::string(call) + " with a handle that is not a live compilation");
        return fake_nnrt::kInvalidParameter;
    }
    if (c->built) {
        s.violate(std::string(call) + " after OH_NNCompilation_Build");
        return fake_nnrt::kOperationForbidden;
    }
    return fake_nnrt::kSuccess;
}

}  // namespace

FAKE_NNRT_EXPORT int32_t OH_NNCompilation_SetDevice(OH_NNCompilation* c, size_t id) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = configurable(s, c, "OH_NNCompilation_SetDevice")) return rc;
    if (!valid_device(id)) {
        s.violate("OH_NNCompilation_SetDevice of device " + std::to_string(id) +
                  ", which OH_NNDevice_GetAllDevicesID did not report");
        return fake_nnrt::kInvalidParameter;
    }
    c->device = id;
    c->device_set = true;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNCompilation_SetCache(OH_NNCompilation* c, const char* path,
                                                   uint32_t version) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = configurable(s, c, "OH_NNCompilation_SetCache")) return rc;
    struct stat sb {};
    if (path == nullptr || ::stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return fake_nnrt::kInvalidPath;
    c->cache_path = path;
    c->cache_version = version;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNCompilation_SetPerformanceMode(OH_NNCompilation* c, int32_t mode) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = configurable(s, c, "OH_NNCompilation_SetPerformanceMode")) return rc;
    if (mode < 0 || mode > 4) return fake_nnrt::kInvalidParameter;
    c->performance = mode;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNCompilation_SetPriority(OH_NNCompilation* c, int32_t priority) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = configurable(s, c, "OH_NNCompilation_SetPriority")) return rc;
    if (priority < 0 || priority > 3) return fake_nnrt::kInvalidParameter;
    c->priority = priority;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNCompilation_EnableFloat16(OH_NNCompilation* c, bool on) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = configurable(s, c, "OH_NNCompilation_EnableFloat16")) return rc;
    c->float16 = on;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNCompilation_Build(OH_NNCompilation* c) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (int32_t rc = configurable(s, c, "OH_NNCompilation_Build")) return rc;
    if (!c->device_set) {
        s.violate("OH_NNCompilation_Build without OH_NNCompilation_SetDevice");
        return fake_nnrt::kOperationForbidden;
    }
    if (s.faults.count(State::kBuildCalls).is("build")) return fake_nnrt::kFailed;
    std::ostringstream cfg;
    cfg << "device=" << c->device << " performance=" << c->performance
        << " priority=" << c->priority << " float16=" << c->float16
        << " cache=" << (c->cache_path.empty() ? "none" : "set");
    s.last_build = cfg.str();
    const uint64_t fp = fingerprint(*c->model);
    if (!c->cache_path.empty()) {
        const std::string file = c->cache_path + "/fake_nnrt_model.cache";
        std::ifstream in(file);
        std::string magic;
        uint32_t version = 0;
        uint64_t held = 0;
        if (in >> magic >> version >> std::hex >> held && magic == "fake-nnrt-cache" &&
            version == c->cache_version) {
            if (held == fp) {
                ++s.cache_hits;
                c->built = true;
                return fake_nnrt::kSuccess;
            }
            s.violate("the cache folder " + c->cache_path +
                      " holds another model: one folder must serve one model");
        }
        std::ofstream out(file, std::ios::trunc);
        out << "fake-nnrt-cache " << c->cache_version << " " << std::hex << fp << "\n";
        if (!out) return fake_nnrt::kFailed;  // OH_NN_SAVE_CACHE_EXCEPTION would be kinder
    }
    ++s.builds;
    c->built = true;
    return fake_nnrt::kSuccess;
}

// ---------------------------------------------------------------------------
// Executors and tensors

FAKE_NNRT_EXPORT OH_NNExecutor* OH_NNExecutor_Construct(OH_NNCompilation* c) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (c == nullptr || !s.compilations.count(c) || !c->built) {
        s.violate("OH_NNExecutor_Construct from a compilation that is not live and built");
        return nullptr;
    }
    auto* e = new OH_NNExecutor();
    e->model = c->model;
    e->device = c->device;
    e->float16 = c->float16;
    s.executors.insert(e);
    return e;
}

FAKE_NNRT_EXPORT void OH_NNExecutor_Destroy(OH_NNExecutor** e) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (e == nullptr || !s.executors.count(*e)) {
        s.violate("OH_NNExecutor_Destroy of a handle that is not live");
        return;
    }
    s.executors.erase(*e);
    delete *e;
    *e = nullptr;
}

namespace {

NN_TensorDesc* io_desc(const OH_NNExecutor* e, size_t index, bool input) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (e == nullptr || !s.executors.count(e)) {
        s.violate("OH_NNExecutor_Create*TensorDesc with a handle that is not a live executor");
        return nullptr;
    }
    const auto& list = input ? e->model->inputs : e->model->outputs;
    if (index >= list.size()) return nullptr;
    auto* d = new NN_TensorDesc();
    d->desc = e->model->tensors[list[index]].desc;
    s.descs.insert(d);
    return d;
}

}  // namespace

FAKE_NNRT_EXPORT NN_TensorDesc* OH_NNExecutor_CreateInputTensorDesc(const OH_NNExecutor* e,
                                                                    size_t index) {
    return io_desc(e, index, true);
}

FAKE_NNRT_EXPORT NN_TensorDesc* OH_NNExecutor_CreateOutputTensorDesc(const OH_NNExecutor* e,
                                                                     size_t index) {
    return io_desc(e, index, false);
}

FAKE_NNRT_EXPORT NN_Tensor* OH_NNTensor_Create(size_t device, NN_TensorDesc* d) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (!live_desc(s, d, "OH_NNTensor_Create")) return nullptr;
    if (!valid_device(device) || d->desc.dtype == fake_nnrt::kUnknown || !d->desc.shape_set) {
        s.violate("OH_NNTensor_Create on an unknown device or from an incomplete description");
        return nullptr;
    }
    auto* t = new NN_Tensor();
    t->desc = d->desc;  // the description may be destroyed right after
    t->device = device;
    t->data.assign(t->desc.bytes(), 0);
    s.tensors.insert(t);
    return t;
}

FAKE_NNRT_EXPORT void* OH_NNTensor_GetDataBuffer(const NN_Tensor* t) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (t == nullptr || !s.tensors.count(t)) {
        s.violate("OH_NNTensor_GetDataBuffer of a handle that is not a live tensor");
        return nullptr;
    }
    return const_cast<uint8_t*>(t->data.data());
}

FAKE_NNRT_EXPORT int32_t OH_NNTensor_Destroy(NN_Tensor** t) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (t == nullptr || !s.tensors.count(*t)) {
        s.violate("OH_NNTensor_Destroy of a handle that is not live");
        return fake_nnrt::kInvalidParameter;
    }
    s.tensors.erase(*t);
    delete *t;
    *t = nullptr;
    return fake_nnrt::kSuccess;
}

FAKE_NNRT_EXPORT int32_t OH_NNExecutor_RunSync(OH_NNExecutor* e, NN_Tensor* inputs[], size_t n_in,
                                               NN_Tensor* outputs[], size_t n_out) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    if (e == nullptr || !s.executors.count(e)) {
        s.violate("OH_NNExecutor_RunSync with a handle that is not a live executor");
        return fake_nnrt::kInvalidParameter;
    }
    const OH_NNModel& m = *e->model;
    if (n_in != m.inputs.size() || n_out != m.outputs.size() || inputs == nullptr ||
        outputs == nullptr) {
        s.violate("OH_NNExecutor_RunSync with " + std::to_string(n_in) + " inputs and " +
                  std::to_string(n_out) + " outputs for a model of " +
                  std::to_string(m.inputs.size()) + " and " + std::to_string(m.outputs.size()));
        return fake_nnrt::kInvalidParameter;
    }
    const auto matches = [&](NN_Tensor* t, uint32_t index, const char* what) {
        const Desc& want = m.tensors[index].desc;
        if (t == nullptr || !s.tensors.count(t)) {
            s.violate(std::string("OH_NNExecutor_RunSync: an ") + what + " is not a live tensor");
            return false;
        }
        if (t->device != e->device) {
            s.violate(std::string("OH_NNExecutor_RunSync: an ") + what +
                      " tensor was created for another device");
            return false;
        }
        if (t->desc.dtype != want.dtype || t->desc.shape != want.shape ||
            t->data.size() < want.bytes()) {
            s.violate(std::string("OH_NNExecutor_RunSync: ") + what + " " + t->desc.str() +
                      " does not match the model's " + want.str());
            return false;
        }
        return true;
    };
    for (size_t i = 0; i < n_in; ++i)
        if (!matches(inputs[i], m.inputs[i], "input")) return fake_nnrt::kInvalidParameter;
    for (size_t i = 0; i < n_out; ++i)
        if (!matches(outputs[i], m.outputs[i], "output")) return fake_nnrt::kInvalidParameter;
    if (s.faults.count(State::kRunCalls).is("run")) return fake_nnrt::kFailed;
    std::vector<std::vector<float>> in, out;
    for (size_t i = 0; i < n_in; ++i)
        in.push_back(decode(inputs[i]->desc, inputs[i]->data.data(), e->float16));
    execute(m, e->float16, in, out);
    for (size_t i = 0; i < n_out; ++i) encode(outputs[i]->desc, out[i], outputs[i]->data.data());
    ++s.runs;
    return fake_nnrt::kSuccess;
}

// ---------------------------------------------------------------------------
// For tests

// The contract violations seen so far plus every object still alive, as
// text; returns its length (0: clean).
FAKE_NNRT_EXPORT int fake_nnrt_violations(char* out, int cap) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    std::string all = s.violations.lines;
    const auto open = [&](const std::set<const void*>& live, const char* what) {
        if (!live.empty()) all += std::to_string(live.size()) + " " + what + " not destroyed\n";
    };
    open(s.models, "model(s)");
    open(s.quant_params, "quant param(s)");
    open(s.descs, "tensor desc(s)");
    open(s.compilations, "compilation(s)");
    open(s.executors, "executor(s)");
    open(s.tensors, "tensor(s)");
    return fake_vendor::copy_text(all, out, cap);
}

FAKE_NNRT_EXPORT long fake_nnrt_builds() {
    std::lock_guard lock(st().mutex);
    return st().builds;
}

FAKE_NNRT_EXPORT long fake_nnrt_cache_hits() {
    std::lock_guard lock(st().mutex);
    return st().cache_hits;
}

FAKE_NNRT_EXPORT long fake_nnrt_runs() {
    std::lock_guard lock(st().mutex);
    return st().runs;
}

// "device=9 performance=3 priority=2 float16=0 cache=set" of the last Build.
FAKE_NNRT_EXPORT int fake_nnrt_last_build(char* out, int cap) {
    State& s = st();
    std::lock_guard lock(s.mutex);
    return fake_vendor::copy_text(s.last_build, out, cap);
}
