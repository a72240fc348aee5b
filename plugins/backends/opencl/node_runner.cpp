#include "node_runner.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend_plugin_kit.hpp"
#include "cl_api.hpp"

namespace dwell::opencl {
namespace {

using plugin_kit::tensor;

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

}  // namespace

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
        case DWELL_OP_SIGMOID:
        case DWELL_OP_SOFTPLUS:
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
            // ABI 1.5's frequency and attention factors have no kernel here.
            if (n->n_inputs > 2 || (n->fparams[2] != 0.0f && n->fparams[2] != 1.0f))
                return "rope frequency or attention factors";
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
            // ABI 1.5's window and soft-cap: the kernel attends over every
            // row uncapped, so such nodes stay on the cpu.
            if (n->iparams[0] != 0) return "sliding-window attention (no kernel yet)";
            if (n->fparams[1] != 0.0f) return "soft-capped attention (no kernel yet)";
            return "";
        }
        case DWELL_OP_SHORT_CONV:
            if (n->n_inputs != 3) return "short_conv takes x, kernel and state";
            if (in(1).dtype != DWELL_F32 && in(1).dtype != DWELL_F16)
                return std::string("short_conv kernel dtype ") + dwell_dtype_name(in(1).dtype);
            return f32(in(0)) && contiguous(in(1)) && f32(in(2)) && f32(*out)
                       ? ""
                       : "short_conv operands must be contiguous";
        case DWELL_OP_SLICE:
            return f32(in(0)) && contiguous(in(0)) && f32(*out) && contiguous(*out)
                       ? ""
                       : "slice operands must be contiguous F32";
        case DWELL_OP_GATED_DELTA_NET:
            if (n->n_inputs != 6) return "gated_delta_net takes q, k, v, g, beta and state";
            for (int i = 0; i < 6; ++i)
                if (!f32(in(i)) || !contiguous(in(i)))
                    return "gated_delta_net operands must be contiguous F32";
            return f32(*out) && contiguous(*out) ? "" : "gated_delta_net output must be F32";
        default:
            return std::string(dwell_op_name(n->op)) + " has no portable OpenCL kernel";
    }
}

