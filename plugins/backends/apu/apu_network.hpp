// One compiled NeuronAdapter network for one split of the graph: its
// matmuls lowered to FULLY_CONNECTED operations over a fixed number of rows
// (1 for decode, the prefill chunk otherwise), compiled once, and bound to
// one fd-backed arena that holds every input and output.
//
// Lowering of a matmul out[m][n] = sum_k W[n][k] * x[m][k]:
//   x    TENSOR_FLOAT32 [rows, K]      a model input, or an earlier output
//   W    TENSOR_FLOAT32 [N, K]         constant (F32 weights, mode auto), or
//        TENSOR_FLOAT16 [N, K]  --CAST-->        TENSOR_FLOAT32 [N, K], or
//        QUANT8_SYMM_PER_CHANNEL (channel 0) --DEQUANTIZE--> TENSOR_FLOAT32
//   bias TENSOR_FLOAT32 [N] zeros, fused activation INT32 NONE
//   out  TENSOR_FLOAT32 [rows, N]      a model output
// Activations stay f32, so only the weights' storage changes precision.
//
// Thread-safety: used by one thread at a time (its context's).
// Ownership: the network owns its model, compilation, execution, arena and
// NeuronMemory, and shares the converted weights it baked in; members are
// declared so that destruction frees the execution first and the weights
// last (the library may read weight buffers until the compilation dies).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apu_weights.hpp"
#include "neuron_adapter_api.hpp"
#include "neuron_objects.hpp"

namespace dwell::apu {

// What to build: the matmuls in order, each reading an external input or
// the output of an earlier matmul of the same network.
struct NetworkPlan {
    struct Matmul {
        std::shared_ptr<const ConvertedWeight> weight;
        int32_t input = 0;     // index into input_k when from_op < 0
        int32_t from_op = -1;  // else: the earlier matmul whose output is x
    };
    uint32_t rows = 1;
    std::vector<uint32_t> input_k;  // row length of each external input
    std::vector<Matmul> ops;
};

struct CompileSettings {
    int32_t preference = NEURON_PREFER_FAST_SINGLE_ANSWER;
    int32_t priority = NEURON_PRIORITY_MEDIUM;
    std::string cache_dir;  // empty: no caching
    std::array<uint8_t, kCacheTokenBytes> token{};
};

class ApuNetwork {
public:
    // Lowers, compiles and binds; throws ApuError naming the Neuron call
    // that failed.
    ApuNetwork(const NeuronAdapterApi& api, const NetworkPlan& plan,
               const CompileSettings& settings);
    ApuNetwork(const ApuNetwork&) = delete;
    ApuNetwork& operator=(const ApuNetwork&) = delete;

    // Rows of the arena: input i is [rows, input_k[i]], output j [rows, N_j].
    float* input(size_t i) const;
    float* output(size_t j) const;

    // NeuronExecution_compute; throws ApuError on failure.
    void run();

    // True when one of the network's weights came from [data, data + bytes).
    bool uses_host_range(const uint8_t* begin, const uint8_t* end) const;
    void note_source(const void* weight_data) { sources_.push_back(weight_data); }

private:
    const NeuronAdapterApi* api_;
    std::vector<std::shared_ptr<const ConvertedWeight>> weights_;
    std::vector<std::vector<float>> biases_;  // referenced by the model until compiled
    std::vector<const void*> sources_;        // host addresses of the weights
    ModelHandle model_;
    CompilationHandle compilation_;
    std::unique_ptr<FdBuffer> arena_;
    MemoryHandle memory_;
    ExecutionHandle execution_;
    std::vector<size_t> input_offsets_, output_offsets_;
};

}  // namespace dwell::apu
