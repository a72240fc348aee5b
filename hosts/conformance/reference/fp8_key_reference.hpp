// FP8_E4M3 key caches (sdk quant.h, ABI 1.4) written out again from the
// contract, for dwell-conformance and tests: offsets from the stored rows, the choice between the
// two neighbouring E4M3 values against the token's query, and decoding.
// Independent of the SDK's encoder: values come from the OCP formula and
// neighbours from a search over all 256 codes.
#ifndef DWELL_TEST_FP8_KEY_REFERENCE_HPP
#define DWELL_TEST_FP8_KEY_REFERENCE_HPP

#include <cmath>
#include <cstdint>
#include <vector>

#include "dwell/quant.h"

namespace dwell::test {

// The value of E4M3 code c (NaN codes excluded by callers).
inline double ref_fp8_value(uint8_t c) {
    const int e = (c >> 3) & 15, m = c & 7;
    const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
    return (c & 0x80) ? -v : v;
}

// The codes of the finite values just below and above r: one code when r is
// a value or beyond +-448; a zero takes r's sign.
inline std::vector<uint8_t> ref_fp8_bracket(float r) {
    int below = -1, above = -1;
    for (int c = 0; c < 256; ++c) {
        if ((c & 0x7f) == 0x7f || ((c & 0x7f) == 0 && (c == 0x80) != std::signbit(r))) continue;
        const double v = ref_fp8_value(static_cast<uint8_t>(c));
        if (v <= r && (below < 0 || v > ref_fp8_value(static_cast<uint8_t>(below)))) below = c;
        if (v >= r && (above < 0 || v < ref_fp8_value(static_cast<uint8_t>(above)))) above = c;
    }
    if (below < 0) return {static_cast<uint8_t>(above)};
    if (above < 0 || below == above) return {static_cast<uint8_t>(below)};
    return {static_cast<uint8_t>(below), static_cast<uint8_t>(above)};
}

// offset(pos): the float sum, in row order, of the decoded rows before pos's
// block of 16, over 16. rows[p] is the stored row of position p.
inline std::vector<float> ref_fp8_key_offset(const std::vector<std::vector<uint8_t>>& rows,
                                             int64_t pos, int64_t width) {
    std::vector<float> offset(static_cast<size_t>(width), 0.0f);
    for (int64_t p = 0; p < pos - pos % DWELL_FP8_KEY_BLOCK; ++p) {
        for (int64_t i = 0; i < width; ++i) {
            offset[static_cast<size_t>(i)] += static_cast<float>(
                ref_fp8_value(rows[static_cast<size_t>(p)][static_cast<size_t>(i)]));
        }
    }
    for (float& o : offset) o /= DWELL_FP8_KEY_BLOCK;
    return offset;
}

// The codes of one key row: per head of hd values, each value the neighbour
// of key - offset that keeps |sum q_i (value_i - r_i)| smallest so far (on a
// tie the nearer, then the even code). q holds, per value, the sum of the
// query heads reading its KV head; empty q: round to nearest.
inline std::vector<uint8_t> ref_fp8_key_codes(const float* key, const std::vector<float>& offset,
                                              const std::vector<float>& q, int64_t hd) {
    const size_t n = offset.size();
    std::vector<uint8_t> out(n);
    double err = 0;
    for (size_t i = 0; i < n; ++i) {
        if (i % static_cast<size_t>(hd) == 0) err = 0;
        const float r = key[i] - offset[i];
        const std::vector<uint8_t> cand = ref_fp8_bracket(r);
        const double qi = q.empty() ? 0.0 : q[i];
        uint8_t best = cand[0];
        double best_err = err + qi * (ref_fp8_value(best) - r);
        for (size_t c = 1; c < cand.size(); ++c) {
            const double e = err + qi * (ref_fp8_value(cand[c]) - r);
            const double dist = std::fabs(ref_fp8_value(cand[c]) - r);
            const double best_dist = std::fabs(ref_fp8_value(best) - r);
            const bool nearer = dist < best_dist || (dist == best_dist && (cand[c] & 1) == 0);
            if ((!q.empty() && std::fabs(e) < std::fabs(best_err)) ||
                ((q.empty() || std::fabs(e) == std::fabs(best_err)) && nearer)) {
                best = cand[c];
                best_err = e;
            }
        }
        out[i] = best;
        err = best_err;
    }
    return out;
}

// The sum of a token's query heads over each value of the key row it
// writes: q [hd, n_head] of one token, n_kv KV heads.
inline std::vector<float> ref_fp8_query_sums(const float* q, int64_t hd, int64_t n_head,
                                             int64_t n_kv) {
    const int64_t group = n_head / n_kv;
    std::vector<float> sums(static_cast<size_t>(hd * n_kv), 0.0f);
    for (int64_t h = 0; h < n_kv; ++h)
        for (int64_t d = 0; d < hd; ++d)
            for (int64_t hh = 0; hh < group; ++hh)
                sums[static_cast<size_t>(h * hd + d)] += q[(h * group + hh) * hd + d];
    return sums;
}

// The key of position pos as attention must see it: its codes plus offset.
inline std::vector<double> ref_fp8_key_decode(const std::vector<std::vector<uint8_t>>& rows,
                                              int64_t pos, int64_t width) {
    std::vector<double> key(static_cast<size_t>(width));
    for (int64_t i = 0; i < width; ++i) {
        key[static_cast<size_t>(i)] =
            ref_fp8_value(rows[static_cast<size_t>(pos)][static_cast<size_t>(i)]);
    }
    for (int64_t p = 0; p < pos - pos % DWELL_FP8_KEY_BLOCK; ++p) {
        for (int64_t i = 0; i < width; ++i) {
            key[static_cast<size_t>(i)] +=
                ref_fp8_value(rows[static_cast<size_t>(p)][static_cast<size_t>(i)]) /
                DWELL_FP8_KEY_BLOCK;
        }
    }
    return key;
}

}  // namespace dwell::test

#endif
