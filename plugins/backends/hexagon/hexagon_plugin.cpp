// The hexagon backend plugin, host side: speaks FastRPC to dwell's own
// DSP-side kernels (dsp/), with no proprietary graph compiler.
//
// Probe: libcdsprpc.so (or $DWELL_HEXAGON_FASTRPC_LIB, for test doubles) is
// loaded with dlopen; absent, the device is unavailable with the reason and
// the manifest falls through. A context opens a session on the compute DSP
// (remote_handle64_open of the skel's URI) and reads the DSP architecture.
// Each graph_compute sends its nodes as one batch (dsp_protocol.h): the
// activations are copied into an rpcmem buffer mapped to the DSP for the
// call; weights are copied into rpcmem once and stay mapped. A failing or
// late batch (an error status, or no answer within `timeout_ms`) returns a
// status with the DSP's message, and the scheduler runs the step elsewhere.
//
// Thread-safety: probe calls from any thread; a context is used by one
// thread at a time. Ownership: a context owns its session, its rpcmem
// buffers and their mappings, and frees them all on destruction.
#include <dwell/backend.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_plugin_kit.hpp"
#include "backend/vendor_library.hpp"
#include "dsp_protocol.h"
#include "fastrpc_api.hpp"

namespace dwell::hexagon {
namespace {

constexpr char kPluginName[] = "hexagon";
constexpr auto fail_plugin = plugin_kit::fail_plugin<kPluginName>;
using plugin_kit::f32_contiguous;
using plugin_kit::tensor;
using plugin_kit::tensor_bytes;
constexpr const char* kSkelUri =
    "file:///libdwell_dsp_skel.so?dwell_dsp_skel_handle_invoke&_modver=1.0&_dom=cdsp";

struct Probe {
    const FastRpcApi* rpc = nullptr;
    std::string why;
};

// The probe for the library in effect ($DWELL_HEXAGON_FASTRPC_LIB, else
// libcdsprpc.so): one per value seen, so a process (a test binary) may
// change it.
const Probe& probe() {
    return plugin_kit::probe_per_value<Probe>(
        "DWELL_HEXAGON_FASTRPC_LIB", [](const std::string& lib) {
            Probe r;
            r.rpc = load_fastrpc(lib.empty() ? "libcdsprpc.so" : lib, r.why);
            return r;
        });
}

// One rpcmem allocation, mapped to the DSP while it lives.
class SharedBuffer {
public:
    SharedBuffer(const FastRpcApi& rpc, size_t bytes) : rpc_(&rpc), bytes_(bytes) {
        data_ = rpc.rpcmem_alloc(kRpcmemHeapSystem, kRpcmemDefaultFlags, static_cast<int>(bytes));
        if (data_ == nullptr)
            throw std::runtime_error("rpcmem_alloc of " + std::to_string(bytes) + " bytes failed");
        fd_ = rpc.rpcmem_to_fd(data_);
        if (fd_ < 0 || rpc.fastrpc_mmap(kCdspDomain, fd_, data_, 0, bytes, kFastrpcMapFd) != 0) {
            rpc.rpcmem_free(data_);
            throw std::runtime_error("mapping an rpcmem buffer to the DSP failed");
        }
    }
    ~SharedBuffer() {
        rpc_->fastrpc_munmap(kCdspDomain, fd_, data_, bytes_);
        rpc_->rpcmem_free(data_);
    }
    SharedBuffer(const SharedBuffer&) = delete;
    SharedBuffer& operator=(const SharedBuffer&) = delete;

    uint8_t* data() const { return static_cast<uint8_t*>(data_); }
    int fd() const { return fd_; }

private:
    const FastRpcApi* rpc_;
    void* data_ = nullptr;
    size_t bytes_;
    int fd_ = -1;
};

}  // namespace
}  // namespace dwell::hexagon

struct dwell_backend_context {
    const dwell::hexagon::FastRpcApi* rpc = nullptr;
    dwell::hexagon::remote_handle64 session = 0;
    bool open = false;
    uint32_t arch = 0;
    int timeout_ms = 2000;
    std::string last_error;
    // Weights copied to the DSP once, by address and size.
    std::map<std::pair<const void*, uint64_t>, std::unique_ptr<dwell::hexagon::SharedBuffer>>
        weights;
    // A batch the DSP has not answered in time: its buffers stay alive
    // until it does, and no new batch is sent meanwhile.
    std::future<int> late;
    std::unique_ptr<dwell::hexagon::SharedBuffer> late_arena;
    std::unique_ptr<dwell_dsp_batch> late_batch;
    std::unique_ptr<dwell_dsp_result> late_result;