namespace {

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

// The node being run, and its output's size as the kernels' grids use it.
struct NodeView {
    const dwell_graph* g;
    const dwell_node& n;
    const dwell_tensor& out;
    size_t count;  // elements of the output
    size_t rows;   // rows of the output
    const dwell_tensor& in(int i) const { return tensor(g, n.inputs[i]); }
};

void launch_get_rows(NodeRun& r, const NodeView& v) {
    const cl_mem table = r.wrap(v.in(0), false), ids = r.wrap(v.in(1), false);
    const cl_mem o = r.wrap(v.out, true);
    r.launch("get_rows", {static_cast<size_t>(v.out.ne[0]), v.rows}, table, cl_ulong{v.in(0).nb[1]},
             cl_int{v.in(0).dtype}, ids, o, cl_int(v.out.ne[0]));
}

void launch_matmul(dwell_backend_context& c, NodeRun& r, const NodeView& v,
                   const std::vector<bool>& written) {
    const dwell_tensor& wt = v.in(0);
    // A weight: no node writes it and its buffer keeps it.
    const bool stable = !written[static_cast<size_t>(v.n.inputs[0])] &&
                        (dwell_graph_tensor_flags(v.g, v.n.inputs[0]) & DWELL_TENSOR_VOLATILE) == 0;
    const cl_int k = cl_int(wt.ne[0]), n_out = cl_int(v.out.ne[0]);
    if (c.adreno && stable && wt.dtype == DWELL_Q4_0) {
        if (const auto* p = prepare_q4_0(c, wt)) {
            const cl_mem x = r.wrap(v.in(1), false), o = r.wrap(v.out, true);
            r.launch("matmul_q4_0_t", {static_cast<size_t>(n_out), v.rows}, p->image, p->scales, x,
                     o, k, n_out);
            return;
        }
    }
    if (c.adreno && wt.dtype == DWELL_F16 && k % 4 == 0) {
        const cl_mem w = r.wrap(wt, false), x = r.wrap(v.in(1), false);
        const cl_mem o = r.wrap(v.out, true);
        r.launch("matmul_f16_h", {static_cast<size_t>(n_out), v.rows}, w, x, o, k, n_out);
        return;
    }
    const cl_mem w = r.wrap(v.in(0), false), x = r.wrap(v.in(1), false);
    const cl_mem o = r.wrap(v.out, true);
    r.launch("matmul", {static_cast<size_t>(v.out.ne[0]), v.rows}, w, cl_ulong{v.in(0).nb[1]},
             cl_int{v.in(0).dtype}, x, o, cl_int(v.in(0).ne[0]), cl_int(v.out.ne[0]));
}

void launch_binary(NodeRun& r, const NodeView& v) {
    const cl_mem a = r.wrap(v.in(0), false), b = r.wrap(v.in(1), false);
    const cl_mem o = r.wrap(v.out, true);
    r.launch("binary", {v.count}, a, b, o, cl_int(v.n.op == DWELL_OP_ADD ? 0 : 1),
             cl_int(dwell_tensor_nelements(&v.in(1))));
}

void launch_unary(NodeRun& r, const NodeView& v) {
    const cl_mem a = r.wrap(v.in(0), false), o = r.wrap(v.out, true);
    const cl_int op = v.n.op == DWELL_OP_SCALE      ? 0
                      : v.n.op == DWELL_OP_SILU     ? 1
                      : v.n.op == DWELL_OP_SIGMOID  ? 3
                      : v.n.op == DWELL_OP_SOFTPLUS ? 4
                                                    : 2;
    r.launch("unary", {v.count}, a, o, op, cl_float(v.n.fparams[0]));
}

void launch_swiglu(NodeRun& r, const NodeView& v) {
    const cl_mem a = r.wrap(v.in(0), false), b = r.wrap(v.in(1), false);
    const cl_mem o = r.wrap(v.out, true);
    r.launch("swiglu", {v.count}, a, b, o);
}

void launch_norm_or_softmax(NodeRun& r, const NodeView& v) {
    const cl_mem a = r.wrap(v.in(0), false), o = r.wrap(v.out, true);
    if (v.n.op != DWELL_OP_SOFTMAX) {
        r.launch(v.n.op == DWELL_OP_RMS_NORM ? "rms_norm" : "layer_norm", {v.rows}, a, o,
                 cl_int(v.out.ne[0]), cl_float(v.n.fparams[0]));
    } else {
        r.launch("softmax", {v.rows}, a, o, cl_int(v.out.ne[0]));
    }
}

void launch_rope(NodeRun& r, const NodeView& v) {
    const dwell_tensor& x = v.in(0);
    const cl_mem a = r.wrap(x, false), pos = r.wrap(v.in(1), false);
    const cl_mem o = r.wrap(v.out, true);
    const cl_int hd = cl_int(x.ne[0]), n_head = cl_int(x.ne[1]);
    const cl_int n_rot = v.n.iparams[1] > 0 ? v.n.iparams[1] : hd;
    if (n_rot < hd && x.data != v.out.data) {
        r.launch("copy_tail", {static_cast<size_t>(hd - n_rot), v.rows}, a, o, hd, n_rot);
    }
    r.launch(
        "rope",
        {static_cast<size_t>(n_rot / 2), static_cast<size_t>(n_head), static_cast<size_t>(x.ne[2])},
        a, o, pos, hd, n_head, n_rot, cl_int(v.n.iparams[0] == DWELL_ROPE_NEOX),
        cl_float(v.n.fparams[0]), cl_float(v.n.fparams[1] != 0 ? v.n.fparams[1] : 1.0f));
}

// The part of the KV cache the attention kernels are given. A page space
// is address space for every session: paged, only the pages this op's
// table names are wrapped, from the lowest.
struct CacheWindow {
    cl_int base_page;
    void* data;
    uint64_t bytes;
};

CacheWindow attention_cache_window(const NodeView& v, bool paged) {
    const dwell_tensor& cache = v.in(3);
    CacheWindow w{0, cache.data, tensor_bytes(cache)};
    if (!paged) return w;
    const auto* pos = static_cast<const int32_t*>(v.in(5).data);
    const int32_t max_pos = *std::max_element(pos, pos + v.in(5).ne[0]);
    const int64_t used = max_pos / cache.ne[1] + 1;
    const auto* table = static_cast<const int32_t*>(v.in(4).data);
    int32_t lo = table[0], hi = table[0];
    for (int64_t i = 0; i < 2 * used; ++i) {
        lo = std::min(lo, table[i]);
        hi = std::max(hi, table[i]);
    }
    w.base_page = lo;
    w.data = static_cast<unsigned char*>(cache.data) + uint64_t(lo) * cache.nb[2];
    w.bytes = uint64_t(hi - lo + 1) * cache.nb[2];
    return w;
}

void launch_attention(NodeRun& r, const NodeView& v) {
    const dwell_tensor& q = v.in(0);
    const dwell_tensor& cache = v.in(3);
    const bool paged = v.in(4).dtype == DWELL_I32;
    const CacheWindow window = attention_cache_window(v, paged);
    const cl_int base_page = window.base_page;
    const cl_mem qm = r.wrap(q, false), km = r.wrap(v.in(1), false), vm = r.wrap(v.in(2), false);
    const cl_mem kc = r.wrap_range(window.data, window.bytes, true);
    const cl_mem vc = paged ? kc : r.wrap(v.in(4), true);
    const cl_mem table = paged ? r.wrap(v.in(4), false) : kc;
    const cl_mem pos = r.wrap(v.in(5), false);
    const cl_mem o = r.wrap(v.out, true);
    const cl_int hd = cl_int(q.ne[0]), n_head = cl_int(q.ne[1]), n_kv = cl_int(v.in(1).ne[1]);
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
        r.launch("attention_store_fp8_keys", {static_cast<size_t>(n_kv)}, qm, km, kc, vc, table,
                 cl_int(paged), base_page, row_bytes, page_bytes, rpp, pos, hd, n_head, n_kv,
                 cl_int(T));
    }
    r.launch("attention_store", {cache.dtype == DWELL_Q8_0 ? width / 32 : width, T}, km, vm, kc, vc,
             table, cl_int(paged), base_page, row_bytes, page_bytes, rpp, pos, cl_int(width), dtype,
             cl_int(fp8 ? 1 : 0));
    r.launch("attention", {static_cast<size_t>(n_head), T}, qm, kc, vc, table, cl_int(paged),
             base_page, row_bytes, page_bytes, rpp, pos, o, hd, n_head, n_kv, dtype,
             cl_float(v.n.fparams[0]));
}

