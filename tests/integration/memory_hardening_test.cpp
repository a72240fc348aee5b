// Hostile model files and memory limits: packs whose tensors decompress to
// far more than the file (only declared tensors are decompressed, after
// their bytes are charged and checked against the memory left), the KV-fit
// check counting the weights, the cgroup limit under a faked device root,
// non-finite hyper-parameters refused at load naming the key, NaN logits
// failing the step naming the position, and the size limit on -f.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/model/pack_file.hpp"
#include "dwell/core/platform/text_file.hpp"
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"
#include "dwell/tools/gguf_metadata_copy.hpp"
#include "dwell/tools/pack_writer.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

RuntimeOptions cpu_options(const TempDir& dir, std::optional<uint64_t> budget = std::nullopt) {
    RuntimeOptions o;
    o.manifest = dir.write("cpu.toml",
                           "[device]\nname = \"memory test\"\n[[backend]]\nplugin = \"cpu\"\n"
                           "[kv]\ndtype = \"f16\"\nprefix_cache_mb = 0\n");
    o.threads = 1;
    o.memory_budget_bytes = budget;
    return o;
}

// Zero bytes that cost no memory: untouched anonymous pages read as the
// kernel's shared zero page.
class ZeroBytes {
public:
    explicit ZeroBytes(size_t n) : n_(n) {
        p_ = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p_ == MAP_FAILED) throw std::runtime_error("mmap of zero bytes failed");
    }
    ~ZeroBytes() { ::munmap(p_, n_); }
    ZeroBytes(const ZeroBytes&) = delete;
    ZeroBytes& operator=(const ZeroBytes&) = delete;
    std::span<const uint8_t> span() const { return {static_cast<const uint8_t*>(p_), n_}; }

private:
    void* p_;
    size_t n_;
};

// The GGUF file `gguf` as a zstd pack, plus `extra` F32 tensors of zeros of
// `extra_bytes` each that no model plugin declares.
fs::path write_pack(const fs::path& gguf, const fs::path& out, int extra, uint64_t extra_bytes,
                    PackCompression compression = PackCompression::Zstd) {
    const GgufFile in = GgufFile::open(gguf);
    PackWriter::Options po;
    po.compression = compression;
    po.zstd_level = 1;
    po.frame_bytes = uint64_t{4} << 20;
    PackWriter w(out, po);
    copy_gguf_metadata(in, w.metadata(),
                       [](std::string_view key) { return key.rfind("tokenizer.ggml.", 0) != 0; });
    w.set_tokenizer(Tokenizer::from_gguf(in).serialized_model());
    for (const auto& t : in.tensors()) {
        w.add_tensor(t.name, t.dtype, std::span<const int64_t>(t.ne, t.n_dims),
                     std::span<const uint8_t>(t.data, t.size));
    }
    if (extra > 0) {
        const ZeroBytes zeros(extra_bytes);
        const int64_t ne[2] = {1024, static_cast<int64_t>(extra_bytes / 4096)};
        for (int i = 0; i < extra; ++i) {
            w.add_tensor("unused." + std::to_string(i) + ".weight", DWELL_F32, ne, zeros.span());
        }
    }
    w.finish();
    return out;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// The number in /proc/self/status's `key` line (kB), in bytes.
uint64_t status_kib(const std::string& key) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size())) * 1024;
    }
    return 0;
}

TEST(PackMemory, UndeclaredTensorsAreNeverDecompressed) {
    // 4 tensors of 1 GiB of zeros in a pack of a few MB: before, opening it
    // decompressed all 4 GiB. In a child whose address space has room for
    // the model but not for one of them, the model must load.
    TempDir dir;
    const fs::path gguf = write_small_model(dir);
    const fs::path pack = write_pack(gguf, dir.path() / "bomb.dwell", 4, uint64_t{1} << 30);
    EXPECT_LT(fs::file_size(pack), uint64_t{16} << 20);
    {
        const auto src = open_pack_source(pack, {}, TensorData::Deferred);
        uint64_t raw = 0;
        for (const auto& s : src->storage()) raw += s.raw_bytes;
        EXPECT_GT(raw, uint64_t{4} << 30);
    }
    const RuntimeOptions options = cpu_options(dir, uint64_t{64} << 20);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // Sanitizers reserve and map address space of their own as they go;
        // there the load is only run, not bounded.
        if (!kSanitized) {
            const uint64_t room = status_kib("VmSize:") + (uint64_t{768} << 20);
            const struct rlimit lim = {room, room};
            ::setrlimit(RLIMIT_AS, &lim);
        }
        int code = 0;
        try {
            Runtime runtime(options);
            auto model = Model::load(runtime, pack);
            Session s(runtime, model);
            const int32_t bos[1] = {1};
            s.decode(bos);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "child: %s\n", e.what());
            code = 1;
        }
        std::fflush(stderr);
        ::_exit(code);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "loading the pack failed under a 768 MiB address limit";
}