    ~dwell_backend_context() {
        if (late.valid()) late.wait();
        late_arena.reset();
        late_batch.reset();
        late_result.reset();
        weights.clear();
        if (open) rpc->remote_handle64_close(session);
    }
};

namespace dwell::hexagon {
namespace {

// Why the DSP cannot take node `id`, or "" when it can.
std::string check(const dwell_graph* g, int32_t id) {
    const dwell_node* n = dwell_graph_node(g, id);
    if (n == nullptr) return "no such node";
    const dwell_tensor* out = dwell_graph_tensor(g, n->output);
    if (out == nullptr || !f32_contiguous(*out)) return "the output must be contiguous F32";
    const auto in = [&](int i) -> const dwell_tensor& { return tensor(g, n->inputs[i]); };
    switch (n->op) {
        case DWELL_OP_MATMUL: {
            const dwell_tensor& w = in(0);
            const bool q = w.dtype == DWELL_Q4_0 || w.dtype == DWELL_Q8_0;
            if ((!q && w.dtype != DWELL_F32) || !dwell_tensor_is_contiguous(&w))
                return std::string("weights ") + dwell_dtype_name(w.dtype) +
                       " (dsp: f32, q8_0, q4_0)";
            if (q && (w.ne[0] % 32 != 0 || w.ne[0] > 16384))
                return "K must be a multiple of 32, at most 16384";
            return f32_contiguous(in(1)) ? "" : "x must be contiguous F32";
        }
        case DWELL_OP_RMS_NORM:
            return f32_contiguous(in(0)) ? "" : "x must be contiguous F32";
        case DWELL_OP_SWIGLU:
            return f32_contiguous(in(0)) && f32_contiguous(in(1)) ? "" : "operands must be F32";
        case DWELL_OP_ADD:
        case DWELL_OP_MUL: {
            if (!f32_contiguous(in(0)) || !f32_contiguous(in(1))) return "operands must be F32";
            const int64_t a = dwell_tensor_nelements(&in(0)), b = dwell_tensor_nelements(&in(1));
            return b == a || b == in(0).ne[0] ? "" : "in1 must match in0 or be one row";
        }
        case DWELL_OP_ROPE:
            // ABI 1.5's frequency and attention factors have no kernel here.
            if (n->n_inputs > 2 || (n->fparams[2] != 0.0f && n->fparams[2] != 1.0f))
                return "rope frequency or attention factors";
            return f32_contiguous(in(0)) && in(1).dtype == DWELL_I32 ? "" : "rope operands";
        default:
            return std::string(dwell_op_name(n->op)) + " has no DSP kernel";
    }
}

// A batch that timed out is collected once the DSP has answered it; until
// then no new batch is sent, as the DSP may still touch its buffers.
dwell_status collect_late_batch(dwell_backend_context& c) {
    if (!c.late.valid()) return DWELL_OK;
    if (c.late.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
        c.last_error = "the DSP is still running a batch that timed out";
        return DWELL_ERR_TIMEOUT;
    }
    c.late.get();
    c.late_arena.reset();
    return DWELL_OK;
}

// Every tensor the nodes read or write, in node order: tensor id, is output.
std::vector<std::pair<int32_t, bool>> touched_tensors(const dwell_graph* g, const int32_t* ids,
                                                      size_t n_ids) {
    std::vector<std::pair<int32_t, bool>> touched;
    for (size_t i = 0; i < n_ids; ++i) {
        const dwell_node& n = *dwell_graph_node(g, ids[i]);
        for (int k = 0; k < n.n_inputs; ++k) touched.push_back({n.inputs[k], false});
        touched.push_back({n.output, true});
    }
    return touched;
}

// A matmul's weight that no node writes and whose buffer keeps it:
// copied to the DSP once. Everything else goes through the arena.
std::vector<bool> dsp_held_weights(const dwell_graph* g, const int32_t* ids, size_t n_ids,
                                   const std::vector<bool>& written) {
    std::vector<bool> is_weight(written.size(), false);
    for (size_t i = 0; i < n_ids; ++i) {
        const dwell_node& n = *dwell_graph_node(g, ids[i]);
        const int32_t w = n.inputs[0];
        if (n.op == DWELL_OP_MATMUL && !written[static_cast<size_t>(w)] &&
            (dwell_graph_tensor_flags(g, w) & DWELL_TENSOR_VOLATILE) == 0)
            is_weight[static_cast<size_t>(w)] = true;
    }
    return is_weight;
}

// Copies each weight the DSP does not hold yet into a buffer of its own,
// kept (by address and size) for the batches after this one.
void copy_new_weights(dwell_backend_context& c, const dwell_graph* g,
                      const std::vector<std::pair<int32_t, bool>>& touched,
                      const std::vector<bool>& is_weight) {
    for (const auto& [id, out] : touched) {
        if (!is_weight[static_cast<size_t>(id)]) continue;
        const dwell_tensor& t = tensor(g, id);
        const auto key = std::make_pair(static_cast<const void*>(t.data), tensor_bytes(t));
        if (!c.weights.count(key)) {
            auto buf = std::make_unique<SharedBuffer>(*c.rpc, tensor_bytes(t));
            std::memcpy(buf->data(), t.data, tensor_bytes(t));
            c.weights.emplace(key, std::move(buf));
        }
    }
}

// The host byte ranges of the activations (every touched tensor that is
// not a weight the DSP holds).
std::vector<std::pair<uint8_t*, uint8_t*>> activation_ranges(
    const dwell_graph* g, const std::vector<std::pair<int32_t, bool>>& touched,
    const std::vector<bool>& is_weight) {
    std::vector<std::pair<uint8_t*, uint8_t*>> ranges;
    for (const auto& [id, out] : touched) {
        if (is_weight[static_cast<size_t>(id)]) continue;
        const dwell_tensor& t = tensor(g, id);
        auto* begin = static_cast<uint8_t*>(t.data);
        ranges.push_back({begin, begin + tensor_bytes(t)});
    }
    return ranges;
}

// Where the activations go in the shared arena: their host ranges merged
// where they overlap (views, reused arena memory), so the DSP sees the
// same aliasing as the host; each region starts 64-byte aligned.
struct ArenaLayout {
    struct Region {
        uint8_t* begin;
        uint8_t* end;
        uint64_t offset;  // in the arena
    };
    std::vector<Region> regions;  // by host address
    uint64_t bytes = 0;

