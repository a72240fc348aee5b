// The qwen2 and gemma plugins refuse malformed files with one line naming
// the file, the plugin and the key or tensor at fault: each case rewrites
// one metadata key (or drops one tensor) of a good synthetic file.
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "dwell/core/synthetic_model.hpp"
#include "integration_support.hpp"

namespace dwell::test {
namespace {

namespace fs = std::filesystem;

// small_model_spec() of the family in F32 (gemma with heads of 24).
fs::path write_family(const TempDir& dir, SyntheticFamily family) {
    SyntheticModelSpec s = small_model_spec();
    s.family = family;
    s.dtype = DWELL_F32;
    if (family == SyntheticFamily::gemma) s.head_dim = 24;
    const fs::path p = dir.path() / (std::string(synthetic_family_name(family)) + ".gguf");
    write_synthetic_model(s, p);
    return p;
}

struct Case {
    const char* name;
    SyntheticFamily family;
    std::string key;  // empty: no key changed
    std::optional<int32_t> value;
    std::string drop_tensor;
    std::string expected;
};

// ctest lists a parameter by this, not by its bytes.
void PrintTo(const Case& c, std::ostream* os) {
    *os << c.name;
}

class ModelFamilyMetadata : public ::testing::TestWithParam<Case> {};

TEST_P(ModelFamilyMetadata, IsRefusedInOneLineNamingTheKeyAtFault) {
    const Case& c = GetParam();
    TempDir dir;
    const fs::path good = write_family(dir, c.family);
    const fs::path bad = edited_gguf_copy(
        good, {.key = c.key, .value = c.value, .tensor = c.drop_tensor}, dir.path() / "bad.gguf");
    const std::string msg = model_load_error(bad);
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
    EXPECT_NE(msg.find(bad.string()), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

const std::string kQwen2Refused = "the qwen2 model plugin refused the model: ";
const std::string kGemmaRefused = "the gemma model plugin refused the model: ";

INSTANTIATE_TEST_SUITE_P(
    Cases, ModelFamilyMetadata,
    ::testing::Values(
        Case{"Qwen2BlockCountMissing", SyntheticFamily::qwen2, "qwen2.block_count", std::nullopt,
             "", kQwen2Refused + "metadata key qwen2.block_count is missing or not an integer"},
        Case{"Qwen2HeadsNotAMultipleOfKvHeads", SyntheticFamily::qwen2,
             "qwen2.attention.head_count_kv", 3, "",
             kQwen2Refused + "qwen2.attention.head_count (4) is not a multiple of "
                             "head_count_kv (3)"},
        Case{"Qwen2RopeNarrowerThanHead", SyntheticFamily::qwen2, "qwen2.rope.dimension_count", 8,
             "", kQwen2Refused + "qwen2.rope.dimension_count (8) must equal the head size (16)"},
        Case{"Qwen2BiasMissing", SyntheticFamily::qwen2, "", std::nullopt, "blk.1.attn_k.bias",
             "tensor 'blk.1.attn_k.bias' needed by the qwen2 model plugin is missing"},
        Case{"GemmaKeyLengthTooSmall", SyntheticFamily::gemma, "gemma.attention.key_length", 1, "",
             kGemmaRefused + "metadata key gemma.attention.key_length = 1 is outside 2..4096"},
        Case{"GemmaValueLengthDiffers", SyntheticFamily::gemma, "gemma.attention.value_length", 16,
             "", kGemmaRefused + "gemma.attention.value_length (16) differs from key_length (24)"},
        Case{"GemmaRopeWiderThanHead", SyntheticFamily::gemma, "gemma.rope.dimension_count", 30, "",
             kGemmaRefused + "metadata key gemma.rope.dimension_count = 30 is outside 2..24"},
        Case{"GemmaZeroWidth", SyntheticFamily::gemma, "gemma.embedding_length", 0, "",
             kGemmaRefused + "metadata key gemma.embedding_length = 0 is outside 1..1048576"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dwell::test
