// IsolatedStep on hand-built graphs: what the backend sees is a private
// copy, weights excepted; results reach the real graph only through
// copy_back(); descriptor changes and writes past a buffer are named; a
// paged KV cache is copied for the pages its table names and only the rows
// the op writes come back.
#include "dwell/core/backend/isolated_step.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace dwell {
namespace {

dwell_tensor f32(std::initializer_list<int64_t> ne) {
    const std::vector<int64_t> v(ne);
    return make_tensor(DWELL_F32, static_cast<int32_t>(v.size()), v.data());
}

float* floats(const dwell_graph& g, int32_t t) {
    return static_cast<float*>(dwell_graph_tensor(&g, t)->data);
}

// y = x + b: x an input, b a weight, y an activation.
class AddGraph : public ::testing::Test {
protected:
    void SetUp() override {
        x_ = graph_.add_tensor(f32({4}), TensorRole::Input, "x");
        b_ = graph_.add_tensor(f32({4}), TensorRole::Weight, "b");
        y_ = graph_.add_tensor(f32({4}), TensorRole::Activation, "y");
        graph_.slots[x_].tensor.data = x_data_.data();
        graph_.slots[b_].tensor.data = b_data_.data();
        graph_.slots[y_].tensor.data = y_data_.data();
        dwell_node add{};
        add.op = DWELL_OP_ADD;
        add.output = y_;
        add.n_inputs = 2;
        add.inputs[0] = x_;
        add.inputs[1] = b_;
        add.layer = -1;
        graph_.slots[y_].producer = 0;
        graph_.nodes.push_back(add);
    }

    // What a backend would do with the private graph.
    static void run_add(const dwell_graph& g) {
        const dwell_node* n = dwell_graph_node(&g, 0);
        for (int i = 0; i < 4; ++i)
            floats(g, n->output)[i] = floats(g, n->inputs[0])[i] + floats(g, n->inputs[1])[i];
    }

