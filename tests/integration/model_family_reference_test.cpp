// Each model family's plugin against llama.cpp on the same file: the
// generator writes a small synthetic GGUF of the family with a fixed seed,
// dwell (cpu backend, F32 KV cache) evaluates the token ids recorded in
// tests/data/families/<family>.logits with logits at every position, and
// every position's logits must have cosine similarity >= 0.999 with the
// ones llama.cpp computed on that file (see tests/data/families/README.md).
// The file's sha256 is recorded with the logits, so a generator change is
// reported as such rather than as a plugin bug.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/tools/synthetic_model.hpp"
#include "family_reference.hpp"
#include "integration_support.hpp"

namespace dwell {
// ctest lists a family by its name, not by its bytes.
inline void PrintTo(SyntheticFamily f, std::ostream* os) {
    *os << synthetic_family_name(f);
}
}  // namespace dwell

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

double stddev(const float* a, int64_t n) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) {
        sum += a[i];
        sq += double(a[i]) * a[i];
    }
    const double mean = sum / double(n);
    return std::sqrt(std::max(0.0, sq / double(n) - mean * mean));
}

class ModelFamilyReference : public ::testing::TestWithParam<SyntheticFamily> {};

TEST_P(ModelFamilyReference, LogitsMatchLlamaCppAtEveryPosition) {
    const SyntheticFamily family = GetParam();
    const std::string name = synthetic_family_name(family);
    const fs::path plugin = fs::path(DWELL_TEST_PLUGIN_DIR) / ("libdwell-" + name + ".so");
    if (family != SyntheticFamily::llama && family != SyntheticFamily::qwen2 &&
        family != SyntheticFamily::gemma && !fs::exists(plugin))
        GTEST_SKIP() << "the " << name << " model plugin is not built (" << plugin.string() << ")";

    // Kept when asked, to recompute the reference (tests/data/families/README.md).
    TempDir tmp;
    const char* keep = std::getenv("DWELL_FAMILY_GGUF_DIR");
    const fs::path gguf = (keep && *keep ? fs::path(keep) : tmp.path()) / (name + ".gguf");
    write_synthetic_model(family_reference_spec(family), gguf);

    const fs::path data =
        fs::path(DWELL_TEST_SOURCE_DIR) / "tests" / "data" / "families" / (name + ".logits");
    const FamilyReference ref = read_family_reference(data);
    ASSERT_EQ(sha256_of(gguf), ref.sha256)
        << "generator changed: recompute tests/data/families/" << name
        << ".logits with llama.cpp as tests/data/families/README.md says";

    Runtime runtime;
    auto model = Model::load(runtime, gguf);
    ASSERT_EQ(model->plugin().name(), name);
    ASSERT_EQ(model->info().n_vocab, ref.n_vocab);
    SessionOptions so;
    so.kv_dtype = DWELL_F32;
    Session session(runtime, model, so);
    const auto got = session.decode(ref.tokens, /*all_logits=*/true);
    ASSERT_EQ(static_cast<int64_t>(got.size()), ref.n_pos * ref.n_vocab);

    double min_cos = 1.0, min_std = 1e30;
    for (int64_t p = 0; p < ref.n_pos; ++p) {
        const float* want = ref.logits.data() + p * ref.n_vocab;
        const double c = logits_cosine(got.data() + p * ref.n_vocab, want, ref.n_vocab);
        EXPECT_GE(c, 0.999) << name << ": position " << p << " (token " << ref.tokens[p] << ")";
        min_cos = std::min(min_cos, c);
        min_std = std::min(min_std, stddev(want, ref.n_vocab));
    }
    // A near-constant logit vector would make the cosine meaningless.
    EXPECT_GT(min_std, 0.1) << name << ": the reference logits hardly vary";
    std::printf("%s: minimum cosine over %lld positions %.8f (smallest logit std %.3f)\n",
                name.c_str(), static_cast<long long>(ref.n_pos), min_cos, min_std);
}

INSTANTIATE_TEST_SUITE_P(Families, ModelFamilyReference,
                         ::testing::Values(SyntheticFamily::llama, SyntheticFamily::qwen2,
                                           SyntheticFamily::gemma, SyntheticFamily::mixtral,
                                           SyntheticFamily::qwen3, SyntheticFamily::qwen3moe,
                                           SyntheticFamily::smollm3, SyntheticFamily::gemma2,
                                           SyntheticFamily::gemma3, SyntheticFamily::lfm2,
                                           SyntheticFamily::qwen35),
                         [](const auto& info) { return synthetic_family_name(info.param); });

}  // namespace
}  // namespace dwell::test
