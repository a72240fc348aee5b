#include "dwell/core/llm/text_generation.hpp"

#include <algorithm>

#include "dwell/core/model/model.hpp"
#include "dwell/core/session/session.hpp"
#include "dwell/core/text/tokenizer.hpp"

namespace dwell {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::Stop:
            return "stop";
        case FinishReason::Length:
            return "length";
        case FinishReason::Deadline:
            return "deadline";
        case FinishReason::Disconnected:
            return "disconnected";
    }
    return "stop";
}

size_t stop_prefix_length(std::string_view text, const std::vector<std::string>& stop) {
    size_t hold = 0;
    for (const std::string& s : stop) {
        for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), text.size()); n > hold; --n) {
            if (text.substr(text.size() - n) == std::string_view(s).substr(0, n)) {
                hold = n;
                break;
            }
        }
    }
    return hold;
}

TextResult generate_text(Session& session, const TextRequest& request,
                         const std::function<bool(std::string_view)>& on_delta) {
    TextResult result;
    const Tokenizer& tok = session.model().tokenizer();
    StreamDecoder decoder(tok, false);
    std::string all;  // every byte decoded so far
    size_t sent = 0;  // bytes of `all` handed to on_delta
    bool done = false;
    Sampler sampler(request.sampling);

    // Finds a stop string in the unsent text (one may straddle the held-back
    // tail and the new piece); returns where it starts.
    const auto find_stop = [&]() -> std::optional<size_t> {
        std::optional<size_t> first;
        const size_t from = sent;
        for (const std::string& s : request.stop) {
            if (s.empty()) continue;
            const size_t at = all.find(s, from);
            if (at != std::string::npos && (!first || at < *first)) first = at;
        }
        return first;
    };
    const auto emit = [&](size_t upto) {
        if (upto <= sent) return true;
        const bool listening = on_delta(std::string_view(all).substr(sent, upto - sent));
        sent = upto;
        return listening;
    };

    const int32_t limit = std::max(request.max_tokens, 0);
    if (limit == 0) {
        result.finish = FinishReason::Length;
        return result;
    }
    result.stats = generate(session, request.prompt, limit, sampler, [&](int32_t token) {
        if (std::find(request.stop_tokens.begin(), request.stop_tokens.end(), token) !=
            request.stop_tokens.end()) {
            // like EOS: the turn is over; the token stays out of the text
            result.pending_token = -1;
            result.finish = FinishReason::Stop;
            emit(all.size());
            done = true;
            return false;
        }
        result.pending_token = token;
        ++result.completion_tokens;
        all += decoder.push(token);
        if (const auto at = find_stop()) {
            emit(*at);
            all.resize(*at);
            result.finish = FinishReason::Stop;
            done = true;
            return false;
        }
        if (!emit(all.size() -
                  stop_prefix_length(std::string_view(all).substr(sent), request.stop))) {
            result.finish = FinishReason::Disconnected;
            done = true;
            return false;
        }
        if (request.deadline && std::chrono::steady_clock::now() >= *request.deadline) {
            result.finish = FinishReason::Deadline;
            done = true;
            return false;
        }
        return true;
    });
    result.prompt_tokens = result.stats.n_prompt;
    if (!done) {
        all += decoder.finish();
        if (const auto at = find_stop()) {
            all.resize(*at);
            result.finish = FinishReason::Stop;
        } else {
            result.finish = result.stats.stopped_at_eos ? FinishReason::Stop : FinishReason::Length;
        }
        emit(all.size());
    }
    if (result.stats.stopped_at_eos) result.pending_token = -1;
    result.text = std::move(all);
    return result;
}

}  // namespace dwell