void launch_cpy(NodeRun& r, const NodeView& v) {
    const cl_mem a = r.wrap(v.in(0), false), o = r.wrap(v.out, true);
    const auto n0 = static_cast<size_t>(v.in(0).ne[0]);
    r.launch("cpy_f32", {v.out.dtype == DWELL_Q8_0 ? n0 / 32 : n0, v.rows}, a, o,
             cl_ulong{v.out.nb[1]}, cl_int(n0), cl_int{v.out.dtype});
}

void launch_gather(NodeRun& r, const NodeView& v) {
    const cl_mem a = r.wrap(v.in(0), false), ids = r.wrap(v.in(1), false);
    const cl_mem o = r.wrap(v.out, true);
    r.launch("gather", {static_cast<size_t>(v.out.ne[0]), v.rows}, a, ids, o, cl_int(v.in(0).ne[0]),
             cl_int(v.out.ne[0]));
}

void launch_topk(NodeRun& r, const NodeView& v) {
    const cl_mem a = r.wrap(v.in(0), false), o = r.wrap(v.out, true);
    r.launch("topk", {v.rows}, a, o, cl_int(v.in(0).ne[0]), cl_int(v.out.ne[0]));
}

void launch_expert_matmul(NodeRun& r, const NodeView& v) {
    const cl_mem w = r.wrap(v.in(0), false), x = r.wrap(v.in(1), false);
    const cl_mem ids = r.wrap(v.in(2), false), o = r.wrap(v.out, true);
    r.launch("expert_matmul",
             {static_cast<size_t>(v.out.ne[0]), static_cast<size_t>(v.out.ne[1]),
              static_cast<size_t>(v.out.ne[2])},
             w, cl_ulong{v.in(0).nb[1]}, cl_int{v.in(0).dtype}, x, ids, o, cl_int(v.in(0).ne[0]),
             cl_int(v.out.ne[0]), cl_int(v.out.ne[1]));
}

void launch_moe_combine(NodeRun& r, const NodeView& v) {
    const cl_mem y = r.wrap(v.in(0), false), w = r.wrap(v.in(1), false);
    const cl_mem o = r.wrap(v.out, true);
    r.launch("moe_combine", {static_cast<size_t>(v.out.ne[0]), static_cast<size_t>(v.out.ne[1])}, y,
             w, o, cl_int(v.out.ne[0]), cl_int(v.in(1).ne[0]));
}