    const Region& region_of(const void* p) const {
        auto it = std::upper_bound(regions.begin(), regions.end(), static_cast<const uint8_t*>(p),
                                   [](const uint8_t* x, const Region& r) { return x < r.begin; });
        return *std::prev(it);
    }
    // The arena offset of host address `p`, which lies in a region.
    uint64_t offset_of(const void* p) const {
        const Region& r = region_of(p);
        return r.offset + static_cast<uint64_t>(static_cast<const uint8_t*>(p) - r.begin);
    }
};

ArenaLayout lay_out_arena(std::vector<std::pair<uint8_t*, uint8_t*>> ranges) {
    std::sort(ranges.begin(), ranges.end());
    ArenaLayout a;
    auto& regions = a.regions;
    for (const auto& [b, e] : ranges) {
        if (!regions.empty() && b <= regions.back().end) {
            regions.back().end = std::max(regions.back().end, e);
            continue;
        }
        if (!regions.empty()) {
            a.bytes =
                regions.back().offset +
                (static_cast<uint64_t>(regions.back().end - regions.back().begin) + 63) / 64 * 64;
        }
        regions.push_back({b, e, a.bytes});
    }
    if (!regions.empty()) {
        a.bytes = regions.back().offset +
                  static_cast<uint64_t>(regions.back().end - regions.back().begin);
    }
    return a;
}

// Where the DSP finds a tensor of the batch: a weight in its own buffer,
// an activation at its place in the arena.
struct DspRefs {
    const dwell_backend_context& c;
    const dwell_graph* g;
    const std::vector<bool>& is_weight;
    const ArenaLayout& layout;
    const SharedBuffer& arena;

