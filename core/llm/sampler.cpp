// Token sampling. The pipeline order and penalty rule follow llama.cpp's
// classic sampler so that settings people already tune there mean the same
// thing here.
//
// Reproducibility: the only randomness is one uniform draw per token, built
// from the top 24 bits of mt19937_64 output. std::uniform_real_distribution is
// not specified bit-for-bit, so libstdc++ and libc++ (Android) would diverge.
#include "dwell/core/llm/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "dwell/core/base/error.hpp"
#include "dwell/status.h"

namespace dwell {
namespace {

[[noreturn]] void bad_param(const char* name, const std::string& value, const char* rule) {
    throw Error(DWELL_ERR_INVALID_ARGUMENT, std::string("sampler: ") + name + " = " + value +
                                                " is out of range (" + rule + ")");
}

std::string num(float v) {
    return std::to_string(v);
}

// Uniform in [0, 1): 24 random bits fill a float mantissa exactly, so every
// value is representable and the result never rounds up to 1.
float uniform01(std::mt19937_64& rng) {
    return static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
}

bool higher(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    // Ties go to the lower token id so greedy and top-k are deterministic.
    return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {
    // Written as !(ok) so that NaN fails every check.
    if (!(params.temperature >= 0.0f) || std::isinf(params.temperature))
        bad_param("temperature", num(params.temperature), "must be >= 0 and finite");
    if (!(params.top_p > 0.0f && params.top_p <= 1.0f))
        bad_param("top_p", num(params.top_p), "must be in (0, 1]");
    if (!(params.min_p >= 0.0f && params.min_p < 1.0f))
        bad_param("min_p", num(params.min_p), "must be in [0, 1)");
    if (!(params.repeat_penalty > 0.0f) || std::isinf(params.repeat_penalty))
        bad_param("repeat_penalty", num(params.repeat_penalty), "must be > 0 and finite");
    if (params.repeat_last_n < 0)
        bad_param("repeat_last_n", std::to_string(params.repeat_last_n), "must be >= 0");
}

void Sampler::accept(int32_t token) {
    if (params_.repeat_last_n <= 0) return;
    recent_.push_back(token);
    while (recent_.size() > static_cast<size_t>(params_.repeat_last_n)) recent_.pop_front();
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (logits.empty()) throw Error(DWELL_ERR_INVALID_ARGUMENT, "sampler: empty logits");
    const auto n = static_cast<int32_t>(logits.size());

    candidates_.resize(logits.size());
    for (int32_t i = 0; i < n; ++i) {
        // A NaN would break the strict weak ordering that sorting relies on
        // (undefined behaviour); treat it as a forbidden token instead.
        const float l = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
        candidates_[i] = {l, i};
    }

    if (params_.repeat_penalty != 1.0f && !recent_.empty()) {
        // Each distinct recent token is penalised once however often it
        // appeared, as in llama.cpp.
        penalized_.assign(recent_.begin(), recent_.end());
        std::sort(penalized_.begin(), penalized_.end());
        penalized_.erase(std::unique(penalized_.begin(), penalized_.end()), penalized_.end());
        for (int32_t t : penalized_) {
            if (t < 0 || t >= n) continue;
            float& l = candidates_[t].first;
            l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
        }
    }

    if (params_.temperature <= 0.0f) {
        return std::min_element(candidates_.begin(), candidates_.end(), higher)->second;
    }

    // Order matters only for top-k and top-p. Without them the vocabulary
    // (100k+ entries) is left unsorted, since a full sort per token costs
    // more than everything else here.
    size_t k = candidates_.size();
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < k) k = params_.top_k;
    bool sorted = false;
    if (k < candidates_.size()) {
        std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(), higher);
        candidates_.resize(k);
        sorted = true;
    } else if (params_.top_p < 1.0f) {
        std::sort(candidates_.begin(), candidates_.end(), higher);
        sorted = true;
    }

    const float max_logit =
        sorted ? candidates_.front().first
               : std::min_element(candidates_.begin(), candidates_.end(), higher)->first;
    if (max_logit == -std::numeric_limits<float>::infinity()) {
        // Every token is forbidden; exp would give 0/0. Fall back to greedy.
        return std::min_element(candidates_.begin(), candidates_.end(), higher)->second;
    }

    // Softmax with temperature, in place: first holds probabilities from now.
    double sum = 0.0;
    for (auto& c : candidates_) {
        c.first = std::exp((c.first - max_logit) / params_.temperature);
        sum += c.first;
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (auto& c : candidates_) c.first *= inv_sum;

    // top-p: smallest prefix whose mass reaches top_p (always at least one).
    if (params_.top_p < 1.0f) {
        double cum = 0.0;
        size_t keep = candidates_.size();
        for (size_t i = 0; i < candidates_.size(); ++i) {
            cum += candidates_[i].first;
            if (cum >= params_.top_p) {
                keep = i + 1;
                break;
            }
        }
        candidates_.resize(keep);
    }

    // min-p: drop tokens below min_p times the best probability. The best
    // token (probability inv_sum, as its exp term is 1) always survives.
    if (params_.min_p > 0.0f) {
        const float threshold = params_.min_p * inv_sum;
        std::erase_if(candidates_, [&](const auto& c) { return c.first < threshold; });
    }

    // Draw from what is left, renormalised by scaling the draw instead of
    // the probabilities.
    double mass = 0.0;
    for (const auto& c : candidates_) mass += c.first;
    const double r = static_cast<double>(uniform01(rng_)) * mass;
    double cum = 0.0;
    for (const auto& c : candidates_) {
        cum += c.first;
        if (r < cum) return c.second;
    }
    return candidates_.back().second;  // only reached through rounding
}

}  // namespace dwell