    Graph graph_;
    int32_t x_ = -1, b_ = -1, y_ = -1;
    std::vector<float> x_data_{1, 2, 3, 4}, b_data_{10, 20, 30, 40}, y_data_{0, 0, 0, 0};
    const std::vector<int32_t> ids_{0};
};

TEST_F(AddGraph, TheBackendSeesCopiesAndTheResultArrivesOnlyByCopyBack) {
    const dwell_graph& cg = graph_.c_graph();
    IsolatedStep step(graph_, cg, ids_);
    const dwell_graph& mine = step.graph();
    EXPECT_NE(floats(mine, x_), x_data_.data());
    EXPECT_NE(floats(mine, y_), y_data_.data());
    EXPECT_EQ(floats(mine, b_), b_data_.data());  // weights are shared
    EXPECT_EQ(std::memcmp(floats(mine, x_), x_data_.data(), 16), 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(floats(mine, y_)) % 64, 0u);
    EXPECT_STREQ(dwell_graph_tensor(&mine, y_)->name, "y");
    EXPECT_NE(dwell_graph_tensor(&mine, y_)->name, dwell_graph_tensor(&cg, y_)->name);

    run_add(mine);
    EXPECT_EQ(y_data_, (std::vector<float>{0, 0, 0, 0}));
    EXPECT_EQ(step.verify(), "");
    step.copy_back(cg);
    EXPECT_EQ(y_data_, (std::vector<float>{11, 22, 33, 44}));
    EXPECT_EQ(x_data_, (std::vector<float>{1, 2, 3, 4}));  // inputs are not written back
}

TEST_F(AddGraph, WritingPastTheOutputIsNamed) {
    const dwell_graph& cg = graph_.c_graph();
    IsolatedStep step(graph_, cg, ids_);
    run_add(step.graph());
    floats(step.graph(), y_)[5] = 1.0f;  // bytes 20-23 of a 16-byte buffer
    EXPECT_EQ(step.verify(),
              "wrote 8 bytes past the end of tensor 2 'y' (the output of node 0, add), 16 bytes");
}

TEST_F(AddGraph, WritingBeforeAnInputIsNamed) {
    const dwell_graph& cg = graph_.c_graph();
    IsolatedStep step(graph_, cg, ids_);
    floats(step.graph(), x_)[-2] = 1.0f;
    EXPECT_EQ(step.verify(), "wrote 8 bytes before the start of tensor 0 'x', 16 bytes");
}

TEST_F(AddGraph, AChangedDescriptorIsNamed) {
    const dwell_graph& cg = graph_.c_graph();
    IsolatedStep step(graph_, cg, ids_);
    run_add(step.graph());
    dwell_graph_tensor(&step.graph(), y_)->ne[0] = 5;
    EXPECT_EQ(step.verify(),
              "tensor 2 'y' (the output of node 0, add) came back as [5] f32, the graph's is [4] "
              "f32");
    dwell_graph_tensor(&step.graph(), y_)->ne[0] = 4;
    dwell_graph_tensor(&step.graph(), y_)->data = y_data_.data();
    EXPECT_EQ(step.verify(),
              "tensor 2 'y' (the output of node 0, add) came back pointing at "
              "other memory");
}

TEST(IsolatedStepPaged, OnlyTheNamedPagesGoInAndOnlyTheWrittenRowsComeBack) {
    // A page space of 8 pages, 2 rows of 2 f32 each; the table maps
    // logical page 0 to K page 5 / V page 1 and logical 1 to K 3 / V 6.
    constexpr int kPages = 8, kRows = 2, kWidth = 2;
    std::vector<float> space_data(kPages * kRows * kWidth);
    for (size_t i = 0; i < space_data.size(); ++i) space_data[i] = static_cast<float>(i);
    const std::vector<float> before = space_data;
    std::vector<int32_t> table_data{5, 1, 3, 6};
    std::vector<int32_t> positions_data{2, 3};  // logical page 1, rows 0 and 1
    std::vector<float> qkv(kWidth * 2, 0.5f), out(kWidth * 2);

    Graph g;
    const int32_t q = g.add_tensor(f32({kWidth, 1, 2}), TensorRole::Activation, "q");
    const int32_t k = g.add_tensor(f32({kWidth, 1, 2}), TensorRole::Activation, "k");
    const int32_t v = g.add_tensor(f32({kWidth, 1, 2}), TensorRole::Activation, "v");
    const int32_t space = g.add_tensor(f32({kWidth, kRows, kPages}), TensorRole::Cache, "");
    const int64_t table_ne[2] = {2, 2};
    const int32_t table = g.add_tensor(make_tensor(DWELL_I32, 2, table_ne), TensorRole::Cache, "");
    const int64_t pos_ne[1] = {2};
    const int32_t pos = g.add_tensor(make_tensor(DWELL_I32, 1, pos_ne), TensorRole::Input, "pos");
    const int32_t o = g.add_tensor(f32({kWidth, 1, 2}), TensorRole::Activation, "o");
    for (int32_t t : {q, k, v}) g.slots[t].tensor.data = qkv.data();
    g.slots[space].tensor.data = space_data.data();
    g.slots[table].tensor.data = table_data.data();
    g.slots[pos].tensor.data = positions_data.data();
    g.slots[o].tensor.data = out.data();
    dwell_node attn{};
    attn.op = DWELL_OP_ATTENTION;
    attn.output = o;
    attn.n_inputs = 6;
    const int32_t inputs[6] = {q, k, v, space, table, pos};
    std::copy(inputs, inputs + 6, attn.inputs);
    attn.layer = 0;
    g.nodes.push_back(attn);

    const dwell_graph& cg = g.c_graph();
    const std::vector<int32_t> ids{0};
    IsolatedStep step(g, cg, ids);
    const dwell_graph& mine = step.graph();
    const dwell_tensor& my_space = *dwell_graph_tensor(&mine, space);
    ASSERT_EQ(my_space.ne[2], 4);  // pages 5, 1, 3, 6, in table order
    const auto* my_table = static_cast<const int32_t*>(dwell_graph_tensor(&mine, table)->data);
    EXPECT_EQ(std::vector<int32_t>(my_table, my_table + 4), (std::vector<int32_t>{0, 1, 2, 3}));
    auto* pages = static_cast<float*>(my_space.data);
    const size_t page_floats = kRows * kWidth;
    const int real_page[4] = {5, 1, 3, 6};
    for (size_t c = 0; c < 4; ++c) {
        EXPECT_EQ(std::memcmp(pages + c * page_floats, before.data() + real_page[c] * page_floats,
                              page_floats * sizeof(float)),
                  0)
            << "compact page " << c;
    }
    // The backend writes positions 2 and 3 (logical page 1: K in compact
    // page 2, V in 3), and, wrongly, a row it was not asked to write.
    for (size_t c : {2, 3})
        for (size_t i = 0; i < page_floats; ++i) pages[c * page_floats + i] = -1.0f;
    pages[0] = -7.0f;  // compact page 0 (real K page 5), row 0
    EXPECT_EQ(step.verify(), "");
    step.copy_back(cg);
    std::vector<float> expected = before;
    for (int p : {3, 6})
        for (size_t i = 0; i < page_floats; ++i) expected[p * page_floats + i] = -1.0f;
    EXPECT_EQ(space_data, expected);  // page 5 row 0 untouched
    EXPECT_EQ(table_data, (std::vector<int32_t>{5, 1, 3, 6}));
}

}  // namespace
}  // namespace dwell
