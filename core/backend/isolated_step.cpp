#include "dwell/core/backend/isolated_step.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/tensor_shape.hpp"

namespace dwell {

namespace {

constexpr size_t kAlign = 64;  // what SIMD kernels and DMA engines expect of a buffer

// The guard byte `distance` bytes away from the data; varies so that a
// backend writing a constant is seen.
std::byte guard_byte(size_t distance) {
    return static_cast<std::byte>(0xA5u ^ (distance * 29u & 0xFFu));
}

// Bytes from data to one past the last element.
size_t extent(const dwell_tensor& t) {
    for (int d = 0; d < DWELL_MAX_DIMS; ++d)
        if (t.ne[d] <= 0) return 0;
    uint64_t last = dwell_row_bytes(t.dtype, t.ne[0]);
    for (int d = 1; d < DWELL_MAX_DIMS; ++d) last += static_cast<uint64_t>(t.ne[d] - 1) * t.nb[d];
    return static_cast<size_t>(last);
}

bool same_descriptor(const dwell_tensor& a, const dwell_tensor& b) {
    return a.dtype == b.dtype && a.n_dims == b.n_dims &&
           std::equal(a.ne, a.ne + DWELL_MAX_DIMS, b.ne) &&
           std::equal(a.nb, a.nb + DWELL_MAX_DIMS, b.nb) && a.data == b.data &&
           a.buffer == b.buffer && a.offset == b.offset;
}

// Entry (which, logical) of an I32 page table [2, n_logical].
int32_t& table_entry(const dwell_tensor& table, int32_t which, int64_t logical) {
    return *reinterpret_cast<int32_t*>(static_cast<char*>(table.data) + which * table.nb[0] +
                                       logical * table.nb[1]);
}

[[noreturn]] void unsupported(const std::string& what) {
    throw Error(DWELL_ERR_INTERNAL, "isolating a step: " + what);
}

}  // namespace

IsolatedStep::IsolatedStep(const Graph& graph, const dwell_graph& cg, std::span<const int32_t> ids)
    : ids_(ids.begin(), ids.end()) {
    const int32_t n = cg.n_tensors;
    if (static_cast<size_t>(n) != graph.slots.size())
        unsupported("the C graph and its slots differ in size");
    nodes_.reserve(static_cast<size_t>(cg.n_nodes));
    for (int32_t i = 0; i < cg.n_nodes; ++i) nodes_.push_back(*dwell_graph_node(&cg, i));
    const auto real = [&](int32_t t) -> const dwell_tensor& { return *dwell_graph_tensor(&cg, t); };
    const auto weight = [&](int32_t t) {
        return graph.slots[static_cast<size_t>(graph.storage_of(t))].role == TensorRole::Weight;
    };

    // Every descriptor, with names of our own; no memory but the weights'
    // until the split's tensors get theirs below.
    tensors_.resize(static_cast<size_t>(n));
    writer_.assign(static_cast<size_t>(n), -1);
    for (int32_t i = 0; i < n; ++i) {
        dwell_tensor t = real(i);
        if (t.name) t.name = names_.emplace_back(t.name).c_str();
        if (!weight(i)) {
            t.data = nullptr;
            t.buffer = nullptr;
            t.offset = 0;
        }
        tensors_[static_cast<size_t>(i)] = t;
    }

    std::set<int32_t> touched, written_roots, paged;
    for (const int32_t id : ids_) {
        if (id < 0 || id >= cg.n_nodes) unsupported("node " + std::to_string(id) + " out of range");
        const dwell_node& node = nodes_[static_cast<size_t>(id)];
        touched.insert(node.output);
        writer_[static_cast<size_t>(node.output)] = id;
        written_roots.insert(graph.storage_of(node.output));
        for (int32_t k = 0; k < node.n_inputs; ++k) touched.insert(node.inputs[k]);
        // graph.h: SHORT_CONV and GATED_DELTA_NET write their state input in place.
        if (const int32_t st = dwell_node_state_tensor(&node); st >= 0)
            written_roots.insert(graph.storage_of(st));
        if (node.op != DWELL_OP_ATTENTION || node.n_inputs < 6) continue;
        // graph.h: ATTENTION writes its cache inputs (a paged cache: only
        // the page space, input 3).
        if (real(node.inputs[4]).dtype == DWELL_I32) {
            const PagedWrite w{id, node.inputs[3], node.inputs[4], node.inputs[5]};
            if (graph.storage_of(w.space) != w.space || graph.storage_of(w.table) != w.table)
                unsupported("a paged cache given through a view");
            paged_writes_.push_back(w);
            paged.insert(w.space);
            paged.insert(w.table);
        } else {
            written_roots.insert(graph.storage_of(node.inputs[3]));
            written_roots.insert(graph.storage_of(node.inputs[4]));
        }
    }

    // Plain tensors: one private buffer per storage, as large as its
    // largest view reaches, filled with the current contents.
    std::map<int32_t, size_t> need;
    for (const int32_t t : touched) {
        if (paged.count(t) || weight(t)) continue;
        const int32_t root = graph.storage_of(t);
        if (paged.count(root)) unsupported("a paged cache used by another op");
        const auto* root_data = static_cast<const char*>(real(root).data);
        const auto* data = static_cast<const char*>(real(t).data);
        if (root_data == nullptr || data == nullptr || data < root_data)
            unsupported("tensor " + std::to_string(t) + " has no memory");
        need[root] = std::max({need[root], extent(real(root)),
                               static_cast<size_t>(data - root_data) + extent(real(t))});
    }
    std::map<int32_t, std::byte*> base;
    for (const auto& [root, bytes] : need) {
        Buffer& b = add_buffer(root, bytes, real(root).data);
        b.written = written_roots.count(root) > 0;
        base[root] = b.data;
    }
    for (const int32_t t : touched) {
        if (paged.count(t) || weight(t)) continue;
        const int32_t root = graph.storage_of(t);
        const auto offset =
            static_cast<const char*>(real(t).data) - static_cast<const char*>(real(root).data);
        tensors_[static_cast<size_t>(t)].data = base.at(root) + offset;
        tensors_[static_cast<size_t>(root)].data = base.at(root);
    }
    for (const PagedWrite& w : paged_writes_) isolate_paged(cg, w);

    given_ = tensors_;
    graph_.struct_size = sizeof(dwell_graph);
    graph_.n_tensors = n;
    graph_.tensors = tensors_.data();
    graph_.n_nodes = static_cast<int32_t>(nodes_.size());
    graph_.nodes = nodes_.data();
    graph_.tensor_stride = sizeof(dwell_tensor);
    graph_.node_stride = sizeof(dwell_node);
}

IsolatedStep::Buffer& IsolatedStep::add_buffer(int32_t root, size_t bytes, const void* from) {
    Buffer& b = buffers_.emplace_back();
    b.root = root;
    b.bytes = bytes;
    b.raw.resize(kGuardBytes + bytes + kGuardBytes + kAlign);
    const auto start = reinterpret_cast<uintptr_t>(b.raw.data()) + kGuardBytes;
    b.data = b.raw.data() + (((start + kAlign - 1) & ~(uintptr_t{kAlign} - 1)) -
                             reinterpret_cast<uintptr_t>(b.raw.data()));
    for (size_t i = 1; i <= kGuardBytes; ++i) b.data[-static_cast<ptrdiff_t>(i)] = guard_byte(i);
    for (size_t i = 0; i < kGuardBytes; ++i) b.data[bytes + i] = guard_byte(i);
    if (from != nullptr && bytes > 0) std::memcpy(b.data, from, bytes);
    return b;
}

void IsolatedStep::isolate_paged(const dwell_graph& cg, const PagedWrite& w) {
    const dwell_tensor& space = *dwell_graph_tensor(&cg, w.space);
    const dwell_tensor& table = *dwell_graph_tensor(&cg, w.table);
    if (space.n_dims != 3 || table.n_dims != 2 || table.ne[0] != 2 || space.data == nullptr ||
        table.data == nullptr)
        unsupported("a paged cache not shaped as graph.h describes");
    auto found = std::find_if(spaces_.begin(), spaces_.end(),
                              [&](const PagedSpace& s) { return s.space == w.space; });
    if (found != spaces_.end()) {
        // Two layers on one page space: the first copy named only its own
        // table's pages. Never made by the graph builder (a space per
        // layer); refused rather than half isolated.
        if (tensors_[static_cast<size_t>(w.table)].data != nullptr) return;  // same table again
        unsupported("two page tables over one page space");
    }
    PagedSpace& ps = spaces_.emplace_back();
    ps.space = w.space;
    std::map<int32_t, int32_t> compact;
    for (int64_t l = 0; l < table.ne[1]; ++l) {
        for (int32_t which = 0; which < 2; ++which) {
            const int32_t page = table_entry(table, which, l);
            if (page < 0 || page >= space.ne[2])
                unsupported("page " + std::to_string(page) + " outside the page space");
            if (compact.emplace(page, static_cast<int32_t>(ps.pages.size())).second)
                ps.pages.push_back(page);
        }
    }
    const size_t page_bytes = space.nb[2];
    const size_t n_pages = std::max<size_t>(1, ps.pages.size());
    Buffer& pages = add_buffer(w.space, n_pages * page_bytes, nullptr);
    for (size_t c = 0; c < ps.pages.size(); ++c) {
        std::memcpy(pages.data + c * page_bytes,
                    static_cast<const char*>(space.data) + ps.pages[c] * page_bytes, page_bytes);
    }
    dwell_tensor& private_space = tensors_[static_cast<size_t>(w.space)];
    private_space.data = pages.data;
    private_space.ne[2] = static_cast<int64_t>(n_pages);

    Buffer& entries = add_buffer(w.table, extent(table), table.data);
    dwell_tensor& private_table = tensors_[static_cast<size_t>(w.table)];
    private_table.data = entries.data;
    for (int64_t l = 0; l < table.ne[1]; ++l)
        for (int32_t which = 0; which < 2; ++which)
            table_entry(private_table, which, l) = compact.at(table_entry(table, which, l));
}

std::string IsolatedStep::describe_tensor(int32_t t) const {
    const dwell_tensor& g = given_[static_cast<size_t>(t)];
    std::string s = "tensor " + std::to_string(t);
    if (g.name) s += std::string(" '") + g.name + "'";
    if (const int32_t node = writer_[static_cast<size_t>(t)]; node >= 0) {
        const dwell_node& nd = nodes_[static_cast<size_t>(node)];
        s += " (the output of node " + std::to_string(node) + ", " + dwell_op_name(nd.op);
        if (nd.layer >= 0) s += ", layer " + std::to_string(nd.layer);
        s += ")";
    }
    return s;
}

std::string IsolatedStep::verify() const {
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const dwell_tensor& now = tensors_[i];
        const dwell_tensor& given = given_[i];
        if (same_descriptor(now, given)) continue;
        std::string what = describe_tensor(static_cast<int32_t>(i));
        if (now.data != given.data || now.buffer != given.buffer || now.offset != given.offset)
            return what + " came back pointing at other memory";
        return what + " came back as " + shape_str(now) + ", the graph's is " + shape_str(given);
    }
    for (const Buffer& b : buffers_) {
        size_t past = 0;
        for (size_t i = 0; i < kGuardBytes; ++i)
            if (b.data[b.bytes + i] != guard_byte(i)) past = i + 1;
        size_t before = 0;
        for (size_t i = 1; i <= kGuardBytes; ++i)
            if (b.data[-static_cast<ptrdiff_t>(i)] != guard_byte(i)) before = i;
        if (past == 0 && before == 0) continue;
        const std::string what = describe_tensor(b.root);
        const std::string size = std::to_string(b.bytes) + " bytes";
        if (past > 0)
            return "wrote " + std::to_string(past) + " bytes past the end of " + what + ", " +
                   size + (past == kGuardBytes ? " (or more)" : "");
        return "wrote " + std::to_string(before) + " bytes before the start of " + what + ", " +
               size;
    }
    return {};
}

