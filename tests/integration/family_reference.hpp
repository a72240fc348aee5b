// llama.cpp's reference logits of the synthetic model families
// (tests/data/families/README.md: the `dwell-logits 1` format, with the
// `greedy` lines logits_dump --greedy writes), and the comparisons every
// family's reference test makes with them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace dwell::test {

struct FamilyReference {
    std::string sha256;  // of the GGUF the logits were computed on
    int64_t n_pos = 0;
    int64_t n_vocab = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> greedy;  // llama.cpp's greedy continuation, one token per step
    double greedy_min_margin = 0;
    std::vector<float> logits;  // [n_pos][n_vocab]
};

// Throws std::runtime_error naming the file when it is missing, its header
// malformed or its logits short.
FamilyReference read_family_reference(const std::filesystem::path& path);

// tests/data/families/<family>.logits in the source tree.
std::filesystem::path family_reference_path(const std::string& family);

// Cosine similarity of two logit rows, in double.
double logits_cosine(const float* a, const float* b, int64_t n);

// The lowest id among the largest logits, as logits_dump breaks ties.
int32_t greedy_argmax(std::span<const float> logits);

}  // namespace dwell::test