// graph.h: out from the state then x, then the state advanced in place.
// The queue is in order, so the second kernel sees the state the first
// one read only after it is done with it.
void launch_short_conv(NodeRun& r, const NodeView& v) {
    const dwell_tensor& x = v.in(0);
    const cl_mem xm = r.wrap(x, false), w = r.wrap(v.in(1), false);
    const cl_mem state = r.wrap(v.in(2), true), o = r.wrap(v.out, true);
    const cl_int c = cl_int(x.ne[0]), k = cl_int(v.in(1).ne[0]), t = cl_int(x.ne[1]);
    r.launch("short_conv", {static_cast<size_t>(c), static_cast<size_t>(t)}, xm, w,
             cl_int(v.in(1).dtype == DWELL_F16), state, o, c, k);
    r.launch("short_conv_state", {static_cast<size_t>(c)}, xm, state, c, k, t);
}

void launch_slice(NodeRun& r, const NodeView& v) {
    const cl_mem a = r.wrap(v.in(0), false), o = r.wrap(v.out, true);
    const cl_int n = cl_int(v.out.ne[0]);
    r.launch("slice_cols", {static_cast<size_t>(n), v.rows}, a, o, cl_int(v.in(0).ne[0]),
             cl_int(v.n.iparams[0]), n);
}

// graph.h: the delta rule over the batch, the state (in5) advanced in place.
void launch_gated_delta_net(NodeRun& r, const NodeView& v) {
    const dwell_tensor& q = v.in(0);
    const dwell_tensor& val = v.in(2);
    const cl_mem qm = r.wrap(q, false), km = r.wrap(v.in(1), false);
    const cl_mem vm = r.wrap(val, false), gm = r.wrap(v.in(3), false);
    const cl_mem bm = r.wrap(v.in(4), false), state = r.wrap(v.in(5), true);
    const cl_mem o = r.wrap(v.out, true);
    r.launch("gated_delta_net", {static_cast<size_t>(val.ne[0]), static_cast<size_t>(val.ne[1])},
             qm, km, vm, gm, bm, state, o, cl_int(q.ne[0]), cl_int(q.ne[1]), cl_int(val.ne[0]),
             cl_int(val.ne[1]), cl_int(q.ne[2]), cl_int(v.n.iparams[0] == 1),
             cl_float(v.n.fparams[0]), cl_float(v.n.fparams[1]));
}

// Launches the kernels of node v.n.
void launch_kernels(dwell_backend_context& c, NodeRun& r, const NodeView& v,
                    const std::vector<bool>& written) {
    switch (v.n.op) {
        case DWELL_OP_GET_ROWS:
            return launch_get_rows(r, v);
        case DWELL_OP_MATMUL:
            return launch_matmul(c, r, v, written);
        case DWELL_OP_ADD:
        case DWELL_OP_MUL:
            return launch_binary(r, v);
        case DWELL_OP_SCALE:
        case DWELL_OP_SILU:
        case DWELL_OP_GELU:
        case DWELL_OP_SIGMOID:
        case DWELL_OP_SOFTPLUS:
            return launch_unary(r, v);
        case DWELL_OP_SLICE:
            return launch_slice(r, v);
        case DWELL_OP_GATED_DELTA_NET:
            return launch_gated_delta_net(r, v);
        case DWELL_OP_SWIGLU:
            return launch_swiglu(r, v);
        case DWELL_OP_RMS_NORM:
        case DWELL_OP_LAYER_NORM:
        case DWELL_OP_SOFTMAX:
            return launch_norm_or_softmax(r, v);
        case DWELL_OP_ROPE:
            return launch_rope(r, v);
        case DWELL_OP_ATTENTION:
            return launch_attention(r, v);
        case DWELL_OP_CPY:
            return launch_cpy(r, v);
        case DWELL_OP_GATHER:
            return launch_gather(r, v);
        case DWELL_OP_TOPK:
            return launch_topk(r, v);
        case DWELL_OP_EXPERT_MATMUL:
            return launch_expert_matmul(r, v);
        case DWELL_OP_MOE_COMBINE:
            return launch_moe_combine(r, v);
        case DWELL_OP_SHORT_CONV:
            return launch_short_conv(r, v);
        default:
            throw std::runtime_error(std::string("no kernel for ") + dwell_op_name(v.n.op));
    }
}

}  // namespace

void run_node(dwell_backend_context& c, const dwell_graph* g, int32_t id,
              const std::vector<bool>& written) {
    const dwell_node& n = *dwell_graph_node(g, id);
    const dwell_tensor& out = tensor(g, n.output);
    NodeRun r(c, g);
    const NodeView v{g, n, out, static_cast<size_t>(dwell_tensor_nelements(&out)),
                     static_cast<size_t>(dwell_tensor_nrows(&out))};
    launch_kernels(c, r, v, written);
    r.sync();
    r.account(n.op);
}

}  // namespace dwell::opencl