// A device tree whose memory cgroup leaves `left` bytes.
fs::path cgroup_root(const TempDir& dir, uint64_t left) {
    const fs::path root = dir.path() / "device";
    fs::create_directories(root / "proc/self");
    fs::create_directories(root / "sys/fs/cgroup/app");
    std::ofstream(root / "proc/meminfo") << "MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\n";
    std::ofstream(root / "proc/self/cgroup") << "0::/app\n";
    std::ofstream(root / "sys/fs/cgroup/app/memory.max") << (left + 4096) << "\n";
    std::ofstream(root / "sys/fs/cgroup/app/memory.current") << 4096 << "\n";
    return root;
}

TEST(PackMemory, DecompressionIsCheckedAgainstTheCgroupBeforeAllocating) {
    TempDir dir;
    const fs::path gguf = write_small_model(dir);
    const fs::path pack = write_pack(gguf, dir.path() / "m.dwell", 0, 0);
    uint64_t compressed = 0;
    {
        const auto src = open_pack_source(pack, {}, TensorData::Deferred);
        for (const auto& s : src->storage())
            if (s.compression == PackCompression::Zstd) compressed += s.raw_bytes;
    }
    ASSERT_GT(compressed, 512u);  // the norm weights, at least

    RuntimeOptions o = cpu_options(dir);
    o.device_root = cgroup_root(dir, 512);
    {
        Runtime runtime(o);
        EXPECT_EQ(runtime.available_memory(), 512u);
        try {
            Model::load(runtime, pack);
            FAIL() << "a pack needing more than the cgroup leaves loaded";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_EQ(e.status(), DWELL_ERR_OUT_OF_MEMORY);
            EXPECT_NE(msg.find(pack.string()), std::string::npos) << msg;
            EXPECT_NE(msg.find("decompressing"), std::string::npos) << msg;
            EXPECT_NE(msg.find("512 B"), std::string::npos) << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
            EXPECT_EQ(runtime.pool().stats().used_bytes, 0u);  // the charge was given back
        }
    }
    o.device_root = cgroup_root(dir, uint64_t{1} << 30);
    Runtime runtime(o);
    EXPECT_NO_THROW(Model::load(runtime, pack));
}

TEST(PackMemory, ChecksumOfADeclaredTensorIsVerifiedBeforeUse) {
    TempDir dir;
    const fs::path gguf = write_small_model(dir);
    const fs::path pack = write_pack(gguf, dir.path() / "m.dwell", 0, 0, PackCompression::None);
    // Flip one byte inside the first raw (uncompressed) tensor.
    uint64_t offset = 0;
    std::string name;
    {
        const auto src = open_pack_source(pack, {}, TensorData::Deferred);
        for (const auto& t : src->tensors()) {
            if (t.stored.frame_sizes.empty()) {
                offset = t.stored.offset + t.size / 2;
                name = t.name;
                break;
            }
        }
    }
    ASSERT_FALSE(name.empty());
    {
        std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(offset));
        char c = 0;
        f.read(&c, 1);
        c = static_cast<char>(c ^ 0x40);
        f.seekp(static_cast<std::streamoff>(offset));
        f.write(&c, 1);
    }
    Runtime runtime(cpu_options(dir));
    try {
        Model::load(runtime, pack);
        FAIL() << "a corrupt tensor loaded";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("tensor '" + name + "'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("checksum mismatch"), std::string::npos) << msg;
    }
}

TEST(KvFit, TheWeightsAlreadyChargedCount) {
    TempDir dir;
    SyntheticModelSpec spec = small_model_spec();
    spec.n_embd = 512;
    spec.n_head = 8;
    spec.n_head_kv = 8;
    spec.n_ctx = 1024;
    const fs::path model_path = dir.path() / "m.gguf";
    write_synthetic_model(spec, model_path);
    uint64_t weights = 0;
    {
        Runtime runtime(cpu_options(dir));
        weights = Model::load(runtime, model_path)->weight_bytes();
    }
    // F16 rows of 512: 1 KiB per layer, K and V, 2 layers: 4 KiB a token.
    const uint64_t kv_1024 = uint64_t{4096} * 1024;
    // Room for the weights and half of that cache: 1024 tokens do not fit
    // although the cache alone is below the budget.
    Runtime runtime(cpu_options(dir, weights + kv_1024 / 2));
    auto model = Model::load(runtime, model_path);
    SessionOptions so;
    so.n_ctx = 1024;
    try {
        Session s(runtime, model, so);
        FAIL() << "a KV cache larger than the budget left after the weights was accepted";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(e.status(), DWELL_ERR_OUT_OF_MEMORY);
        EXPECT_NE(msg.find("1024 tokens"), std::string::npos) << msg;
        EXPECT_NE(msg.find("of weights"), std::string::npos) << msg;
    }
    so.n_ctx = 256;  // a quarter of it fits
    EXPECT_NO_THROW(Session(runtime, model, so));
}

