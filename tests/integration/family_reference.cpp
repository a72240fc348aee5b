#include "family_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "integration_support.hpp"

namespace dwell::test {

FamilyReference read_family_reference(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    FamilyReference r;
    std::string line;
    while (std::getline(in, line) && line != "data f32le") {
        std::istringstream fields(line);
        std::string key;
        fields >> key;
        const auto ids = [&] {
            return std::vector<int32_t>(std::istream_iterator<int32_t>(fields),
                                        std::istream_iterator<int32_t>());
        };
        if (key == "sha256") fields >> r.sha256;
        if (key == "n_pos") fields >> r.n_pos;
        if (key == "n_vocab") fields >> r.n_vocab;
        if (key == "tokens") r.tokens = ids();
        if (key == "greedy") r.greedy = ids();
        if (key == "greedy_min_margin") fields >> r.greedy_min_margin;
    }
    if (line != "data f32le" || r.n_pos <= 0 || r.n_vocab <= 0 ||
        static_cast<int64_t>(r.tokens.size()) != r.n_pos)
        throw std::runtime_error(path.string() + ": malformed header");
    r.logits.resize(static_cast<size_t>(r.n_pos * r.n_vocab));
    in.read(reinterpret_cast<char*>(r.logits.data()),
            static_cast<std::streamsize>(r.logits.size() * sizeof(float)));
    if (in.gcount() != static_cast<std::streamsize>(r.logits.size() * sizeof(float)))
        throw std::runtime_error(path.string() + ": truncated logits");
    return r;
}

std::filesystem::path family_reference_path(const std::string& family) {
    return std::filesystem::path(DWELL_TEST_SOURCE_DIR) / "tests" / "data" / "families" /
           (family + ".logits");
}

double logits_cosine(const float* a, const float* b, int64_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; ++i) {
        ab += double(a[i]) * b[i];
        aa += double(a[i]) * a[i];
        bb += double(b[i]) * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

int32_t greedy_argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void StrictFamilyReference::SetUp() {
    namespace fs = std::filesystem;
    const fs::path plugin = fs::path(DWELL_TEST_PLUGIN_DIR) / ("libdwell-" + family_ + ".so");
    if (!fs::exists(plugin))
        GTEST_SKIP() << "the " << family_ << " model plugin is not built (" << plugin.string()
                     << ")";
    const char* keep = std::getenv("DWELL_FAMILY_GGUF_DIR");
    gguf_ = (keep && *keep ? fs::path(keep) : tmp_.path()) / (family_ + ".gguf");
    write_synthetic_model(family_reference_spec(synthetic_), gguf_);
    ref_ = read_family_reference(family_reference_path(family_));
    ASSERT_EQ(sha256_of(gguf_), ref_.sha256)
        << "generator changed: recompute tests/data/families/" << family_
        << ".logits with llama.cpp as tests/data/families/README.md says";
    ASSERT_GE(ref_.n_pos, kMinPositions);
    ASSERT_GE(ref_.greedy.size(), kGreedyTokens);
    model_ = Model::load(runtime_, gguf_);
    ASSERT_EQ(model_->plugin().name(), family_);
    ASSERT_EQ(model_->info().n_vocab, ref_.n_vocab);
}

SessionOptions StrictFamilyReference::f32_kv() const {
    SessionOptions so;
    so.kv_dtype = DWELL_F32;
    return so;
}

double StrictFamilyReference::min_cosine(std::span<const float> got) const {
    double min_cos = 1.0;
    for (int64_t p = 0; p < ref_.n_pos; ++p) {
        const double c = logits_cosine(got.data() + p * ref_.n_vocab,
                                       ref_.logits.data() + p * ref_.n_vocab, ref_.n_vocab);
        EXPECT_GE(c, kMinCosine) << "position " << p << " (token " << ref_.tokens[p] << ")";
        min_cos = std::min(min_cos, c);
    }
    return min_cos;
}

void StrictFamilyReference::expect_strict_logits_and_greedy(Runtime& runtime,
                                                            const std::shared_ptr<Model>& model,
                                                            const std::string& label) {
    Session session(runtime, model, f32_kv());
    const auto got = session.decode(ref_.tokens, /*all_logits=*/true);
    ASSERT_EQ(static_cast<int64_t>(got.size()), ref_.n_pos * ref_.n_vocab);
    const double min_cos = min_cosine(got);
    // Read here, after the prompt: the one-token graphs that follow may be
    // placed otherwise.
    last_placement_ = session.placement_summary();

    std::vector<int32_t> greedy;
    std::span<const float> last = got.subspan(static_cast<size_t>((ref_.n_pos - 1) * ref_.n_vocab));
    while (greedy.size() < kGreedyTokens) {
        greedy.push_back(greedy_argmax(last));
        if (greedy.size() == kGreedyTokens) break;
        const int32_t next[1] = {greedy.back()};
        last = session.decode(next);
        ASSERT_EQ(static_cast<int64_t>(last.size()), ref_.n_vocab);
    }
    const std::vector<int32_t> want(ref_.greedy.begin(), ref_.greedy.begin() + kGreedyTokens);
    EXPECT_EQ(greedy, want) << label << ": greedy decoding diverged from llama.cpp's";
    std::printf(
        "%s: minimum cosine over %lld positions %.10f (1 - %.2e); %zu greedy tokens %s "
        "(llama.cpp's smallest top-1 margin %.4g)\n",
        label.c_str(), static_cast<long long>(ref_.n_pos), min_cos, 1.0 - min_cos, kGreedyTokens,
        greedy == want ? "identical" : "DIFFERENT", ref_.greedy_min_margin);
}

void StrictFamilyReference::expect_prompt_in_uneven_chunks() {
    Session session(runtime_, model_, f32_kv());
    std::vector<float> got;
    const std::span<const int32_t> ids(ref_.tokens);
    size_t at = 0;
    for (const size_t n : {size_t{1}, size_t{2}, size_t{5}, ids.size() - 8}) {
        const auto part = session.decode(ids.subspan(at, n), /*all_logits=*/true);
        ASSERT_EQ(part.size(), n * static_cast<size_t>(ref_.n_vocab));
        got.insert(got.end(), part.begin(), part.end());
        at += n;
    }
    ASSERT_EQ(at, ids.size());
    std::printf("%s in chunks 1, 2, 5, %zu: minimum cosine %.10f\n", family_.c_str(),
                ids.size() - 8, min_cosine(got));
}

std::unique_ptr<Runtime> StrictFamilyReference::opencl_runtime(std::string& why) const {
    RuntimeOptions o;
    o.manifest = tmp_.write("ocl.toml", "[device]\nname = \"" + family_ +
                                            " opencl\"\n[[backend]]\nplugin = "
                                            "\"opencl\"\n[[backend]]\nplugin = \"cpu\"\n");
    o.threads = 2;
    auto rt = std::make_unique<Runtime>(o);
    why = "the opencl plugin was not found";
    bool selected = false;
    for (const auto& c : rt->backend_choices()) {
        if (c.plugin != "opencl") continue;
        selected = c.selected;
        why = c.reason;
    }
    if (!selected) return nullptr;
    return rt;
}

}  // namespace dwell::test
