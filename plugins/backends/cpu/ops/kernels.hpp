// The cpu backend's kernels: for every op of graph.h a shape/dtype check and
// a scalar reference implementation.
//
// A kernel's check_* sees a node whose tensor ids, input count and generic
// tensor layout op_dispatch already validated; it adds the op's own contract
// (graph.h) and returns a problem when the node is not runnable here. run_*
// assumes its check passed and that tensors have data. Failures that depend
// on tensor contents (ids out of range) are thrown as KernelError.
//
// Thread-safety: run_* may use the pool; kernels hold no state.
// Ownership: NodeArgs points into the caller's graph for one call only.
#pragma once

#include <array>
#include <optional>
#include <stdexcept>
#include <string>

#include "dwell/graph.h"
#include "dwell/status.h"
#include "host/thread_pool.hpp"

namespace dwell::cpu {

struct OpProblem {
    dwell_status status;
    std::string message;
};

// nullopt when the node is fine.
using OpVerdict = std::optional<OpProblem>;

inline OpVerdict unsupported(std::string message) {
    return OpProblem{DWELL_ERR_UNSUPPORTED, std::move(message)};
}
inline OpVerdict invalid(std::string message) {
    return OpProblem{DWELL_ERR_INVALID_ARGUMENT, std::move(message)};
}

// A data-dependent failure inside a kernel (e.g. a row id out of range).
class KernelError : public std::runtime_error {
public:
    KernelError(dwell_status status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    dwell_status status() const { return status_; }

private:
    dwell_status status_;
};

class PackedWeights;
class QuantizedActs;

// What a context's matmuls read of their weights (backend.h weight_reads).
struct WeightReadCounts {
    uint64_t bytes_read = 0;   // weight bytes the kernels read
    uint64_t bytes_dense = 0;  // what a dense kernel reads for the same products
    uint64_t inputs = 0;       // input values of sparse-fed matmuls
    uint64_t inputs_zero = 0;  // of which zero
    uint64_t matmuls = 0;
};

struct SparseActsCache;  // matmul_kernel.cpp's, see sparse_matvec.hpp

struct NodeArgs {
    const dwell_node* node = nullptr;
    // The context's repacked-weight cache; null means repack per call.
    PackedWeights* packed = nullptr;
    // int8 activations shared by matmuls of one graph_compute call; null
    // means quantize per call.
    QuantizedActs* acts = nullptr;
    // MATMUL: in1 is a SPARSIFY output, so the weight may take the column
    // layout (sparse_matvec.hpp); where the context counts weight reads.
    bool sparse_input = false;
    WeightReadCounts* reads = nullptr;
    // The digest of the last sparse-fed input (one per graph_compute call),
    // shared by the matmuls that read it (q, k and v; gate and up).
    SparseActsCache* sparse_acts = nullptr;
    std::array<const dwell_tensor*, DWELL_MAX_INPUTS> in{};
    const dwell_tensor* out = nullptr;

    const dwell_tensor& input(int i) const { return *in[static_cast<size_t>(i)]; }
    const dwell_tensor& output() const { return *out; }
};

OpVerdict check_get_rows(const NodeArgs& a);
void run_get_rows(const NodeArgs& a, ThreadPool& pool);

OpVerdict check_matmul(const NodeArgs& a);
void run_matmul(const NodeArgs& a, ThreadPool& pool);

// ADD, MUL (with broadcast of in1 over in0), SCALE, SILU, GELU, SWIGLU.
OpVerdict check_binary(const NodeArgs& a);
void run_add(const NodeArgs& a, ThreadPool& pool);
void run_mul(const NodeArgs& a, ThreadPool& pool);
OpVerdict check_unary(const NodeArgs& a);
void run_scale(const NodeArgs& a, ThreadPool& pool);
void run_silu(const NodeArgs& a, ThreadPool& pool);
void run_gelu(const NodeArgs& a, ThreadPool& pool);
OpVerdict check_softcap(const NodeArgs& a);  // ABI 1.5
void run_softcap(const NodeArgs& a, ThreadPool& pool);
void run_sigmoid(const NodeArgs& a, ThreadPool& pool);   // ABI 1.7
void run_softplus(const NodeArgs& a, ThreadPool& pool);  // ABI 1.7
OpVerdict check_sparsify(const NodeArgs& a);             // ABI 1.9
void run_sparsify(const NodeArgs& a, ThreadPool& pool);
OpVerdict check_slice(const NodeArgs& a);  // ABI 1.7
void run_slice(const NodeArgs& a, ThreadPool& pool);
OpVerdict check_swiglu(const NodeArgs& a);
void run_swiglu(const NodeArgs& a, ThreadPool& pool);

// RMS_NORM, LAYER_NORM.
OpVerdict check_norm(const NodeArgs& a);
void run_rms_norm(const NodeArgs& a, ThreadPool& pool);
void run_layer_norm(const NodeArgs& a, ThreadPool& pool);

OpVerdict check_rope(const NodeArgs& a);
void run_rope(const NodeArgs& a, ThreadPool& pool);

OpVerdict check_attention(const NodeArgs& a);
void run_attention(const NodeArgs& a, ThreadPool& pool);
// ATTENTION writes in3 and, unless in4 is the I32 page table of the paged
// form, in4 (graph.h). Reads the dtype as a raw integer, so it may be asked
// of a tensor no check has seen yet.
bool attention_writes_input4(const dwell_tensor& in4);

OpVerdict check_softmax(const NodeArgs& a);
void run_softmax(const NodeArgs& a, ThreadPool& pool);

// TOPK, GATHER: expert routing.
OpVerdict check_topk(const NodeArgs& a);
void run_topk(const NodeArgs& a, ThreadPool& pool);
OpVerdict check_gather(const NodeArgs& a);
void run_gather(const NodeArgs& a, ThreadPool& pool);

// EXPERT_MATMUL, MOE_COMBINE.
OpVerdict check_expert_matmul(const NodeArgs& a);
void run_expert_matmul(const NodeArgs& a, ThreadPool& pool);
OpVerdict check_moe_combine(const NodeArgs& a);
void run_moe_combine(const NodeArgs& a, ThreadPool& pool);

OpVerdict check_cpy(const NodeArgs& a);
void run_cpy(const NodeArgs& a, ThreadPool& pool);

// SHORT_CONV (ABI 1.6): writes its state, in2, besides the output.
OpVerdict check_short_conv(const NodeArgs& a);
void run_short_conv(const NodeArgs& a, ThreadPool& pool);

// GATED_DELTA_NET (ABI 1.7): writes its state input (in5) in place.
OpVerdict check_gated_delta_net(const NodeArgs& a);
void run_gated_delta_net(const NodeArgs& a, ThreadPool& pool);

}  // namespace dwell::cpu
