// The built plugin module through the C ABI only: dlopen, query, probe,
// options, supports_op, graph_compute and ABI version refusal.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dwell/backend.h"
#include "dwell/plugin.h"

namespace {

struct DlClose {
    void operator()(void* h) const { dlclose(h); }
};
using Library = std::unique_ptr<void, DlClose>;

struct LogSink {
    std::vector<std::string> lines;
};

void log_to_sink(void* host, int, const char*, const char* message) {
    static_cast<LogSink*>(host)->lines.emplace_back(message);
}

dwell_host_services make_host(LogSink* sink, uint32_t major = DWELL_ABI_MAJOR) {
    dwell_host_services h{};
    h.struct_size = sizeof h;
    h.abi_major = major;
    h.abi_minor = 0;
    h.host = sink;
    h.log = log_to_sink;
    return h;
}

class CpuPlugin : public ::testing::Test {
protected:
    void SetUp() override {
        const std::filesystem::path path =
            std::filesystem::path(DWELL_TEST_PLUGIN_DIR) / "libdwell-cpu.so";
        if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not built";
        lib_.reset(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
        ASSERT_TRUE(lib_) << dlerror();
        query_ =
            reinterpret_cast<dwell_plugin_query_fn>(dlsym(lib_.get(), DWELL_PLUGIN_QUERY_SYMBOL));
        ASSERT_NE(query_, nullptr) << dlerror();
    }

    const dwell_backend_plugin* backend() {
        host_ = make_host(&sink_);
        dwell_plugin_info info{};
        info.struct_size = sizeof info;
        EXPECT_EQ(query_(&host_, &info), DWELL_OK);
        return info.backend;
    }

    Library lib_;
    dwell_plugin_query_fn query_ = nullptr;
    LogSink sink_;
    dwell_host_services host_{};
};

TEST_F(CpuPlugin, QueryReportsNameVersionAndAbi) {
    host_ = make_host(&sink_);
    dwell_plugin_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(query_(&host_, &info), DWELL_OK);
    EXPECT_STREQ(info.name, "cpu");
    EXPECT_STREQ(info.version, "0.1.0");
    EXPECT_EQ(info.abi_major, static_cast<uint32_t>(DWELL_ABI_MAJOR));
    EXPECT_EQ(info.abi_minor, static_cast<uint32_t>(DWELL_ABI_MINOR));
    EXPECT_EQ(info.kind, DWELL_PLUGIN_BACKEND);
    ASSERT_NE(info.backend, nullptr);
    EXPECT_EQ(info.model, nullptr);
    EXPECT_EQ(info.error, nullptr);
    EXPECT_GE(info.backend->struct_size, sizeof(dwell_backend_plugin));
}

TEST_F(CpuPlugin, HostWithAnotherMajorVersionIsRefused) {
    host_ = make_host(&sink_, 2);
    dwell_plugin_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(query_(&host_, &info), DWELL_ERR_ABI_MISMATCH);
    EXPECT_EQ(info.abi_major, 1u);  // filled even on refusal
    ASSERT_NE(info.error, nullptr);
    const std::string why = info.error;
    EXPECT_NE(why.find("2.0"), std::string::npos) << why;
    const std::string ours =
        std::to_string(DWELL_ABI_MAJOR) + "." + std::to_string(DWELL_ABI_MINOR);
    EXPECT_NE(why.find(ours), std::string::npos) << why;
    EXPECT_EQ(info.backend, nullptr);
}

TEST_F(CpuPlugin, QueryRespectsTheCallersStructSize) {
    host_ = make_host(&sink_);
    dwell_plugin_info info{};
    const char* sentinel = "untouched";
    info.name = sentinel;
    info.struct_size = offsetof(dwell_plugin_info, name);  // an info struct from "ABI 0.x"
    EXPECT_NE(query_(&host_, &info), DWELL_OK);
    EXPECT_EQ(info.abi_major, 1u);
    EXPECT_EQ(info.name, sentinel);
    EXPECT_EQ(query_(&host_, nullptr), DWELL_ERR_INVALID_ARGUMENT);
}

TEST_F(CpuPlugin, OneCpuDevice) {
    const dwell_backend_plugin* be = backend();
    ASSERT_NE(be, nullptr);
    uint32_t count = 0;
    ASSERT_EQ(be->device_count(be->self, &count), DWELL_OK);
    EXPECT_EQ(count, 1u);
    dwell_device_info d{};
    d.struct_size = sizeof d;
    ASSERT_EQ(be->device_info(be->self, 0, &d), DWELL_OK);
    EXPECT_STREQ(d.name, "cpu0");
    EXPECT_EQ(d.kind, DWELL_DEVICE_CPU);
    EXPECT_EQ(d.buffer_kind, DWELL_BUFFER_HOST);
    EXPECT_EQ(d.available, 1);
    ASSERT_NE(d.description, nullptr);
    EXPECT_GT(std::string(d.description).size(), 0u);
    ASSERT_NE(d.hardware_id, nullptr);
    EXPECT_EQ(std::string(d.hardware_id).rfind("cpu:", 0), 0u) << d.hardware_id;
    EXPECT_GT(d.memory_total, 0u);
    EXPECT_LE(d.memory_free, d.memory_total);

    dwell_device_info small{};
    small.struct_size = offsetof(dwell_device_info, hardware_id);
    small.memory_total = 42;
    ASSERT_EQ(be->device_info(be->self, 0, &small), DWELL_OK);
    EXPECT_STREQ(small.name, "cpu0");
    EXPECT_EQ(small.memory_total, 42u);  // outside the caller's struct: not written

    EXPECT_EQ(be->device_info(be->self, 1, &d), DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(be->last_error(be->self)).find("device index 1"), std::string::npos);
}

TEST_F(CpuPlugin, ContextOptions) {
    const dwell_backend_plugin* be = backend();
    ASSERT_NE(be, nullptr);
    dwell_backend_context* ctx = nullptr;

    const dwell_option unknown[] = {{"threads", "2"}, {"turbo", "yes"}};
    EXPECT_EQ(be->context_create(be->self, 0, unknown, 2, &host_, &ctx),
              DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ctx, nullptr);
    EXPECT_NE(std::string(be->last_error(be->self)).find("'turbo'"), std::string::npos)
        << be->last_error(be->self);

    for (const char* bad : {"0", "-1", "two", "3x", ""}) {
        const dwell_option opt[] = {{"threads", bad}};
        EXPECT_EQ(be->context_create(be->self, 0, opt, 1, &host_, &ctx), DWELL_ERR_INVALID_ARGUMENT)
            << bad;
        EXPECT_NE(std::string(be->last_error(be->self)).find("threads"), std::string::npos);
    }
    EXPECT_EQ(be->context_create(be->self, 1, nullptr, 0, &host_, &ctx),
              DWELL_ERR_INVALID_ARGUMENT);

    const dwell_option good[] = {{"threads", "2"}};
    ASSERT_EQ(be->context_create(be->self, 0, good, 1, &host_, &ctx), DWELL_OK);
    ASSERT_NE(ctx, nullptr);
    ASSERT_FALSE(sink_.lines.empty());
    EXPECT_NE(sink_.lines.back().find("2 threads"), std::string::npos) << sink_.lines.back();
    // The line (dwell -v) names the SIMD level, the one the description names.
    dwell_plugin_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(query_(&host_, &info), DWELL_OK);
    const std::string description = info.description;
    ASSERT_EQ(description.rfind("CPU backend: ", 0), 0u) << description;
    const std::string level = description.substr(13, description.find(' ', 13) - 13);
    EXPECT_NE(sink_.lines.back().find(", " + level + " kernels"), std::string::npos)
        << sink_.lines.back() << " / " << description;
    be->context_destroy(ctx);

    ASSERT_EQ(be->context_create(be->self, 0, nullptr, 0, nullptr, &ctx), DWELL_OK);  // defaults
    be->context_destroy(ctx);

    const dwell_option little[] = {{"affinity", "little"}};
    EXPECT_EQ(be->context_create(be->self, 0, little, 1, &host_, &ctx), DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(be->last_error(be->self)).find("'affinity'"), std::string::npos)
        << be->last_error(be->self);

    // Pinned to big cores (on a machine whose cores are alike: all of them).
    const dwell_option big[] = {{"affinity", "big"}, {"threads", "2"}};
    ASSERT_EQ(be->context_create(be->self, 0, big, 2, &host_, &ctx), DWELL_OK);
    EXPECT_NE(sink_.lines.back().find("2 threads pinned to big cores "), std::string::npos)
        << sink_.lines.back();
    be->context_destroy(ctx);
}

// A graph of W [32, 2] Q4_0, x [32, 1] -> MATMUL -> SCALE -> SOFTMAX.
struct TinyGraph {
    uint8_t w[2][18] = {};
    float x[32];
    float mm[2] = {}, scaled[2] = {}, probs[2] = {};
    int32_t bogus_dtype_value = 42;
    std::vector<dwell_tensor> tensors;
    std::vector<dwell_node> nodes;
    dwell_graph graph{};