    dwell_dsp_ref operator()(int32_t id) const {
        const dwell_tensor& t = tensor(g, id);
        if (is_weight[static_cast<size_t>(id)]) {
            const auto& w = c.weights.at({t.data, tensor_bytes(t)});
            return dwell_dsp_ref{w->fd(), 0};
        }
        return dwell_dsp_ref{arena.fd(), static_cast<uint32_t>(layout.offset_of(t.data))};
    }
};

// Node `n` as the DSP op `op`; false when the DSP has no kernel for it.
bool encode_op(const dwell_graph* g, const dwell_node& n, const DspRefs& ref, dwell_dsp_op& op) {
    const dwell_tensor& out = tensor(g, n.output);
    op = dwell_dsp_op{};
    op.out = ref(n.output);
    switch (n.op) {
        case DWELL_OP_MATMUL: {
            const dwell_tensor& w = tensor(g, n.inputs[0]);
            op.kind = DWELL_DSP_MATMUL;
            op.wtype = w.dtype == DWELL_F32 ? 0 : w.dtype;
            op.k = static_cast<int32_t>(w.ne[0]);
            op.n = static_cast<int32_t>(w.ne[1]);
            op.m = static_cast<int32_t>(dwell_tensor_nrows(&tensor(g, n.inputs[1])));
            op.w_row_bytes = w.nb[1];
            op.w = ref(n.inputs[0]);
            op.a = ref(n.inputs[1]);
            return true;
        }
        case DWELL_OP_RMS_NORM:
            op.kind = DWELL_DSP_RMS_NORM;
            op.k = static_cast<int32_t>(out.ne[0]);
            op.n = static_cast<int32_t>(dwell_tensor_nrows(&out));
            op.f0 = n.fparams[0];
            op.a = ref(n.inputs[0]);
            return true;
        case DWELL_OP_SWIGLU:
        case DWELL_OP_ADD:
        case DWELL_OP_MUL:
            op.kind = n.op == DWELL_OP_SWIGLU ? DWELL_DSP_SWIGLU
                      : n.op == DWELL_OP_ADD  ? DWELL_DSP_ADD
                                              : DWELL_DSP_MUL;
            op.k = static_cast<int32_t>(dwell_tensor_nelements(&out));
            op.b_len = static_cast<int32_t>(dwell_tensor_nelements(&tensor(g, n.inputs[1])));
            op.a = ref(n.inputs[0]);
            op.b = ref(n.inputs[1]);
            return true;
        case DWELL_OP_ROPE: {
            const dwell_tensor& x = tensor(g, n.inputs[0]);
            const int32_t n_rot = n.iparams[1] > 0 ? n.iparams[1] : static_cast<int32_t>(x.ne[0]);
            op.kind = DWELL_DSP_ROPE;
            op.k = static_cast<int32_t>(x.ne[0]);
            op.n = static_cast<int32_t>(x.ne[1]);
            op.m = static_cast<int32_t>(x.ne[2]);
            op.b_len = n_rot;
            op.i0 = n.iparams[0] == DWELL_ROPE_NEOX;
            // The DSP has no pow: theta advances by base^(-2 / n_rot) per pair.
            op.f0 = static_cast<float>(std::pow(static_cast<double>(n.fparams[0]), -2.0 / n_rot));
            op.f1 = n.fparams[1] != 0 ? n.fparams[1] : 1.0f;
            op.a = ref(n.inputs[0]);
            op.b = ref(n.inputs[1]);
            return true;
        }
        default:
            return false;
    }
}

// The nodes, in order, as the batch's ops.
dwell_status encode_ops(dwell_backend_context& c, const dwell_graph* g, const int32_t* ids,
                        size_t n_ids, const DspRefs& ref, dwell_dsp_batch& batch) {
    for (size_t i = 0; i < n_ids; ++i) {
        const dwell_node& n = *dwell_graph_node(g, ids[i]);
        if (!encode_op(g, n, ref, batch.ops[batch.n_ops++])) {
            c.last_error = std::string("no DSP kernel for ") + dwell_op_name(n.op);
            return DWELL_ERR_UNSUPPORTED;
        }
    }
    return DWELL_OK;
}

// Runs the batch on the DSP, waiting at most timeout_ms. A late batch keeps
// the arena, the batch and the result alive in the context (moved there)
// until the DSP answers.
dwell_status send_batch(dwell_backend_context& c, std::unique_ptr<SharedBuffer>& arena,
                        std::unique_ptr<dwell_dsp_batch>& batch,
                        std::unique_ptr<dwell_dsp_result>& result) {
    const FastRpcApi& rpc = *c.rpc;
    // dwell_dsp.idl's run(in sequence<uint8>, rout sequence<uint8>), laid out
    // as its generated stub would: the lengths first, then the buffers.
    auto lengths = std::make_shared<dwell_dsp_run_lengths>(
        dwell_dsp_run_lengths{sizeof(dwell_dsp_batch), sizeof(dwell_dsp_result)});
    std::array<remote_arg, 3> args{};
    args[0].buf = {lengths.get(), sizeof(dwell_dsp_run_lengths)};
    args[1].buf = {batch.get(), sizeof(dwell_dsp_batch)};
    args[2].buf = {result.get(), sizeof(dwell_dsp_result)};
    const remote_handle64 session = c.session;
    auto invoke = std::async(std::launch::async, [&rpc, session, args, lengths]() mutable {
        return rpc.remote_handle64_invoke(session, remote_scalars(DWELL_DSP_METHOD_RUN, 2, 1),
                                          args.data());
    });
    if (invoke.wait_for(std::chrono::milliseconds(c.timeout_ms)) != std::future_status::ready) {
        // Keep everything the DSP may still touch until it answers.
        c.late = std::move(invoke);
        c.late_arena = std::move(arena);
        c.late_batch = std::move(batch);
        c.late_result = std::move(result);
        c.last_error = "the DSP did not answer within " + std::to_string(c.timeout_ms) + " ms";
        return DWELL_ERR_TIMEOUT;
    }
    const int rc = invoke.get();
    if (rc != 0) {
        c.last_error = "remote_handle64_invoke failed with " + std::to_string(rc);
        return DWELL_ERR_UNAVAILABLE;
    }
    return DWELL_OK;
}

// The DSP's own verdict on the batch it ran, with its message on failure.
dwell_status dsp_result_status(dwell_backend_context& c, dwell_dsp_result& result) {
    if (result.status == 0) return DWELL_OK;
    result.message[sizeof result.message - 1] = 0;
    c.last_error = "the DSP failed op " + std::to_string(result.failed_op) + ": " + result.message;
    return DWELL_ERR_INTERNAL;
}

// Each output's bytes back to the host (in node order: a later write to
// shared memory wins, as it would have on the host).
void copy_outputs_to_host(const dwell_graph* g, const int32_t* ids, size_t n_ids,
                          const ArenaLayout& layout, const SharedBuffer& arena) {
    for (size_t i = 0; i < n_ids; ++i) {
        const dwell_tensor& out = tensor(g, dwell_graph_node(g, ids[i])->output);
        std::memcpy(out.data, arena.data() + layout.offset_of(out.data), tensor_bytes(out));
    }
}

dwell_status run_batch(dwell_backend_context& c, const dwell_graph* g, const int32_t* ids,
                       size_t n_ids) {
    if (const dwell_status st = collect_late_batch(c); st != DWELL_OK) return st;
    const std::vector<bool> written = plugin_kit::written_tensors(g);
    // Activations: the host byte ranges the nodes read or write, each
    // copied into one shared arena; weights: their own buffers, copied once.
    const std::vector<std::pair<int32_t, bool>> touched = touched_tensors(g, ids, n_ids);
    auto batch = std::make_unique<dwell_dsp_batch>();
    auto result = std::make_unique<dwell_dsp_result>();
    batch->version = DWELL_DSP_PROTOCOL_VERSION;
    const std::vector<bool> is_weight = dsp_held_weights(g, ids, n_ids, written);
    copy_new_weights(c, g, touched, is_weight);
    const ArenaLayout layout = lay_out_arena(activation_ranges(g, touched, is_weight));
    auto arena = std::make_unique<SharedBuffer>(*c.rpc, std::max<uint64_t>(layout.bytes, 64));
    for (const ArenaLayout::Region& r : layout.regions)
        std::memcpy(arena->data() + r.offset, r.begin, static_cast<size_t>(r.end - r.begin));

    const DspRefs ref{c, g, is_weight, layout, *arena};
    if (const dwell_status st = encode_ops(c, g, ids, n_ids, ref, *batch); st != DWELL_OK)
        return st;
    if (const dwell_status st = send_batch(c, arena, batch, result); st != DWELL_OK) return st;
    if (const dwell_status st = dsp_result_status(c, *result); st != DWELL_OK) return st;
    copy_outputs_to_host(g, ids, n_ids, layout, *arena);
    return DWELL_OK;
}

// ---------------------------------------------------------------------------
// The vtable

dwell_status device_info(void*, uint32_t index, dwell_device_info* info) {
    if (info == nullptr || index != 0)
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "no such device");
    const Probe& p = probe();
    plugin_kit::DeviceFacts f;
    f.name = "cdsp0";
    f.description = "Hexagon compute DSP over FastRPC";
    f.kind = DWELL_DEVICE_DSP;
    f.hardware_id = "hexagon:cdsp";
    f.buffer_kind = DWELL_BUFFER_DMABUF;
    f.unavailable_reason = p.rpc != nullptr ? nullptr : p.why.c_str();
    return plugin_kit::describe_device(info, f);
}

dwell_status context_create(void*, uint32_t device, const dwell_option* options, size_t n_options,
                            const dwell_host_services*, dwell_backend_context** out) {
    if (out == nullptr || device != 0)
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "no such device");
    const Probe& p = probe();
    if (p.rpc == nullptr) return fail_plugin(DWELL_ERR_UNAVAILABLE, p.why);
    auto c = std::make_unique<dwell_backend_context>();
    c->rpc = p.rpc;
    for (size_t i = 0; i < n_options; ++i) {
        const auto [key, value] = plugin_kit::option_text(options[i]);
        if (key == "timeout_ms") {
            c->timeout_ms = std::atoi(value.c_str());
            if (c->timeout_ms <= 0)
                return fail_plugin(
                    DWELL_ERR_INVALID_ARGUMENT,
                    "option 'timeout_ms' must be a positive integer, got '" + value + "'");
        } else if (!plugin_kit::is_host_option(key)) {
            return fail_plugin(DWELL_ERR_INVALID_ARGUMENT,
                               "unknown hexagon backend option '" + key + "' (known: timeout_ms)");
        }
    }
    remote_dsp_capability cap{static_cast<uint32_t>(kCdspDomain), kAttributeArchVer, 0};
    if (p.rpc->remote_handle_control(kDspRpcGetDspInfo, &cap, sizeof cap) == 0)
        c->arch = cap.capability;
    if (p.rpc->remote_handle64_open(kSkelUri, &c->session) != 0) {
        return fail_plugin(
            DWELL_ERR_UNAVAILABLE,
            "opening a session on the compute DSP failed (is libdwell_dsp_skel.so installed?)");
    }
    c->open = true;
    *out = c.release();
    return DWELL_OK;
}

