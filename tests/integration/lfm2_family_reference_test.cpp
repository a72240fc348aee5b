// The lfm2 plugin against llama.cpp v0.5.0 at the strictness the 2026
// families are held to (issue 23), on its synthetic file
// (family_reference_spec: six layers, attention at 2 and 5 between short
// convolutions of 3 taps, GQA with jittered QK-norms): every one of 48
// positions' logits within cosine 0.99999 of llama.cpp's, then 32 greedy
// tokens identical to llama.cpp's decoding one token per step, so each
// convolution runs from the state it carried out of the step before. The
// same prompt fed in uneven chunks gives the one-batch logits: the state
// crosses batches of any length.
#include <gtest/gtest.h>

#include "family_reference.hpp"

namespace dwell::test {
namespace {

class Lfm2FamilyReference : public StrictFamilyReference {
protected:
    Lfm2FamilyReference() : StrictFamilyReference("lfm2", SyntheticFamily::lfm2) {}
};

TEST_F(Lfm2FamilyReference, StrictLogitsAndGreedyDecodeOneTokenPerStepMatchLlamaCpp) {
    expect_strict_logits_and_greedy(runtime_, model_, "lfm2");
}

// Chunks of 1, 2 (shorter than the 2 state rows plus one), 5 and the rest.
TEST_F(Lfm2FamilyReference, PromptInUnevenChunksMatchesLlamaCpp) {
    expect_prompt_in_uneven_chunks();
}

}  // namespace
}  // namespace dwell::test
