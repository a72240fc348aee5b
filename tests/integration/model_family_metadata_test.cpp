// The qwen2, gemma, lfm2 and qwen35 plugins refuse malformed files with one line naming
// the file, the plugin and the key or tensor at fault: each case rewrites
// one metadata key (or drops one tensor) of a good synthetic file.
#include <gtest/gtest.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "dwell/tools/synthetic_model.hpp"
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
    if (family == SyntheticFamily::lfm2) s.n_layer = 3;    // conv, conv, attention
    if (family == SyntheticFamily::qwen35) s.n_layer = 4;  // three delta nets, attention
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
const std::string kLfm2Refused = "the lfm2 model plugin refused the model: ";
const std::string kQwen35Refused = "the qwen35 model plugin refused the model: ";

INSTANTIATE_TEST_SUITE_P(
    Cases, ModelFamilyMetadata,
    ::testing::Values(
        Case{"Qwen2BlockCountMissing", SyntheticFamily::qwen2, "qwen2.block_count", std::nullopt,
             "", kQwen2Refused + "metadata key qwen2.block_count is missing"},
        Case{"Qwen2HeadsNotAMultipleOfKvHeads", SyntheticFamily::qwen2,
             "qwen2.attention.head_count_kv", 3, "",
             kQwen2Refused + "qwen2.attention.head_count (4) is not a multiple of "
                             "head_count_kv (3)"},
        Case{"Qwen2RopeNarrowerThanHead", SyntheticFamily::qwen2, "qwen2.rope.dimension_count", 8,
             "", kQwen2Refused + "qwen2.rope.dimension_count (8) must equal the head size (16)"},
        Case{"Qwen2BiasMissing", SyntheticFamily::qwen2, "", std::nullopt, "blk.1.attn_k.bias",
             "tensor 'blk.1.attn_k.bias' needed by the qwen2 model plugin is missing"},
        // A key the plugin accepts but the file's tensors do not follow:
        // refused at load, both shapes named (small_model_spec: n_embd 64, n_ff 128).
        Case{"Qwen2FeedForwardDiffersFromTheTensors", SyntheticFamily::qwen2,
             "qwen2.feed_forward_length", 96, "",
             "tensor 'blk.0.ffn_gate.weight' has shape [64, 128], the model's metadata implies "
             "[64, 96]"},
        Case{"GemmaKeyLengthTooSmall", SyntheticFamily::gemma, "gemma.attention.key_length", 1, "",
             kGemmaRefused + "metadata key gemma.attention.key_length = 1 is outside 2..4096"},
        Case{"GemmaValueLengthDiffers", SyntheticFamily::gemma, "gemma.attention.value_length", 16,
             "", kGemmaRefused + "gemma.attention.value_length (16) differs from key_length (24)"},
        Case{"GemmaRopeWiderThanHead", SyntheticFamily::gemma, "gemma.rope.dimension_count", 30, "",
             kGemmaRefused + "metadata key gemma.rope.dimension_count = 30 is outside 2..24"},
        Case{"GemmaZeroWidth", SyntheticFamily::gemma, "gemma.embedding_length", 0, "",
             kGemmaRefused + "metadata key gemma.embedding_length = 0 is outside 1..1048576"},
        Case{"Lfm2LCacheMissing", SyntheticFamily::lfm2, "lfm2.shortconv.l_cache", std::nullopt, "",
             kLfm2Refused + "metadata key lfm2.shortconv.l_cache is missing"},
        Case{"Lfm2LCacheOutOfRange", SyntheticFamily::lfm2, "lfm2.shortconv.l_cache", 1, "",
             kLfm2Refused + "metadata key lfm2.shortconv.l_cache = 1 is outside 2..16"},
        Case{"Lfm2LCacheDiffersFromTheTaps", SyntheticFamily::lfm2, "lfm2.shortconv.l_cache", 4, "",
             "tensor 'blk.0.shortconv.conv.weight' has shape [3, 64], the model's metadata "
             "implies [4, 64]"},
        Case{"Lfm2KvHeadsNotPerLayer", SyntheticFamily::lfm2, "lfm2.attention.head_count_kv", 2, "",
             kLfm2Refused + "metadata key lfm2.attention.head_count_kv must be a per-layer array "
                            "(0 for the 2 short-convolution layers), it is an integer"},
        Case{"Lfm2LayerWithoutOperator", SyntheticFamily::lfm2, "", std::nullopt,
             "blk.1.shortconv.conv.weight",
             kLfm2Refused + "layer 1 has neither blk.1.shortconv.conv.weight nor "
                            "blk.1.attn_q.weight; an lfm2 layer is one or the other"},
        Case{"Lfm2InProjMissing", SyntheticFamily::lfm2, "", std::nullopt,
             "blk.0.shortconv.in_proj.weight",
             "tensor 'blk.0.shortconv.in_proj.weight' needed by the lfm2 model plugin is "
             "missing"},
        Case{"Qwen35StateSizeMissing", SyntheticFamily::qwen35, "qwen35.ssm.state_size",
             std::nullopt, "", kQwen35Refused + "metadata key qwen35.ssm.state_size is missing"},
        Case{"Qwen35ConvKernelOutOfRange", SyntheticFamily::qwen35, "qwen35.ssm.conv_kernel", 1, "",
             kQwen35Refused + "metadata key qwen35.ssm.conv_kernel = 1 is outside 2..16"},
        Case{"Qwen35ValueHeadsNotAMultipleOfKeyHeads", SyntheticFamily::qwen35,
             "qwen35.ssm.time_step_rank", 3, "",
             kQwen35Refused + "metadata key qwen35.ssm.time_step_rank (3 value heads) must be a "
                              "multiple of qwen35.ssm.group_count (2 key heads)"},
        Case{"Qwen35InnerSizeNotTheValueWidth", SyntheticFamily::qwen35, "qwen35.ssm.inner_size",
             100, "", kQwen35Refused + "metadata key qwen35.ssm.inner_size (100) must be"},
        Case{"Qwen35IntervalDisagreesWithTheLayers", SyntheticFamily::qwen35,
             "qwen35.full_attention_interval", 2, "",
             kQwen35Refused + "layer 1 is a delta-net layer, but qwen35.full_attention_interval "
                              "= 2 makes it an attention layer"},
        Case{"Qwen35LayerWithoutOperator", SyntheticFamily::qwen35, "", std::nullopt,
             "blk.1.ssm_conv1d.weight",
             kQwen35Refused + "layer 1 has neither blk.1.ssm_conv1d.weight nor "
                              "blk.1.attn_q.weight; a qwen35 layer is one or the other"}),
    [](const auto& info) { return std::string(info.param.name); });

