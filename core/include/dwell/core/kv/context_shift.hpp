// Making room in a full context: keep the first n_keep positions, drop the
// n_discard after them, move the rest down, and turn the moved keys' RoPE
// rotation back by n_discard positions so they read as if computed where
// they now are (values carry no rotation and just move).
//
// The rotation's parameters come from the model's own graph: the ROPE node
// whose output an ATTENTION node stores as keys.
//
// Thread-safety: none; the caller owns the cache.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "dwell/core/graph/graph.hpp"
#include "dwell/core/kv/kv_cache.hpp"

namespace dwell {

struct KeyRope {
    int32_t mode = 0;  // DWELL_ROPE_NORM or DWELL_ROPE_NEOX
    int32_t n_rot = 0;
    int64_t head_dim = 0;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    // ROPE's frequency factors f_i (one per rotated pair, each angle
    // divided by it: Llama 3's rope_freqs, LongRoPE, YaRN); empty: none.
    std::vector<float> freq_factors{};
    // The node has factors whose values the graph does not hold when it is
    // built (computed by an op, or a weight not resident): shift_context
    // refuses such keys rather than turn them by the wrong angles.
    bool factors_unknown = false;
};

// The RoPE applied to the keys of the first ATTENTION node of `graph`;
// nullopt when its keys are not rotated by a ROPE node.
std::optional<KeyRope> find_key_rope(const Graph& graph);

// Shifts positions [n_keep + n_discard, n_past) of every layer down by
// n_discard (rotating keys by -n_discard when rope is given) and drops the
// pages past the new end. Quantized rows are rotated through f32 and
// stored again.
void shift_context(KvCache& kv, const std::optional<KeyRope>& rope, int64_t n_keep,
                   int64_t n_discard, int64_t n_past);

// The RoPE of each layer's keys (index: layer; nullopt where a layer's keys
// are not rotated by a ROPE node), for models whose layers rotate with
// different bases (Gemma 2/3's local and global layers).
std::vector<std::optional<KeyRope>> find_layer_key_ropes(const Graph& graph, int32_t n_layer);

// shift_context with each layer's keys turned by that layer's RoPE.
void shift_context(KvCache& kv, const std::vector<std::optional<KeyRope>>& ropes, int64_t n_keep,
                   int64_t n_discard, int64_t n_past);

}  // namespace dwell
