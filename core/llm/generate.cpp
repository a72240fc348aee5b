#include "dwell/core/llm/generate.hpp"

#include <chrono>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/llm/sampler.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"

namespace dwell {

GenerationStats generate(Session& session, std::span<const int32_t> prompt, int32_t n_predict,
                         Sampler& sampler, const std::function<bool(int32_t)>& on_token) {
    using clock = std::chrono::steady_clock;
    GenerationStats stats;
    // No new tokens: continue from the logits the session already has (after
    // a restore, or a reply whose last token was fed).
    if (prompt.empty() && session.last_logits().empty())
        throw Error(DWELL_ERR_INVALID_ARGUMENT, "generate: the prompt has no tokens (add BOS)");
    const int32_t eos = session.model().tokenizer().eos();
    for (int32_t t : prompt) sampler.accept(t);

    auto t0 = clock::now();
    std::span<const float> logits = prompt.empty() ? session.last_logits() : session.decode(prompt);
    auto t1 = clock::now();
    stats.n_prompt = static_cast<int32_t>(prompt.size());
    stats.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();

    for (int32_t i = 0; i < n_predict; ++i) {
        const int32_t token = sampler.sample(logits);
        sampler.accept(token);
        if (token == eos) {
            stats.stopped_at_eos = true;
            break;
        }
        ++stats.n_generated;
        if (!on_token(token)) break;
        if (i + 1 == n_predict) break;
        if (session.n_past() >= session.n_ctx() && !session.shifts_context()) {
            stats.stopped_at_context = true;
            break;
        }
        const int32_t one[1] = {token};
        logits = session.decode(one);
    }
    stats.generation_seconds = std::chrono::duration<double>(clock::now() - t1).count();
    return stats;
}

}  // namespace dwell
