// The plugin architecture as a user meets it: plugins found at run time,
// refused with clear one-line messages, skipped with the paths tried, and
// graphs split across backends.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cstdio>
#include <fstream>

#include "dwell/core/base/error.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/plugin.h"
#include "dwell/tools/synthetic_model.hpp"
#include "integration_support.hpp"
#include "test_paths.hpp"

namespace dwell::test {
namespace {

// This build's ABI as "major.minor".
std::string abi_version() {
    return std::to_string(DWELL_ABI_MAJOR) + "." + std::to_string(DWELL_ABI_MINOR);
}

namespace fs = std::filesystem;

bool one_line(const std::string& s) {
    std::string t = s;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return !t.empty() && t.find('\n') == std::string::npos;
}

// Captures what the runtime logs while it lives.
class LogCapture {
public:
    LogCapture() : previous_(spdlog::default_logger()) {
        auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
        spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
    }
    ~LogCapture() { spdlog::set_default_logger(previous_); }
    std::string text() const { return stream_.str(); }

private:
    std::ostringstream stream_;
    std::shared_ptr<spdlog::logger> previous_;
};

TEST(PluginArchitecture, PluginsAreLoadedAtRunTimeNotLinked) {
    // libdwell and the dwell executable must not depend on any plugin.
    for (const fs::path& bin :
         {fs::path(DWELL_TEST_BIN_DIR) / ".." / "lib" / "libdwell.so", dwell_binary()}) {
        ASSERT_TRUE(fs::exists(bin)) << bin;
        std::string needed;
        FILE* p = popen(("readelf -d '" + bin.string() + "' 2>&1").c_str(), "r");
        ASSERT_NE(p, nullptr);
        std::array<char, 512> buf{};
        while (fgets(buf.data(), buf.size(), p)) needed += buf.data();
        pclose(p);
        ASSERT_NE(needed.find("NEEDED"), std::string::npos) << needed;
        EXPECT_EQ(needed.find("dwell-cpu"), std::string::npos) << bin;
        EXPECT_EQ(needed.find("dwell-llama"), std::string::npos) << bin;
    }
    const auto r = run_dwell({"devices"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string plugin_dir =
        (fs::path(DWELL_TEST_BIN_DIR) / ".." / "lib" / "dwell").lexically_normal().string();
    EXPECT_NE(r.out.find(plugin_dir + "/libdwell-cpu.so"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(plugin_dir + "/libdwell-llama.so"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("ABI " + abi_version()), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[selected] cpu/cpu0"), std::string::npos) << r.out;
}

TEST(PluginArchitecture, OtherMajorAbiIsRefusedNamingBothVersions) {
    TempDir dir;
    RuntimeOptions o;
    o.manifest = dir.write("m.toml", "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                                         "\"]\n[[backend]]\nplugin = \"cpu\"\n");
    Runtime runtime(o);
    try {
        runtime.loader().load_file(test_plugin_dir() / "libdwell-abi2.so");
        FAIL() << "an ABI 2.0 plugin was accepted";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(e.status(), DWELL_ERR_ABI_MISMATCH);
        EXPECT_NE(msg.find("libdwell-abi2.so"), std::string::npos) << msg;
        EXPECT_NE(msg.find("ABI 2.0"), std::string::npos) << msg;
        EXPECT_NE(msg.find("speaks " + abi_version()), std::string::npos) << msg;
        EXPECT_TRUE(one_line(msg)) << msg;
    }
}

TEST(PluginArchitecture, MissingPluginFallsThroughWithTheTriedPaths) {
    TempDir dir;
    const auto manifest = dir.write("m.toml", R"([device]
name = "fallthrough test"

[[backend]]
plugin = "hexagon-missing"

[[backend]]
plugin = "cpu"
)");
    LogCapture log;
    RuntimeOptions o;
    o.manifest = manifest;
    Runtime runtime(o);
    ASSERT_EQ(runtime.backends().size(), 1u);
    EXPECT_EQ(runtime.backends()[0]->label(), "cpu/cpu0");
    ASSERT_EQ(runtime.backend_choices().size(), 2u);
    EXPECT_FALSE(runtime.backend_choices()[0].selected);
    const std::string warning = log.text();
    EXPECT_NE(warning.find("hexagon-missing"), std::string::npos) << warning;
    EXPECT_NE(warning.find("m.toml:4"), std::string::npos) << warning;  // where the entry is
    for (const auto& d : runtime.loader().search_dirs()) {
        EXPECT_NE(warning.find((d / "libdwell-hexagon-missing.so").string()), std::string::npos)
            << "the warning should name the path tried in " << d << ": " << warning;
    }
}

TEST(PluginArchitecture, MalformedManifestReportsFileLineColumn) {
    TempDir dir;
    const auto manifest =
        dir.write("bad.toml", "[device]\nname = \"x\"\n[[backend]]\nplugin = cpu\n");
    RuntimeOptions o;
    o.manifest = manifest;
    try {
        Runtime runtime(o);
        FAIL() << "a malformed manifest was accepted";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_EQ(msg.rfind(manifest.string() + ":4:", 0), 0u) << msg;
        EXPECT_TRUE(one_line(msg)) << msg;
    }
    const auto r = run_dwell({"devices", "--manifest", manifest.string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find(manifest.string() + ":4:"), std::string::npos) << r.err;
}

TEST(PluginArchitecture, BadModelFilesFailWithOneLine) {
    TempDir dir;
    const auto model = write_small_model(dir);
    std::ifstream in(model, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string bad_magic = bytes;
    bad_magic[0] = 'X';
    const std::vector<std::pair<std::string, std::string>> files = {
        {"missing.gguf", ""},  // not written
        {"empty.gguf", std::string()},
        {"bad_magic.gguf", bad_magic},
        {"truncated.gguf", bytes.substr(0, bytes.size() / 2)},
        {"header_only.gguf", bytes.substr(0, 40)},
    };
    for (const auto& [name, content] : files) {
        const fs::path p = dir.path() / name;
        if (name != "missing.gguf") dir.write(name, content);
        const auto r = run_dwell({"run", "-m", p.string(), "-n", "4"});
        EXPECT_EQ(r.exit_code, 1) << name << ": " << r.err;
        EXPECT_TRUE(one_line(r.err)) << name << ": " << r.err;
        EXPECT_NE(r.err.find(p.string()), std::string::npos) << name << ": " << r.err;
        EXPECT_TRUE(r.out.empty()) << name;
    }
}

// A backend that fails a step does not end it: its nodes run on the next
// backend, the tokens are unchanged, and a backend failing step after step
// is marked unhealthy and gets no more nodes.
TEST(PluginArchitecture, AFailedStepRunsOnTheNextBackendWithIdenticalTokens) {
    TempDir dir;
    const auto model = write_small_model(dir);
    Runtime cpu_only;
    const auto expected = greedy_ids(cpu_only, model, "the dog", 12);
    const auto manifest = [&](const std::string& option) {
        return dir.write(option + ".toml", "[plugins]\nsearch_paths = [\"" +
                                               test_plugin_dir().string() +
                                               "\"]\n\n[[backend]]\nplugin = \"partial\"\n"
                                               "options = { " +
                                               option + " }\n\n[[backend]]\nplugin = \"cpu\"\n");
    };
    {
        // Every third call into the adder fails: some steps fall back.
        RuntimeOptions o;
        o.manifest = manifest("fail_every = \"3\"");
        Runtime rt(o);
        EXPECT_EQ(greedy_ids(rt, model, "the dog", 12), expected);
        EXPECT_TRUE(rt.backends()[0]->healthy());
    }
    {
        // From the 5th call on it always fails: after 3 failed steps in a
        // row it is unhealthy, and the placement leaves it out.
        RuntimeOptions o;
        o.manifest = manifest("fail_from = \"5\"");
        Runtime rt(o);
        EXPECT_EQ(greedy_ids(rt, model, "the dog", 12), expected);
        EXPECT_FALSE(rt.backends()[0]->healthy());
        auto m = Model::load(rt, model);
        Session s(rt, m);
        s.decode(m->tokenizer().encode("the dog", true));
        EXPECT_NE(s.placement_summary().find("partial/adder0: no nodes"), std::string::npos)
            << s.placement_summary();
        EXPECT_NE(s.placement_summary().find("unhealthy after 3 failed steps"), std::string::npos)
            << s.placement_summary();
    }
}

// ABI 1.4 changed what an FP8 key cache holds (offset keys, quant.h): a
// backend built against 1.3 that offers attention gets none over an FP8
// cache, and the placement says why; over an F16 cache it is offered
// attention as before.
TEST(PluginArchitecture, BackendsBeforeAbi14GetNoAttentionOverFp8Caches) {
    TempDir dir;
    const auto model = write_small_model(dir);
    RuntimeOptions o;
    o.manifest = dir.write("m.toml", "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                                         "\"]\n\n[[backend]]\nplugin = \"partial13\"\n"
                                         "options = { offer_attention = \"1\" }\n\n"
                                         "[[backend]]\nplugin = \"cpu\"\n");
    Runtime rt(o);
    ASSERT_EQ(rt.backends().size(), 2u);
    ASSERT_EQ(rt.backends()[0]->plugin().abi_version(), "1.3");
    auto m = Model::load(rt, model);
    // The first step's placement line of the 1.3 backend, and the summary.
    const auto placed = [&](dwell_dtype kv, std::string* summary) {
        SessionOptions so;
        so.kv_dtype = kv;
        Session s(rt, m, so);
        s.decode(m->tokenizer().encode("the dog", true));
        *summary = s.placement_summary();
        const size_t at = summary->find("partial13/adder0: ");
        return at == std::string::npos ? std::string()
                                       : summary->substr(at, summary->find('\n', at) - at);
    };
    std::string fp8_summary, f16_summary;
    const std::string fp8 = placed(DWELL_FP8_E4M3, &fp8_summary);
    EXPECT_NE(fp8.find("[addx4]"), std::string::npos) << fp8_summary;
    EXPECT_NE(fp8_summary.find("partial13/adder0: built against dwell ABI 1.3, which predates the "
                               "FP8 key encoding (rebuild it against 1.4 or later)"),
              std::string::npos)
        << fp8_summary;
    const std::string f16 = placed(DWELL_F16, &f16_summary);
    EXPECT_NE(f16.find("attentionx2"), std::string::npos) << f16_summary;
}

// ABI 1.5 added ROPE's frequency factors: a backend built against 1.3 that
// offers rope gets none that carries factors (a Llama 3 file), and the
// placement says why; plain ropes (a Llama 2 file) it is offered as before.
TEST(PluginArchitecture, BackendsBeforeAbi15GetNoRopeWithFrequencyFactors) {
    TempDir dir;
    RuntimeOptions o;
    o.manifest = dir.write("m.toml", "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                                         "\"]\n\n[[backend]]\nplugin = \"partial13\"\n"
                                         "options = { offer_rope = \"1\" }\n\n"
                                         "[[backend]]\nplugin = \"cpu\"\n");
    Runtime rt(o);
    ASSERT_EQ(rt.backends().size(), 2u);
    const auto summary_for = [&](SyntheticFamily family) {
        SyntheticModelSpec spec = small_model_spec();
        spec.family = family;
        const auto path = dir.path() / (std::string(synthetic_family_name(family)) + ".gguf");
        write_synthetic_model(spec, path);
        auto m = Model::load(rt, path);
        Session s(rt, m);
        s.decode(m->tokenizer().encode("the dog", true));
        return s.placement_summary();
    };
    // The first placement line of the 1.3 backend.
    const auto line_of = [](const std::string& summary) {
        const size_t at = summary.find("partial13/adder0: ");
        return at == std::string::npos ? std::string()
                                       : summary.substr(at, summary.find('\n', at) - at);
    };
    const std::string with_factors = summary_for(SyntheticFamily::llama3);
    EXPECT_NE(with_factors.find("partial13/adder0: built against dwell ABI 1.3, which predates "
                                "RoPE frequency factors (rebuild it against 1.5 or later)"),
              std::string::npos)
        << with_factors;
    EXPECT_EQ(line_of(with_factors).find("rope"), std::string::npos) << with_factors;
    const std::string plain = summary_for(SyntheticFamily::llama);
    EXPECT_NE(line_of(plain).find("ropex4"), std::string::npos) << plain;
}

TEST(PluginArchitecture, GraphSplitsAcrossBackendsWithIdenticalTokens) {
    TempDir dir;
    const auto model = write_small_model(dir);
    const auto split_manifest =
        dir.write("split.toml", "[plugins]\nsearch_paths = [\"" + test_plugin_dir().string() +
                                    "\"]\n\n[[backend]]\nplugin = \"partial\"\n\n"
                                    "[[backend]]\nplugin = \"cpu\"\n");
    Runtime cpu_only;
    const auto expected = greedy_ids(cpu_only, model, "the dog", 12);

    RuntimeOptions o;
    o.manifest = split_manifest;
    Runtime split(o);
    ASSERT_EQ(split.backends().size(), 2u);
    EXPECT_EQ(split.backends()[0]->label(), "partial/adder0");
    EXPECT_EQ(greedy_ids(split, model, "the dog", 12), expected);

    auto m = Model::load(split, model);
    Session session(split, m);
    session.decode(m->tokenizer().encode("the dog", true));
    const std::string& summary = session.placement_summary();
    EXPECT_NE(summary.find("partial/adder0: 4 nodes"), std::string::npos)
        << summary;  // 2 adds per layer
    EXPECT_NE(summary.find("cpu/cpu0"), std::string::npos) << summary;
    EXPECT_NE(summary.find("declined by partial/adder0"), std::string::npos) << summary;

    // Strict mode refuses to fall back from the first backend.
    o.strict = true;
    Runtime strict(o);
    auto m2 = Model::load(strict, model);
    Session strict_session(strict, m2);
    try {
        strict_session.decode(m2->tokenizer().encode("the dog", true));
        FAIL() << "strict mode fell back";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("strict"), std::string::npos) << e.what();
        EXPECT_EQ(strict_session.n_past(), 0);
    }
}

TEST(PluginArchitecture, UnknownArchitectureNamesTheServedOnes) {
    TempDir dir;
    const auto model = write_small_model(dir);
    std::ifstream in(model, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Same-length rename keeps every offset valid.
    const size_t at = bytes.find("llama");
    ASSERT_NE(at, std::string::npos);
    bytes.replace(at, 5, "zebra");
    const auto p = dir.write("zebra.gguf", bytes);
    Runtime runtime;
    try {
        Model::load(runtime, p);
        FAIL() << "a model with no plugin loaded";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("'zebra'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("llama"), std::string::npos) << msg;
        EXPECT_TRUE(one_line(msg)) << msg;
    }
}

TEST(PluginArchitecture, BadTokenAndFullContextLeaveTheSessionUsable) {
    TempDir dir;
    const auto model_path = write_small_model(dir);
    Runtime runtime;
    auto model = Model::load(runtime, model_path);
    SessionOptions so;
    so.n_ctx = 8;
    Session session(runtime, model, so);
    const std::vector<int32_t> bad = {1, 99999};
    EXPECT_THROW(session.decode(bad), Error);
    EXPECT_EQ(session.n_past(), 0);
    const std::vector<int32_t> nine(9, 5);
    EXPECT_THROW(session.decode(nine), Error);
    const std::vector<int32_t> ok = {1, 5, 6};
    EXPECT_EQ(session.decode(ok).size(), 512u);
    EXPECT_EQ(session.n_past(), 3);
}

}  // namespace
}  // namespace dwell::test
