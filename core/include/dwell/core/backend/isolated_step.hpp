// One split of a step prepared so that its backend can be abandoned in the
// middle of the call. The backend gets a private graph (tensor descriptors,
// nodes and names copied) in which every tensor the split reads or writes,
// except weights, lives in a buffer this object owns, fenced on both sides
// by guard bytes. When the call returns in time, verify() checks that the
// backend kept every descriptor as given and wrote inside its buffers, and
// copy_back() moves the results into the real graph. When it does not, the
// object stays alive with the call (the step worker holds it) and whatever
// the backend writes late lands here, never in the session's memory.
//
// Weights are shared, not copied: they stay mapped while their Model lives,
// and unloading a Model waits for every backend call to return.
//
// KV caches: ATTENTION writes its new rows into the cache. A contiguous
// cache is copied whole. A paged cache's page space (one tensor over every
// page of the runtime) is copied only for the pages its page table names,
// renumbered into a compact private space, and only the rows the op writes
// (one per token, K and V) are copied back.
//
// Thread-safety: made, verified and copied back by one thread; between
// those, the backend's thread uses graph().
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dwell/core/graph/graph.hpp"

namespace dwell {

class IsolatedStep {
public:
    // Copies what nodes `ids` of `cg` touch; `graph` gives each tensor's
    // role and storage (cg's data pointers are the current ones).
    IsolatedStep(const Graph& graph, const dwell_graph& cg, std::span<const int32_t> ids);
    IsolatedStep(const IsolatedStep&) = delete;
    IsolatedStep& operator=(const IsolatedStep&) = delete;

    const dwell_graph& graph() const { return graph_; }
    std::span<const int32_t> ids() const { return ids_; }

    // "" when every descriptor is as given and every guard intact; else one
    // line naming the tensor, its node, and what the backend did.
    std::string verify() const;
    // Copies the split's results into the tensors of `cg` (the graph this
    // object was made from).
    void copy_back(const dwell_graph& cg) const;

    // Bytes of guard on each side of every private buffer.
    static constexpr size_t kGuardBytes = 4096;

private:
    struct Buffer {
        int32_t root = -1;           // the tensor owning the memory
        size_t bytes = 0;            // the data, without guards
        std::vector<std::byte> raw;  // guard, data (aligned), guard
        std::byte* data = nullptr;
        bool written = false;  // copied back on success
    };
    // A paged cache: its page space and the pages copied, by compact index.
    struct PagedSpace {
        int32_t space = -1;          // tensor index of the page space
        std::vector<int32_t> pages;  // compact index -> real page
    };
    // An ATTENTION node writing into a paged cache.
    struct PagedWrite {
        int32_t node = -1;
        int32_t space = -1;      // tensor index of the page space (input 3)
        int32_t table = -1;      // of the page table (input 4)
        int32_t positions = -1;  // of the positions (input 5)
    };

    Buffer& add_buffer(int32_t root, size_t bytes, const void* from);
    void isolate_paged(const dwell_graph& cg, const PagedWrite& w);
    std::string describe_tensor(int32_t t) const;

    std::vector<int32_t> ids_;
    std::vector<dwell_node> nodes_;
    std::vector<dwell_tensor> tensors_;
    std::vector<dwell_tensor> given_;  // tensors_ as handed over, for verify()
    std::vector<int32_t> writer_;      // per tensor: the node of ids_ writing it, or -1
    std::deque<std::string> names_;    // deque: growth never moves a name
    std::deque<Buffer> buffers_;       // deque: a Buffer never moves
    std::vector<PagedSpace> spaces_;
    std::vector<PagedWrite> paged_writes_;
    dwell_graph graph_{};
};

}  // namespace dwell