// An optional key stored with another type than the plugin reads is an
// error naming the key and both types, never a silent fallback (the
// trained context of 2048 in place of the file's, say).
TEST(ModelFamilyMetadata, AnOptionalKeyOfTheWrongTypeIsRefusedNamingBothTypes) {
    TempDir dir;
    const fs::path good = write_family(dir, SyntheticFamily::llama);
    const std::pair<std::string, std::string> cases[] = {
        {"llama.context_length",
         "metadata key llama.context_length is not an integer (it is a string)"},
        {"llama.attention.head_count_kv",
         "metadata key llama.attention.head_count_kv is not an integer (it is a string)"},
        {"llama.rope.freq_base",
         "metadata key llama.rope.freq_base is not a number (it is a string)"},
        {"tokenizer.ggml.bos_token_id",
         "metadata key tokenizer.ggml.bos_token_id is not an integer (it is a string)"},
    };
    for (const auto& [key, expected] : cases) {
        const fs::path bad =
            edited_gguf_copy(good, {.key = key, .text = "128"}, dir.path() / "bad.gguf");
        const std::string msg = model_load_error(bad);
        EXPECT_NE(msg.find(expected), std::string::npos) << key << ": " << msg;
        EXPECT_NE(msg.find(bad.string()), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    // A string key stored as an integer is refused the same way.
    const fs::path bad = edited_gguf_copy(good, {.key = "llama.rope.scaling.type", .value = 1},
                                          dir.path() / "bad.gguf");
    EXPECT_NE(model_load_error(bad).find(
                  "metadata key llama.rope.scaling.type is not a string (it is an integer)"),
              std::string::npos)
        << model_load_error(bad);
}

// A file of an architecture no plugin serves lists each architecture once,
// with the plugins that serve it: the mixtral plugin serves "llama" files.
TEST(ModelFamilyMetadata, AnUnservedArchitectureListsEachServedOneOnceWithItsPlugins) {
    TempDir dir;
    const fs::path good = write_family(dir, SyntheticFamily::llama);
    const fs::path bad = edited_gguf_copy(good, {.key = "general.architecture", .text = "mixtral"},
                                          dir.path() / "bad.gguf");
    const std::string msg = model_load_error(bad);
    const std::string head = "architectures served: ";
    const size_t at = msg.find(head);
    ASSERT_NE(at, std::string::npos) << msg;
    const std::string list = msg.substr(at + head.size(), msg.find(';', at) - at - head.size());
    std::vector<std::string> archs;
    for (size_t pos = 0; pos < list.size();) {
        const size_t open = list.find(" (", pos);
        ASSERT_NE(open, std::string::npos) << list;
        archs.push_back(list.substr(pos, open - pos));
        const size_t close = list.find(')', open);
        ASSERT_NE(close, std::string::npos) << list;
        pos = close + 1;
        if (list.compare(pos, 2, ", ") == 0) pos += 2;
    }
    EXPECT_EQ(archs, (std::vector<std::string>{"gemma", "gemma2", "gemma3", "lfm2", "llama", "phi3",
                                               "qwen2", "qwen3", "qwen35", "qwen3moe", "smollm3"}))
        << msg;
    EXPECT_NE(list.find("mixtral"), std::string::npos) << msg;  // the plugin, named
}

// YaRN's keys, read by the kit for every family: an unknown scaling type, a
// factor below 1 and a missing original context are each refused in one
// line naming the key (and the value); the good file loads.
TEST(ModelFamilyMetadata, YarnScalingKeysAreRangeCheckedNamingTheKey) {
    TempDir dir;
    SyntheticModelSpec s = small_model_spec();
    s.family = SyntheticFamily::qwen3;
    s.dtype = DWELL_F32;
    s.rms_eps = 1e-6f;
    s.n_ctx_orig = s.n_ctx / 4;
    s.yarn_factor = 4.0f;
    const fs::path good = dir.path() / "qwen3-yarn.gguf";
    write_synthetic_model(s, good);
    ASSERT_EQ(model_load_error(good), "");
    const std::string refused = "the qwen3 model plugin refused the model: ";
    const std::pair<GgufEdit, std::string> cases[] = {
        {{.key = "qwen3.rope.scaling.type", .text = "dynamic"},
         refused + "metadata key qwen3.rope.scaling.type = 'dynamic' is not supported (none, "
                   "linear, longrope and yarn are)"},
        {{.key = "qwen3.rope.scaling.factor", .value = 0},
         refused + "metadata key qwen3.rope.scaling.factor = 0.000000 is out of range (1 to "
                   "1e6)"},
        {{.key = "qwen3.rope.scaling.factor"},
         refused + "metadata key qwen3.rope.scaling.factor is missing; YaRN needs it"},
        {{.key = "qwen3.rope.scaling.original_context_length"},
         refused + "metadata key qwen3.rope.scaling.original_context_length is missing; YaRN "
                   "needs it"},
        {{.key = "qwen3.rope.scaling.original_context_length", .value = 0},
         refused + "metadata key qwen3.rope.scaling.original_context_length = 0 is outside "
                   "1..16777216"},
        {{.key = "qwen3.rope.scaling.yarn_ext_factor", .value = 2},
         refused + "metadata key qwen3.rope.scaling.yarn_ext_factor = 2.000000 is out of range "
                   "(0 to 1)"},
        {{.key = "qwen3.rope.scaling.yarn_beta_fast", .value = -32},
         refused + "metadata key qwen3.rope.scaling.yarn_beta_fast = -32.000000 is out of range "
                   "(1e-3 to 1e6)"},
    };
    for (const auto& [edit, expected] : cases) {
        const fs::path bad = edited_gguf_copy(good, edit, dir.path() / "bad.gguf");
        const std::string msg = model_load_error(bad);
        EXPECT_NE(msg.find(expected), std::string::npos) << edit.key << ": " << msg;
        EXPECT_NE(msg.find(bad.string()), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

}  // namespace
}  // namespace dwell::test