    static dwell_tensor f32(void* data, int64_t n, int64_t rows) {
        dwell_tensor t{};
        t.dtype = DWELL_F32;
        t.n_dims = 2;
        t.ne[0] = n;
        t.ne[1] = rows;
        t.ne[2] = t.ne[3] = 1;
        t.nb[0] = 4;
        t.nb[1] = 4 * n;
        t.nb[2] = t.nb[3] = t.nb[1] * rows;
        t.data = data;
        return t;
    }

    TinyGraph() {
        // Row 0: d = 1, every nibble 9 -> +1. Row 1: d = 0.5, nibble 6 -> -1.
        w[0][1] = 0x3c;
        w[1][1] = 0x38;
        for (int j = 0; j < 16; ++j) {
            w[0][2 + j] = 0x99;
            w[1][2 + j] = 0x66;
        }
        // x = 127/128 keeps the product exact even where the kernel rounds x
        // to Q8_0 (d = amax / 127) first, as llama.cpp does: d = 1/128, q = 127.
        for (float& v : x) v = 127.0f / 128;
        dwell_tensor wt = f32(w, 32, 2);
        wt.dtype = DWELL_Q4_0;
        wt.nb[0] = 18;
        wt.nb[1] = 18;
        wt.nb[2] = wt.nb[3] = 36;
        tensors = {wt, f32(x, 32, 1), f32(mm, 2, 1), f32(scaled, 2, 1), f32(probs, 2, 1)};
        dwell_node n{};
        n.n_inputs = 1;
        n.layer = -1;
        n.op = DWELL_OP_MATMUL;
        n.n_inputs = 2;
        n.inputs[0] = 0;
        n.inputs[1] = 1;
        n.output = 2;
        nodes.push_back(n);
        n.op = DWELL_OP_SCALE;
        n.n_inputs = 1;
        n.inputs[0] = 2;
        n.output = 3;
        n.fparams[0] = 1.0f / 31.75f;
        nodes.push_back(n);
        n.op = DWELL_OP_SOFTMAX;
        n.inputs[0] = 3;
        n.output = 4;
        nodes.push_back(n);
        sync();
    }
    void sync() {
        graph.struct_size = sizeof graph;
        graph.n_tensors = static_cast<int32_t>(tensors.size());
        graph.tensors = tensors.data();
        graph.n_nodes = static_cast<int32_t>(nodes.size());
        graph.nodes = nodes.data();
    }
};

TEST_F(CpuPlugin, SupportsOpAndGraphCompute) {
    const dwell_backend_plugin* be = backend();
    ASSERT_NE(be, nullptr);
    dwell_backend_context* ctx = nullptr;
    const dwell_option opt[] = {{"threads", "3"}};
    ASSERT_EQ(be->context_create(be->self, 0, opt, 1, &host_, &ctx), DWELL_OK);
    std::unique_ptr<dwell_backend_context, void (*)(dwell_backend_context*)> guard(
        ctx, be->context_destroy);

    TinyGraph tg;
    for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(be->supports_op(ctx, &tg.graph, i), 1) << i;
    EXPECT_EQ(be->supports_op(ctx, &tg.graph, 3), 0);
    EXPECT_EQ(be->supports_op(ctx, &tg.graph, -1), 0);
    EXPECT_EQ(be->supports_op(ctx, nullptr, 0), 0);

    const int32_t ids[] = {0, 1, 2};
    ASSERT_EQ(be->graph_compute(ctx, &tg.graph, ids, 3), DWELL_OK) << be->context_last_error(ctx);
    EXPECT_EQ(tg.mm[0], 31.75f);
    EXPECT_EQ(tg.mm[1], -31.75f);
    EXPECT_NEAR(tg.probs[0], 1.0 / (1.0 + std::exp(-2.0)), 1e-6);
    EXPECT_NEAR(tg.probs[1], std::exp(-2.0) / (1.0 + std::exp(-2.0)), 1e-6);

    // An unknown weight dtype is refused, and computing it names the node.
    memcpy(&tg.tensors[0].dtype, &tg.bogus_dtype_value, sizeof(int32_t));
    EXPECT_EQ(be->supports_op(ctx, &tg.graph, 0), 0);
    tg.tensors[0].dtype = DWELL_FP8_E4M3;
    EXPECT_EQ(be->supports_op(ctx, &tg.graph, 0), 0);
    EXPECT_EQ(be->graph_compute(ctx, &tg.graph, ids, 3), DWELL_ERR_UNSUPPORTED);
    const std::string why = be->context_last_error(ctx);
    EXPECT_EQ(why.rfind("node 0 (matmul): ", 0), 0u) << why;

    // Garbage tensor ids are refused, not followed.
    tg.tensors[0].dtype = DWELL_Q4_0;
    tg.nodes[1].inputs[0] = 1 << 30;
    EXPECT_EQ(be->supports_op(ctx, &tg.graph, 1), 0);
    EXPECT_EQ(be->graph_compute(ctx, &tg.graph, ids, 3), DWELL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(be->context_last_error(ctx)).find("node 1 (scale)"), std::string::npos);
}

}  // namespace
