// The generation loop shared by hosts: feed the prompt, then sample and feed
// one token at a time, streaming each to a callback, until n_predict tokens,
// end of sequence, or the callback says stop.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "dwell/core/base/export.hpp"

namespace dwell {

class Session;
class Sampler;

struct GenerationStats {
    int32_t n_prompt = 0;
    int32_t n_generated = 0;
    double prompt_seconds = 0;      // time to evaluate the prompt
    double generation_seconds = 0;  // time for the rest
    bool stopped_at_eos = false;
    bool stopped_at_context = false;  // the session's context filled up

    double prompt_tokens_per_second() const {
        return prompt_seconds > 0 ? n_prompt / prompt_seconds : 0;
    }
    double generation_tokens_per_second() const {
        return generation_seconds > 0 ? n_generated / generation_seconds : 0;
    }
};

// An empty prompt continues from the session's last logits (throws if it
// has none). on_token returns false to stop early. As in llama.cpp, the last token
// handed to on_token is not yet in the session's KV cache: to continue the
// same conversation, feed it (with the next input) first.
DWELL_CORE_API GenerationStats generate(Session& session, std::span<const int32_t> prompt,
                                        int32_t n_predict, Sampler& sampler,
                                        const std::function<bool(int32_t token)>& on_token);

}  // namespace dwell
