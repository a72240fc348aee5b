// One split of the graph lowered to one NNRt model at a fixed number of
// rows m (1 for decode, the prefill chunk otherwise), compiled for one
// device, with its executor and its input/output tensors made once and
// reused for every run.
//
// Lowering: every MATMUL of the split becomes a FULL_CONNECTION (input
// [m, K], constant weight [N, K] converted at load, a zero bias [N], the
// activation-type parameter OH_NN_FUSED_NONE) producing [m, N]. A matmul
// whose input is an earlier node's output reads that tensor inside the
// model; every node's output is a model output, because nodes on other
// backends may read any of them. Activations are float32 when every
// weight is, float16 otherwise (the host converts at the boundary).
//
// Thread-safety: one thread at a time (NNRt objects are not thread-safe).
// Ownership: a Network owns its compilation, executor and tensors and
// destroys them in reverse order; it keeps the converted weights it was
// built from alive, so the model's data stays valid however the library
// treats it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nnrt_objects.hpp"
#include "nnrt_weights.hpp"

namespace dwell::nnrt {

// What to lower: the matmuls of a split, in order.
struct NetworkSpec {
    struct Node {
        std::shared_ptr<const ConvertedWeight> weight;  // [N, K]
        // >= 0: model input `source`; < 0: the output of node -source - 1.
        int32_t source = 0;
    };
    std::vector<Node> nodes;
    std::vector<int32_t> input_k;  // row length of each model input
    int32_t m = 1;                 // rows every run computes
    OH_NN_DataType activations = OH_NN_FLOAT32;

    // Identifies the model's content (weights by their fingerprints), so a
    // compiled copy in the on-disk cache is only ever reused for it.
    uint64_t fingerprint() const;
};

// How to compile.
struct CompileOptions {
    size_t device_id = 0;
    OH_NN_PerformanceMode performance = OH_NN_PERFORMANCE_HIGH;
    OH_NN_Priority priority = OH_NN_PRIORITY_MEDIUM;
    bool float16 = false;   // OH_NNCompilation_EnableFloat16
    std::string cache_dir;  // "" : no cache; else a folder per model below it
    uint32_t cache_version = 1;
};

class Network {
public:
    // Builds, compiles and prepares; throws NnrtError naming the failing call.
    Network(const NnrtApi& api, NetworkSpec spec, const CompileOptions& options);
    Network(const Network&) = delete;
    Network& operator=(const Network&) = delete;
    ~Network();

    const NetworkSpec& spec() const { return spec_; }

    // One run over `rows` <= m rows: inputs[i] holds rows x input_k[i]
    // floats, outputs[j] receives rows x N_j floats. Rows past `rows` are
    // zero padding. Throws NnrtError.
    void run(const std::vector<const float*>& inputs, int32_t rows,
             const std::vector<float*>& outputs);

private:
    const NnrtApi& api_;
    NetworkSpec spec_;
    size_t device_id_;
    // Declared in creation order: destroyed tensors first, compilation last.
    Handle<OH_NNCompilation> compilation_;
    Handle<OH_NNExecutor> executor_;
    std::vector<Handle<NN_Tensor>> inputs_;
    std::vector<Handle<NN_Tensor>> outputs_;
};

}  // namespace dwell::nnrt