void IsolatedStep::copy_back(const dwell_graph& cg) const {
    for (const Buffer& b : buffers_) {
        if (b.written) std::memcpy(dwell_graph_tensor(&cg, b.root)->data, b.data, b.bytes);
    }
    for (const PagedWrite& w : paged_writes_) {
        const dwell_tensor& space = *dwell_graph_tensor(&cg, w.space);
        const dwell_tensor& table = *dwell_graph_tensor(&cg, w.table);
        const dwell_tensor& positions = *dwell_graph_tensor(&cg, w.positions);
        const dwell_tensor& mine = tensors_[static_cast<size_t>(w.space)];
        const PagedSpace& ps =
            *std::find_if(spaces_.begin(), spaces_.end(),
                          [&](const PagedSpace& s) { return s.space == w.space; });
        const int64_t rows_per_page = space.ne[1];
        const size_t row_bytes = dwell_row_bytes(space.dtype, space.ne[0]);
        for (int64_t t = 0; t < positions.ne[0]; ++t) {
            const int32_t pos = static_cast<const int32_t*>(positions.data)[t];
            const int64_t logical = pos / rows_per_page;
            const size_t row = static_cast<size_t>(pos % rows_per_page) * space.nb[1];
            if (pos < 0 || logical >= table.ne[1])
                unsupported("position " + std::to_string(pos) + " beyond the page table");
            for (int32_t which = 0; which < 2; ++which) {
                const int32_t page = table_entry(table, which, logical);
                const auto c = static_cast<size_t>(
                    std::find(ps.pages.begin(), ps.pages.end(), page) - ps.pages.begin());
                std::memcpy(static_cast<char*>(space.data) + page * space.nb[2] + row,
                            static_cast<const char*>(mine.data) + c * space.nb[2] + row, row_bytes);
            }
        }
    }
}

}  // namespace dwell