int32_t supports_op(dwell_backend_context* c, const dwell_graph* g, int32_t node) {
    return plugin_kit::supports_via(c, g, node, check);
}

dwell_status graph_compute(dwell_backend_context* c, const dwell_graph* g, const int32_t* ids,
                           size_t n_ids) {
    if (c == nullptr || g == nullptr || (n_ids > 0 && ids == nullptr))
        return fail_plugin(DWELL_ERR_INVALID_ARGUMENT, "graph_compute: null argument");
    try {
        for (size_t start = 0; start < n_ids; start += DWELL_DSP_MAX_OPS) {
            // A batch at a time: the batches before one with an unsupported
            // node have run.
            const size_t n = std::min<size_t>(DWELL_DSP_MAX_OPS, n_ids - start);
            if (plugin_kit::refuse_unsupported(*c, ids + start, n,
                                               [&](int32_t id) { return check(g, id); }))
                return DWELL_ERR_UNSUPPORTED;
            const dwell_status st = run_batch(*c, g, ids + start, n);
            if (st != DWELL_OK) return st;
        }
        return DWELL_OK;
    } catch (const std::exception& e) {
        c->last_error = e.what();
        return DWELL_ERR_OUT_OF_MEMORY;
    }
}

dwell_backend_plugin make_vtable() {
    return plugin_kit::make_vtable<dwell_backend_context>(
        {plugin_kit::one_device<kPluginName>, device_info, plugin_kit::plugin_last_error,
         context_create, supports_op, graph_compute, nullptr});
}

}  // namespace
}  // namespace dwell::hexagon

extern "C" DWELL_PLUGIN_EXPORT dwell_status dwell_plugin_query(const dwell_host_services* host,
                                                               dwell_plugin_info* info) {
    static const dwell_backend_plugin vtable = dwell::hexagon::make_vtable();
    return dwell::plugin_kit::describe_backend(
        host, info, dwell::hexagon::kPluginName, "0.1.0", "Hexagon DSP backend over FastRPC",
        &vtable, "hexagon plugin: the host's ABI major version differs");
}