TEST(KvFit, TheCgroupLimitUnderTheDeviceRootCounts) {
    TempDir dir;
    const fs::path model_path = write_small_model(dir);
    RuntimeOptions o = cpu_options(dir);
    o.device_root = cgroup_root(dir, uint64_t{1} << 20);  // 1 MiB left
    Runtime runtime(o);
    auto model = Model::load(runtime, model_path);
    SessionOptions so;
    so.n_ctx = 128;  // 2 layers x 2 x 128 x 64 x 2 bytes = 64 KiB: fits
    EXPECT_NO_THROW(Session(runtime, model, so));
    so.n_ctx = 8192;  // 4 MiB: does not
    try {
        Session s(runtime, model, so);
        FAIL() << "a KV cache larger than the cgroup leaves was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("memory available"), std::string::npos) << e.what();
    }
}

struct BadHParam {
    const char* key;
    float rope_freq_base;
    float rms_eps;
};

TEST(HyperParameters, NonFiniteZeroOrNegativeAreRefusedAtLoadNamingFileAndKey) {
    TempDir dir;
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const BadHParam cases[] = {
        {"llama.rope.freq_base", inf, 1e-5f},
        {"llama.rope.freq_base", nan, 1e-5f},
        {"llama.rope.freq_base", 0.0f, 1e-5f},
        {"llama.rope.freq_base", -10000.0f, 1e-5f},
        {"llama.attention.layer_norm_rms_epsilon", 10000.0f, inf},
        {"llama.attention.layer_norm_rms_epsilon", 10000.0f, -inf},
        {"llama.attention.layer_norm_rms_epsilon", 10000.0f, nan},
        {"llama.attention.layer_norm_rms_epsilon", 10000.0f, 0.0f},
        {"llama.attention.layer_norm_rms_epsilon", 10000.0f, -1e-5f},
    };
    int i = 0;
    for (const BadHParam& c : cases) {
        SyntheticModelSpec spec = small_model_spec();
        spec.rope_freq_base = c.rope_freq_base;
        spec.rms_eps = c.rms_eps;
        const fs::path p = dir.path() / ("bad" + std::to_string(i++) + ".gguf");
        write_synthetic_model(spec, p);
        const std::string msg = model_load_error(p);
        SCOPED_TRACE(std::string(c.key) + " " + std::to_string(c.rope_freq_base) + " " +
                     std::to_string(c.rms_eps));
        EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
        EXPECT_NE(msg.find("metadata key " + std::string(c.key)), std::string::npos) << msg;
        EXPECT_EQ(msg.find("backend"), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

TEST(NonFiniteLogits, FailTheStepNamingThePosition) {
    TempDir dir;
    SyntheticModelSpec spec = small_model_spec();
    spec.dtype = DWELL_F32;
    spec.weight_std = std::numeric_limits<float>::quiet_NaN();
    const fs::path p = dir.path() / "nan.gguf";
    write_synthetic_model(spec, p);
    Runtime runtime(cpu_options(dir));
    auto model = Model::load(runtime, p);
    Session s(runtime, model);
    const int32_t prompt[3] = {1, 20, 30};
    try {
        s.decode(prompt);
        FAIL() << "NaN logits were returned";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(e.status(), DWELL_ERR_CORRUPT);
        EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
        EXPECT_NE(msg.find("non-finite logit"), std::string::npos) << msg;
        EXPECT_NE(msg.find("position 2"), std::string::npos) << msg;
    }
    EXPECT_EQ(s.n_past(), 0);  // the failed step is undone

    // The CLI: one line and a failure exit, not <unk> forever.
    const CommandResult r = run_dwell({"run", "-m", p.string(), "-p", "Once", "-n", "8", "--temp",
                                       "0", "--manifest", cpu_options(dir).manifest->string()});
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.err.find("non-finite logit"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("<unk><unk>"), std::string::npos) << r.out;
}

TEST(TextInput, PerplexityFileOverTheLimitIsRefusedBeforeLoading) {
    TempDir dir;
    // Sparse: its size is past the limit, its blocks cost nothing.
    const fs::path big = dir.path() / "huge.txt";
    {
        std::ofstream(big) << "x";
        fs::resize_file(big, kMaxTextFileBytes + 1);
    }
    const CommandResult r =
        run_dwell({"perplexity", "-m", (dir.path() / "absent.gguf").string(), "-f", big.string()});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(big.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("limit of 256.0 MiB"), std::string::npos) << r.err;
    // Checked before the model: the absent model is never reached.
    EXPECT_EQ(r.err.find("absent.gguf"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dwell::test
