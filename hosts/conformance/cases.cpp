// The conformance cases and their double-precision references (cases.hpp).
#include "cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "dwell/quant.h"
#include "fp8_key_reference.hpp"

namespace dwell::conformance {

using namespace dwell::test;

// ---------------------------------------------------------------------------
// References

std::vector<double> decode_rows(OpTestGraph& g, int id) {
    const dwell_tensor& t = g.t(id);
    std::vector<double> out;
    for (int64_t r = 0; r < dwell_tensor_nrows(&t); ++r) {
        const std::vector<double> row = ref_decode_row(t.dtype, g.row(id, r), t.ne[0]);
        out.insert(out.end(), row.begin(), row.end());
    }
    return out;
}

namespace {

std::vector<double> to_double(const std::vector<float>& v) {
    return {v.begin(), v.end()};
}

// Causal GQA attention in double: token t (position n_old + t) of query
// q [hd, nh, T] over key and value rows 0..n_old + t (by position); with a
// window w > 0 only rows n_old + t - w + 1.. (ABI 1.5), with a soft-cap
// c > 0 each scaled score s is c * tanh(s / c).
std::vector<double> ref_attention(const std::vector<float>& q,
                                  const std::vector<std::vector<double>>& keys,
                                  const std::vector<std::vector<double>>& values, int64_t hd,
                                  int64_t nh, int64_t nkv, int64_t T, int64_t n_old, float scale,
                                  int64_t window = 0, double cap = 0) {
    std::vector<double> want(static_cast<size_t>(hd * nh * T));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < nh; ++h) {
            const int64_t gk = h / (nh / nkv);
            const auto n_keys = static_cast<size_t>(n_old + t + 1);
            const size_t first =
                window > 0 ? static_cast<size_t>(std::max<int64_t>(0, n_old + t + 1 - window)) : 0;
            std::vector<double> s(n_keys, 0.0);
            double mx = -1e300;
            for (size_t j = first; j < n_keys; ++j) {
                double d = 0;
                for (int64_t i = 0; i < hd; ++i)
                    d += q[static_cast<size_t>((t * nh + h) * hd + i)] *
                         keys[j][static_cast<size_t>(gk * hd + i)];
                s[j] = d * scale;
                if (cap > 0) s[j] = cap * std::tanh(s[j] / cap);
                mx = std::max(mx, s[j]);
            }
            double sum = 0;
            for (size_t j = first; j < n_keys; ++j) sum += (s[j] = std::exp(s[j] - mx));
            for (int64_t i = 0; i < hd; ++i) {
                double o = 0;
                for (size_t j = first; j < n_keys; ++j)
                    o += s[j] / sum * values[j][static_cast<size_t>(gk * hd + i)];
                want[static_cast<size_t>((t * nh + h) * hd + i)] = o;
            }
        }
    return want;
}

// A value rounded to the cache dtype the way the contract stores it.
std::vector<double> round_to_cache(dwell_dtype t, const std::vector<float>& row) {
    std::vector<double> out(row.size());
    if (t == DWELL_F32) return to_double(row);
    if (t == DWELL_F16) {
        for (size_t i = 0; i < row.size(); ++i) out[i] = ref_half(dwell_fp32_to_fp16(row[i]));
        return out;
    }
    if (t == DWELL_FP8_E4M3) {
        for (size_t i = 0; i < row.size(); ++i)
            out[i] = dwell_fp8_e4m3_to_fp32(dwell_fp32_to_fp8_e4m3(row[i]));
        return out;
    }
    // Q8_0: d = max|x| / 127 per block of 32 (stored as fp16), q = round(x / d).
    for (size_t b = 0; b < row.size(); b += 32) {
        double amax = 0;
        for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(double(row[i])));
        const double d = ref_half(dwell_fp32_to_fp16(static_cast<float>(amax / 127.0)));
        const double id = amax > 0 ? 127.0 / amax : 0.0;
        for (size_t i = b; i < b + 32; ++i) out[i] = d * std::nearbyint(row[i] * id);
    }
    return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// Cases

namespace {

// GET_ROWS and MATMUL over every weight dtype.
void add_weight_cases(std::vector<Case>& cases) {
    const dwell_dtype weight_types[] = {DWELL_F32,  DWELL_F16,  DWELL_BF16, DWELL_Q8_0, DWELL_Q4_0,
                                        DWELL_Q4_1, DWELL_Q5_0, DWELL_Q5_1, DWELL_Q4_K, DWELL_Q5_K,
                                        DWELL_Q6_K, DWELL_I4_G, DWELL_I6_G, DWELL_I8_C};
    for (const dwell_dtype wt : weight_types) {
        const std::string tn = dwell_dtype_name(wt);
        cases.push_back({"get_rows_" + tn,
                         [wt](OpTestGraph& g) {
                             const int table = g.tensor(wt, {256, 9});
                             g.set_raw_rows(table, random_weight_rows(wt, 256, 9, 3));
                             const int ids = g.tensor(DWELL_I32, {4});
                             g.set<int32_t>(ids, {8, 0, 3, 3});
                             const int out = g.tensor(DWELL_F32, {256, 4});
                             g.node(DWELL_OP_GET_ROWS, out, {table, ids});
                             const std::vector<double> all = decode_rows(g, table);
                             std::vector<double> want;
                             for (int r : {8, 0, 3, 3})
                                 want.insert(want.end(), all.begin() + r * 256,
                                             all.begin() + (r + 1) * 256);
                             return want;
                         },
                         1e-6});
        for (const int64_t m : {1, 5}) {
            // Quantized weights meet activations quantized to 8 bits on the
            // cpu, hence the looser bound (relative to the largest output).
            const bool exact = wt == DWELL_F32;
            const double tol = exact ? 1e-5 : wt == DWELL_F16 || wt == DWELL_BF16 ? 4e-3 : 3e-2;
            cases.push_back({"matmul_" + tn + "_m" + std::to_string(m),
                             [wt, m](OpTestGraph& g) {
                                 const int64_t k = 256, n = 24;
                                 const int w = g.tensor(wt, {k, n});
                                 g.set_raw_rows(w, random_weight_rows(wt, k, n, 5));
                                 const int x = g.tensor(DWELL_F32, {k, m});
                                 const std::vector<float> xv =
                                     random_floats(static_cast<size_t>(k * m), 6);
                                 g.set(x, xv);
                                 const int out = g.tensor(DWELL_F32, {n, m});
                                 g.node(DWELL_OP_MATMUL, out, {w, x});
                                 const std::vector<double> wd = decode_rows(g, w);
                                 std::vector<double> want(static_cast<size_t>(n * m));
                                 for (int64_t r = 0; r < m; ++r)
                                     for (int64_t c = 0; c < n; ++c) {
                                         double s = 0;
                                         for (int64_t i = 0; i < k; ++i)
                                             s += wd[c * k + i] * xv[r * k + i];
                                         want[r * n + c] = s;
                                     }
                                 return want;
                             },
                             tol});
        }
    }
}

// ADD and MUL (same shape and one broadcast row), the unary ops, SWIGLU.
void add_elementwise_cases(std::vector<Case>& cases) {
    for (const bool broadcast : {false, true}) {
        for (const dwell_op op : {DWELL_OP_ADD, DWELL_OP_MUL}) {
            cases.push_back({std::string(dwell_op_name(op)) + (broadcast ? "_row" : "_same"),
                             [op, broadcast](OpTestGraph& g) {
                                 const int a = g.tensor(DWELL_F32, {64, 6});
                                 const int b = g.tensor(DWELL_F32, {64, broadcast ? 1 : 6});
                                 const auto av = random_floats(64 * 6, 7);
                                 const auto bv = random_floats(broadcast ? 64 : 64 * 6, 8);
                                 g.set(a, av);
                                 g.set(b, bv);
                                 const int out = g.tensor(DWELL_F32, {64, 6});
                                 g.node(op, out, {a, b});
                                 std::vector<double> want(av.size());
                                 for (size_t i = 0; i < av.size(); ++i) {
                                     const double y = bv[broadcast ? i % 64 : i];
                                     want[i] = op == DWELL_OP_ADD ? av[i] + y : double(av[i]) * y;
                                 }
                                 return want;
                             },
                             1e-6});
        }
    }
    const auto unary = [&](const std::string& name, dwell_op op, float param,
                           std::function<double(double)> f, double tol) {
        cases.push_back({name,
                         [=](OpTestGraph& g) {
                             const int a = g.tensor(DWELL_F32, {64, 6});
                             const auto av = random_floats(64 * 6, 9, -4, 4);
                             g.set(a, av);
                             const int out = g.tensor(DWELL_F32, {64, 6});
                             g.node(op, out, {a}, {}, {param});
                             std::vector<double> want(av.size());
                             for (size_t i = 0; i < av.size(); ++i) want[i] = f(av[i]);
                             return want;
                         },
                         tol});
    };
    unary(
        "scale", DWELL_OP_SCALE, 0.37f, [](double x) { return x * double(0.37f); }, 1e-6);
    unary(
        "silu", DWELL_OP_SILU, 0, [](double x) { return x / (1 + std::exp(-x)); }, 1e-5);
    unary(
        "gelu", DWELL_OP_GELU, 0,
        [](double x) {
            return 0.5 * x * (1 + std::tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
        },
        1e-4);
    // SOFTCAP (ABI 1.5): inputs up to 4 against a cap of 1.5, so it bites.
    unary(
        "softcap", DWELL_OP_SOFTCAP, 1.5f, [](double x) { return 1.5 * std::tanh(x / 1.5); }, 1e-6);
    // SIGMOID and SOFTPLUS (ABI 1.7), the delta nets' beta and decay.
    unary(
        "sigmoid", DWELL_OP_SIGMOID, 0, [](double x) { return 1 / (1 + std::exp(-x)); }, 1e-6);
    unary(
        "softplus", DWELL_OP_SOFTPLUS, 0, [](double x) { return std::log1p(std::exp(x)); }, 1e-6);
    // SPARSIFY (ABI 1.9): the floor(0.4 * 96) smallest |x| of each row
    // zeroed, ties (equal magnitudes of both signs) to the lower index; then
    // the threshold form.
    for (const bool threshold : {false, true}) {
        cases.push_back(
            {threshold ? "sparsify_threshold" : "sparsify_fraction",
             [threshold](OpTestGraph& g) {
                 const int n = 96, rows = 3;
                 const int a = g.tensor(DWELL_F32, {n, rows});
                 auto av = random_floats(n * rows, 19, -2, 2);
                 av[5] = 0.25f;
                 av[6] = -0.25f;
                 av[7] = 0.25f;
                 g.set(a, av);
                 const int out = g.tensor(DWELL_F32, {n, rows});
                 const float p = threshold ? 0.5f : 0.4f;
                 g.node(DWELL_OP_SPARSIFY, out, {a},
                        {threshold ? DWELL_SPARSIFY_THRESHOLD : DWELL_SPARSIFY_FRACTION}, {p});
                 std::vector<double> want(av.begin(), av.end());
                 for (int r = 0; r < rows; ++r) {
                     std::vector<int> order(n);
                     for (int i = 0; i < n; ++i) order[i] = i;
                     std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
                         return std::fabs(av[r * n + x]) < std::fabs(av[r * n + y]);
                     });
                     const int z = threshold ? 0 : static_cast<int>(0.4 * n);
                     for (int i = 0; i < z; ++i) want[r * n + order[i]] = 0;
                     if (threshold)
                         for (int i = 0; i < n; ++i)
                             if (std::fabs(av[r * n + i]) < p) want[r * n + i] = 0;
                 }
                 return want;
             },
             0});
    }
    // SLICE (ABI 1.7): columns 21..41 of rows of 64, in three dims.
    cases.push_back({"slice_cols",
                     [](OpTestGraph& g) {
                         const int a = g.tensor(DWELL_F32, {64, 3, 2});
                         const auto av = random_floats(64 * 6, 12, -4, 4);
                         g.set(a, av);
                         const int out = g.tensor(DWELL_F32, {21, 3, 2});
                         g.node(DWELL_OP_SLICE, out, {a}, {21, 21});
                         std::vector<double> want;
                         for (int r = 0; r < 6; ++r)
                             for (int i = 0; i < 21; ++i) want.push_back(av[r * 64 + 21 + i]);
                         return want;
                     },
                     0});
    cases.push_back(
        {"swiglu",
         [](OpTestGraph& g) {
             const int a = g.tensor(DWELL_F32, {64, 6}), b = g.tensor(DWELL_F32, {64, 6});
             const auto av = random_floats(64 * 6, 10, -4, 4);
             const auto bv = random_floats(64 * 6, 11);
             g.set(a, av);
             g.set(b, bv);
             const int out = g.tensor(DWELL_F32, {64, 6});
             g.node(DWELL_OP_SWIGLU, out, {a, b});
             std::vector<double> want(av.size());
             for (size_t i = 0; i < av.size(); ++i)
                 want[i] = av[i] / (1 + std::exp(-double(av[i]))) * bv[i];
             return want;
         },
         1e-5});
}

// RMS_NORM, LAYER_NORM and SOFTMAX.
void add_norm_cases(std::vector<Case>& cases) {
    for (const dwell_op op : {DWELL_OP_RMS_NORM, DWELL_OP_LAYER_NORM, DWELL_OP_SOFTMAX}) {
        cases.push_back({dwell_op_name(op),
                         [op](OpTestGraph& g) {
                             const int64_t n = 96, rows = 5;
                             const int a = g.tensor(DWELL_F32, {n, rows});
                             const auto av =
                                 random_floats(static_cast<size_t>(n * rows), 12, -3, 3);
                             g.set(a, av);
                             const int out = g.tensor(DWELL_F32, {n, rows});
                             g.node(op, out, {a}, {}, {1e-5f});
                             std::vector<double> want(av.size());
                             for (int64_t r = 0; r < rows; ++r) {
                                 const float* x = av.data() + r * n;
                                 double mean = 0, sq = 0, mx = -1e300;
                                 for (int64_t i = 0; i < n; ++i) {
                                     mean += x[i] / double(n);
                                     sq += double(x[i]) * x[i] / double(n);
                                     mx = std::max(mx, double(x[i]));
                                 }
                                 double sum = 0;
                                 for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
                                 for (int64_t i = 0; i < n; ++i) {
                                     double v;
                                     if (op == DWELL_OP_RMS_NORM) {
                                         v = x[i] / std::sqrt(sq + 1e-5);
                                     } else if (op == DWELL_OP_LAYER_NORM) {
                                         v = (x[i] - mean) / std::sqrt(sq - mean * mean + 1e-5);
                                     } else {
                                         v = std::exp(x[i] - mx) / sum;
                                     }
                                     want[static_cast<size_t>(r * n + i)] = v;
                                 }
                             }
                             return want;
                         },
                         1e-5});
    }
}

// ROPE, both modes.
void add_rope_cases(std::vector<Case>& cases) {
    for (const int mode : {DWELL_ROPE_NORM, DWELL_ROPE_NEOX}) {
        for (const int n_rot : {32, 16}) {
            cases.push_back(
                {std::string("rope_") + (mode == DWELL_ROPE_NEOX ? "neox" : "norm") + "_rot" +
                     std::to_string(n_rot),
                 [mode, n_rot](OpTestGraph& g) {
                     const int64_t hd = 32, nh = 4, T = 3;
                     const int x = g.tensor(DWELL_F32, {hd, nh, T});
                     const auto xv = random_floats(static_cast<size_t>(hd * nh * T), 13);
                     g.set(x, xv);
                     const int pos = g.tensor(DWELL_I32, {T});
                     const std::vector<int32_t> pv = {0, 7, 130};
                     g.set<int32_t>(pos, pv);
                     const int out = g.tensor(DWELL_F32, {hd, nh, T});
                     g.node(DWELL_OP_ROPE, out, {x, pos}, {mode, n_rot}, {10000.0f, 1.0f});
                     std::vector<double> want = to_double(xv);
                     for (int64_t t = 0; t < T; ++t)
                         for (int64_t h = 0; h < nh; ++h) {
                             const int64_t o = (t * nh + h) * hd;
                             for (int i = 0; i < n_rot / 2; ++i) {
                                 const double theta = pv[static_cast<size_t>(t)] *
                                                      std::pow(10000.0, -2.0 * i / n_rot);
                                 const int64_t a = mode == DWELL_ROPE_NEOX ? i : 2 * i;
                                 const int64_t b =
                                     mode == DWELL_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
                                 const double x0 = xv[o + a], x1 = xv[o + b];
                                 want[o + a] = x0 * std::cos(theta) - x1 * std::sin(theta);
                                 want[o + b] = x0 * std::sin(theta) + x1 * std::cos(theta);
                             }
                         }
                     return want;
                 },
                 // theta up to 130 rad in float: the angle itself rounds.
                 2e-4});
        }
    }
}

// ROPE with frequency factors and an attention factor (ABI 1.5).
void add_rope_factor_cases(std::vector<Case>& cases) {
    // ROPE with ABI 1.5's frequency factors (in2) and attention factor
    // (fparams[2]), over a partial rotation (n_rot 16 of 32) as LongRoPE
    // models have it.
    for (const int mode : {DWELL_ROPE_NORM, DWELL_ROPE_NEOX}) {
        cases.push_back({std::string("rope_factors_") + (mode == DWELL_ROPE_NEOX ? "neox" : "norm"),
                         [mode](OpTestGraph& g) {
                             const int64_t hd = 32, nh = 2, T = 3;
                             const int n_rot = 16;
                             const float base = 500000.0f, scale = 0.5f, attn_factor = 1.19f;
                             const int x = g.tensor(DWELL_F32, {hd, nh, T});
                             const auto xv = random_floats(static_cast<size_t>(hd * nh * T), 31);
                             g.set(x, xv);
                             const int pos = g.tensor(DWELL_I32, {T});
                             const std::vector<int32_t> pv = {0, 5, 97};
                             g.set<int32_t>(pos, pv);
                             const int ff = g.tensor(DWELL_F32, {n_rot / 2});
                             std::vector<float> fv(n_rot / 2);
                             for (size_t i = 0; i < fv.size(); ++i)
                                 fv[i] = 1.0f + 3.5f * float(i * i) / 49.0f;
                             g.set(ff, fv);
                             const int out = g.tensor(DWELL_F32, {hd, nh, T});
                             g.node(DWELL_OP_ROPE, out, {x, pos, ff}, {mode, n_rot},
                                    {base, scale, attn_factor});
                             std::vector<double> want = to_double(xv);
                             for (int64_t t = 0; t < T; ++t)
                                 for (int64_t h = 0; h < nh; ++h) {
                                     const int64_t o = (t * nh + h) * hd;
                                     for (int i = 0; i < n_rot / 2; ++i) {
                                         const double theta =
                                             scale * pv[static_cast<size_t>(t)] *
                                             std::pow(double(base), -2.0 * i / n_rot) /
                                             fv[static_cast<size_t>(i)];
                                         const int64_t a = mode == DWELL_ROPE_NEOX ? i : 2 * i;
                                         const int64_t b =
                                             mode == DWELL_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
                                         const double c = attn_factor * std::cos(theta);
                                         const double sn = attn_factor * std::sin(theta);
                                         const double x0 = xv[o + a], x1 = xv[o + b];
                                         want[o + a] = x0 * c - x1 * sn;
                                         want[o + b] = x0 * sn + x1 * c;
                                     }
                                 }
                             return want;
                         },
                         2e-4});
    }
}

// ATTENTION: hd 32, 4 query heads over 2 KV heads, 3 new tokens at
// positions 2..4 after two cached ones; contiguous and paged caches.
void add_attention_cases(std::vector<Case>& cases) {
    const dwell_dtype cache_types[] = {DWELL_F32, DWELL_F16, DWELL_Q8_0, DWELL_FP8_E4M3};
    for (const dwell_dtype ct : cache_types) {
        for (const bool paged : {false, true}) {
            const double tol = ct == DWELL_F32 ? 1e-5 : ct == DWELL_F16 ? 3e-3 : 3e-2;
            cases.push_back(
                {std::string("attention_") + dwell_dtype_name(ct) + (paged ? "_paged" : ""),
                 [ct, paged](OpTestGraph& g) {
                     const int64_t hd = 32, nh = 4, nkv = 2, T = 3, width = hd * nkv, ctx = 8;
                     const float scale = 1.0f / std::sqrt(float(hd));
                     const int q = g.tensor(DWELL_F32, {hd, nh, T});
                     const int k = g.tensor(DWELL_F32, {hd, nkv, T});
                     const int v = g.tensor(DWELL_F32, {hd, nkv, T});
                     const auto qv = random_floats(static_cast<size_t>(hd * nh * T), 14);
                     const auto kv = random_floats(static_cast<size_t>(width * T), 15);
                     const auto vv = random_floats(static_cast<size_t>(width * T), 16);
                     g.set(q, qv);
                     g.set(k, kv);
                     g.set(v, vv);
                     // Two positions already cached (their rows written through
                     // the cache dtype's rounding), then the new tokens.
                     const auto old_k = random_floats(static_cast<size_t>(width * 2), 17);
                     const auto old_v = random_floats(static_cast<size_t>(width * 2), 18);
                     std::vector<std::vector<double>> kr, vr;  // reference rows by position
                     const auto row_of = [&](const std::vector<float>& src, int64_t r) {
                         return std::vector<float>(src.begin() + r * width,
                                                   src.begin() + (r + 1) * width);
                     };
                     for (int64_t r = 0; r < 2; ++r) {
                         kr.push_back(round_to_cache(ct, row_of(old_k, r)));
                         vr.push_back(round_to_cache(ct, row_of(old_v, r)));
                     }
                     for (int64_t t = 0; t < T; ++t) {
                         kr.push_back(round_to_cache(ct, row_of(kv, t)));
                         vr.push_back(round_to_cache(ct, row_of(vv, t)));
                     }
                     // Cache rows 0-1 hold the old keys, in the cache dtype's
                     // layout, written by a CPY-free path: the SDK's encoders.
                     const auto encode = [&](const std::vector<float>& x, uint8_t* dst) {
                         if (ct == DWELL_F32) {
                             std::memcpy(dst, x.data(), x.size() * 4);
                         } else if (ct == DWELL_F16) {
                             for (size_t i = 0; i < x.size(); ++i) {
                                 const uint16_t h = dwell_fp32_to_fp16(x[i]);
                                 std::memcpy(dst + 2 * i, &h, 2);
                             }
                         } else if (ct == DWELL_FP8_E4M3) {
                             for (size_t i = 0; i < x.size(); ++i)
                                 dst[i] = dwell_fp32_to_fp8_e4m3(x[i]);
                         } else {
                             for (size_t b = 0; b < x.size(); b += 32) {
                                 double amax = 0;
                                 for (size_t i = b; i < b + 32; ++i)
                                     amax = std::max(amax, std::fabs(double(x[i])));
                                 const uint16_t d =
                                     dwell_fp32_to_fp16(static_cast<float>(amax / 127.0));
                                 uint8_t* blk = dst + (b / 32) * 34;
                                 std::memcpy(blk, &d, 2);
                                 const double id = amax > 0 ? 127.0 / amax : 0.0;
                                 for (size_t i = b; i < b + 32; ++i)
                                     blk[2 + i - b] = static_cast<uint8_t>(
                                         static_cast<int8_t>(std::nearbyint(x[i] * id)));
                             }
                         }
                     };
                     int kc, vc;
                     if (!paged) {
                         kc = g.tensor(ct, {width, ctx});
                         vc = g.tensor(ct, {width, ctx});
                         for (int64_t r = 0; r < 2; ++r) {
                             encode(row_of(old_k, r), g.row(kc, r));
                             encode(row_of(old_v, r), g.row(vc, r));
                         }
                     } else {
                         // Pages of 2 rows; 6 pages, used out of order.
                         const int64_t rpp = 2;
                         kc = g.tensor(ct, {width, rpp, 6});
                         vc = g.tensor(DWELL_I32, {2, 3});
                         const std::vector<int32_t> table = {4, 1, 0, 5, 3, 2};
                         g.set<int32_t>(vc, table);
                         for (int64_t r = 0; r < 2; ++r) {
                             encode(row_of(old_k, r), g.row(kc, table[0] * rpp + r));
                             encode(row_of(old_v, r), g.row(kc, table[1] * rpp + r));
                         }
                     }
                     const int pos = g.tensor(DWELL_I32, {T});
                     g.set<int32_t>(pos, {2, 3, 4});
                     const int out = g.tensor(DWELL_F32, {hd, nh, T});
                     g.node(DWELL_OP_ATTENTION, out, {q, k, v, kc, vc, pos}, {}, {scale});
                     return ref_attention(qv, kr, vr, hd, nh, nkv, T, 2, scale);
                 },
                 tol});
        }
    }
}

// ATTENTION over an FP8 cache long enough for key offsets (quant.h): 30
// cached positions (keys with a large shared part, stored by the
// contract with plain rounding), then 4 tokens at 30..33, across the
// block boundary at 32, whose keys the backend stores against their
// queries.
void add_fp8_offset_key_attention_cases(std::vector<Case>& cases) {
    for (const bool paged : {false, true}) {
        cases.push_back(
            {std::string("attention_fp8_e4m3_offset_keys") + (paged ? "_paged" : ""),
             [paged](OpTestGraph& g) {
                 const int64_t hd = 32, nh = 4, nkv = 2, T = 4, width = hd * nkv, n_old = 30;
                 const int64_t ctx = 40, rpp = 8;
                 const float scale = 1.0f / std::sqrt(float(hd));
                 const auto shared = random_floats(static_cast<size_t>(width), 20, -12, 12);
                 const auto with_shared = [&](std::vector<float> x) {
                     for (size_t i = 0; i < x.size(); ++i) x[i] += shared[i % shared.size()];
                     return x;
                 };
                 const auto qv = random_floats(static_cast<size_t>(hd * nh * T), 21);
                 const auto kv = with_shared(random_floats(static_cast<size_t>(width * T), 22));
                 const auto vv = random_floats(static_cast<size_t>(width * T), 23);
                 const auto old_k =
                     with_shared(random_floats(static_cast<size_t>(width * n_old), 24));
                 const auto old_v = random_floats(static_cast<size_t>(width * n_old), 25);
                 const int q = g.tensor(DWELL_F32, {hd, nh, T});
                 const int k = g.tensor(DWELL_F32, {hd, nkv, T});
                 const int v = g.tensor(DWELL_F32, {hd, nkv, T});
                 g.set(q, qv);
                 g.set(k, kv);
                 g.set(v, vv);
                 // Key rows by position, the old ones by the contract; the
                 // new ones as the backend must store them.
                 std::vector<std::vector<uint8_t>> k_rows, v_rows;
                 const auto plain = [&](const float* x) {
                     std::vector<uint8_t> r(static_cast<size_t>(width));
                     for (int64_t i = 0; i < width; ++i)
                         r[static_cast<size_t>(i)] = dwell_fp32_to_fp8_e4m3(x[i]);
                     return r;
                 };
                 for (int64_t r = 0; r < n_old; ++r) {
                     k_rows.push_back(test::ref_fp8_key_codes(
                         &old_k[static_cast<size_t>(r * width)],
                         test::ref_fp8_key_offset(k_rows, r, width), {}, hd));
                     v_rows.push_back(plain(&old_v[static_cast<size_t>(r * width)]));
                 }
                 int kc, vc;
                 std::vector<int32_t> table;
                 const auto row_at = [&](int kind, int64_t r) {
                     if (!paged) return g.row(kind ? vc : kc, r);
                     return g.row(kc,
                                  table[static_cast<size_t>(2 * (r / rpp) + kind)] * rpp + r % rpp);
                 };
                 if (!paged) {
                     kc = g.tensor(DWELL_FP8_E4M3, {width, ctx});
                     vc = g.tensor(DWELL_FP8_E4M3, {width, ctx});
                 } else {
                     kc = g.tensor(DWELL_FP8_E4M3, {width, rpp, 12});
                     vc = g.tensor(DWELL_I32, {2, ctx / rpp});
                     table = {7, 2, 0, 9, 4, 11, 1, 6, 10, 3};
                     g.set<int32_t>(vc, table);
                 }
                 for (int64_t r = 0; r < n_old; ++r) {
                     std::memcpy(row_at(0, r), k_rows[static_cast<size_t>(r)].data(),
                                 static_cast<size_t>(width));
                     std::memcpy(row_at(1, r), v_rows[static_cast<size_t>(r)].data(),
                                 static_cast<size_t>(width));
                 }
                 for (int64_t t = 0; t < T; ++t) {
                     const auto sums = test::ref_fp8_query_sums(
                         &qv[static_cast<size_t>(t * hd * nh)], hd, nh, nkv);
                     k_rows.push_back(test::ref_fp8_key_codes(
                         &kv[static_cast<size_t>(t * width)],
                         test::ref_fp8_key_offset(k_rows, n_old + t, width), sums, hd));
                     v_rows.push_back(plain(&vv[static_cast<size_t>(t * width)]));
                 }
                 const int pos = g.tensor(DWELL_I32, {T});
                 g.set<int32_t>(pos, {30, 31, 32, 33});
                 const int out = g.tensor(DWELL_F32, {hd, nh, T});
                 g.node(DWELL_OP_ATTENTION, out, {q, k, v, kc, vc, pos}, {}, {scale});
                 std::vector<std::vector<double>> keys, values;
                 for (int64_t j = 0; j < n_old + T; ++j) {
                     keys.push_back(test::ref_fp8_key_decode(k_rows, j, width));
                     std::vector<double> v_row;
                     for (const uint8_t c : v_rows[static_cast<size_t>(j)])
                         v_row.push_back(test::ref_fp8_value(c));
                     values.push_back(std::move(v_row));
                 }
                 return ref_attention(qv, keys, values, hd, nh, nkv, T, n_old, scale);
             },
             3e-3});
    }
}

// ATTENTION with a sliding window and/or a logit soft-cap (ABI 1.5).
void add_window_attention_cases(std::vector<Case>& cases) {
    // ATTENTION with a sliding window and/or a logit soft-cap (ABI 1.5): 6
    // cached positions, then 4 tokens at 6..9; a window of 3 hides all but
    // the last 3 rows of each, a cap of 1.5 meets scores of up to ~5.
    struct WindowCase {
        const char* name;
        int32_t window;
        float cap;
        dwell_dtype ct;
        bool paged;
    };
    for (const WindowCase wc :
         {WindowCase{"attention_window", 3, 0.0f, DWELL_F32, false},
          WindowCase{"attention_softcap", 0, 1.5f, DWELL_F32, false},
          WindowCase{"attention_window_softcap", 3, 1.5f, DWELL_F32, false},
          WindowCase{"attention_window_softcap_f16", 3, 1.5f, DWELL_F16, false},
          WindowCase{"attention_window_softcap_paged", 3, 1.5f, DWELL_F32, true},
          WindowCase{"attention_window_wider_than_context", 64, 1.5f, DWELL_F32, false}}) {
        cases.push_back(
            {wc.name,
             [wc](OpTestGraph& g) {
                 const int64_t hd = 32, nh = 4, nkv = 2, T = 4, width = hd * nkv, n_old = 6;
                 const int64_t ctx = 12, rpp = 4;
                 const float scale = 0.5f;
                 const auto qv = random_floats(static_cast<size_t>(hd * nh * T), 31);
                 const auto kv = random_floats(static_cast<size_t>(width * T), 32);
                 const auto vv = random_floats(static_cast<size_t>(width * T), 33);
                 const auto old_k = random_floats(static_cast<size_t>(width * n_old), 34);
                 const auto old_v = random_floats(static_cast<size_t>(width * n_old), 35);
                 const int q = g.tensor(DWELL_F32, {hd, nh, T});
                 const int k = g.tensor(DWELL_F32, {hd, nkv, T});
                 const int v = g.tensor(DWELL_F32, {hd, nkv, T});
                 g.set(q, qv);
                 g.set(k, kv);
                 g.set(v, vv);
                 int kc, vc;
                 std::vector<int32_t> table;
                 if (!wc.paged) {
                     kc = g.tensor(wc.ct, {width, ctx});
                     vc = g.tensor(wc.ct, {width, ctx});
                 } else {
                     kc = g.tensor(wc.ct, {width, rpp, 7});
                     vc = g.tensor(DWELL_I32, {2, ctx / rpp});
                     table = {5, 0, 3, 6, 1, 4};
                     g.set<int32_t>(vc, table);
                 }
                 const auto row_at = [&](int kind, int64_t r) {
                     if (!wc.paged) return g.row(kind ? vc : kc, r);
                     return g.row(kc,
                                  table[static_cast<size_t>(2 * (r / rpp) + kind)] * rpp + r % rpp);
                 };
                 std::vector<std::vector<double>> kr, vr;
                 const auto put = [&](const float* x, int kind, int64_t r) {
                     uint8_t* dst = row_at(kind, r);
                     for (int64_t i = 0; i < width; ++i) {
                         if (wc.ct == DWELL_F16) {
                             const uint16_t h = dwell_fp32_to_fp16(x[i]);
                             std::memcpy(dst + 2 * i, &h, 2);
                         } else {
                             std::memcpy(dst + 4 * i, &x[i], 4);
                         }
                     }
                 };
                 const auto rounded = [&](const float* x) {
                     return round_to_cache(wc.ct, std::vector<float>(x, x + width));
                 };
                 for (int64_t r = 0; r < n_old; ++r) {
                     put(&old_k[static_cast<size_t>(r * width)], 0, r);
                     put(&old_v[static_cast<size_t>(r * width)], 1, r);
                     kr.push_back(rounded(&old_k[static_cast<size_t>(r * width)]));
                     vr.push_back(rounded(&old_v[static_cast<size_t>(r * width)]));
                 }
                 for (int64_t t = 0; t < T; ++t) {
                     kr.push_back(rounded(&kv[static_cast<size_t>(t * width)]));
                     vr.push_back(rounded(&vv[static_cast<size_t>(t * width)]));
                 }
                 const int pos = g.tensor(DWELL_I32, {T});
                 g.set<int32_t>(pos, {6, 7, 8, 9});
                 const int out = g.tensor(DWELL_F32, {hd, nh, T});
                 g.node(DWELL_OP_ATTENTION, out, {q, k, v, kc, vc, pos}, {wc.window},
                        {scale, wc.cap});
                 return ref_attention(qv, kr, vr, hd, nh, nkv, T, n_old, scale, wc.window, wc.cap);
             },
             wc.ct == DWELL_F16 ? 3e-3 : 1e-5});
    }
}

// CPY: conversion to f16 and quantization to q8_0 (read back decoded).
void add_cpy_cases(std::vector<Case>& cases) {
    for (const dwell_dtype to : {DWELL_F32, DWELL_F16, DWELL_Q8_0}) {
        cases.push_back(
            {std::string("cpy_to_") + dwell_dtype_name(to),
             [to](OpTestGraph& g) {
                 const int a = g.tensor(DWELL_F32, {64, 3});
                 const auto av = random_floats(64 * 3, 19);
                 g.set(a, av);
                 const int out = g.tensor(to, {64, 3});
                 g.node(DWELL_OP_CPY, out, {a}, {static_cast<int32_t>(to)});
                 std::vector<double> want;
                 for (int r = 0; r < 3; ++r) {
                     const auto row = round_to_cache(
                         to, std::vector<float>(av.begin() + r * 64, av.begin() + (r + 1) * 64));
                     want.insert(want.end(), row.begin(), row.end());
                 }
                 return want;
             },
             1e-6, Case::Out::Decoded});
    }
}

// TOPK (indices of the 3 largest, largest first) and GATHER.
void add_topk_and_gather_cases(std::vector<Case>& cases) {
    cases.push_back({"topk",
                     [](OpTestGraph& g) {
                         const int a = g.tensor(DWELL_F32, {16, 4});
                         const auto av = random_floats(16 * 4, 20);
                         g.set(a, av);
                         const int out = g.tensor(DWELL_I32, {3, 4});
                         g.node(DWELL_OP_TOPK, out, {a}, {3});
                         std::vector<double> want;
                         for (int r = 0; r < 4; ++r) {
                             std::vector<int> idx(16);
                             std::iota(idx.begin(), idx.end(), 0);
                             std::stable_sort(idx.begin(), idx.end(), [&](int x, int y) {
                                 return av[r * 16 + x] > av[r * 16 + y];
                             });
                             for (int i = 0; i < 3; ++i) want.push_back(idx[i]);
                         }
                         return want;
                     },
                     0, Case::Out::I32});
    cases.push_back({"gather",
                     [](OpTestGraph& g) {
                         const int a = g.tensor(DWELL_F32, {16, 4});
                         const auto av = random_floats(16 * 4, 21);
                         g.set(a, av);
                         const int ids = g.tensor(DWELL_I32, {2, 4});
                         const std::vector<int32_t> iv = {3, 0, 15, 15, 7, 1, 2, 9};
                         g.set<int32_t>(ids, iv);
                         const int out = g.tensor(DWELL_F32, {2, 4});
                         g.node(DWELL_OP_GATHER, out, {a, ids});
                         std::vector<double> want;
                         for (int r = 0; r < 4; ++r)
                             for (int i = 0; i < 2; ++i) want.push_back(av[r * 16 + iv[r * 2 + i]]);
                         return want;
                     },
                     0});
}

// EXPERT_MATMUL (4 experts, 2 chosen per token) and MOE_COMBINE.
void add_expert_cases(std::vector<Case>& cases) {
    for (const dwell_dtype wt : {DWELL_F32, DWELL_Q8_0, DWELL_Q4_0}) {
        cases.push_back({std::string("expert_matmul_") + dwell_dtype_name(wt),
                         [wt](OpTestGraph& g) {
                             const int64_t k = 64, n = 8, e = 4, T = 3;
                             const int w = g.tensor(wt, {k, n, e});
                             g.set_raw_rows(w, random_weight_rows(wt, k, n * e, 22));
                             const int x = g.tensor(DWELL_F32, {k, T});
                             const auto xv = random_floats(static_cast<size_t>(k * T), 23);
                             g.set(x, xv);
                             const int ids = g.tensor(DWELL_I32, {2, T});
                             const std::vector<int32_t> iv = {3, 0, 1, 1, 2, 3};
                             g.set<int32_t>(ids, iv);
                             const int out = g.tensor(DWELL_F32, {n, 2, T});
                             g.node(DWELL_OP_EXPERT_MATMUL, out, {w, x, ids});
                             const std::vector<double> wd = decode_rows(g, w);
                             std::vector<double> want;
                             for (int64_t t = 0; t < T; ++t)
                                 for (int i = 0; i < 2; ++i)
                                     for (int64_t c = 0; c < n; ++c) {
                                         double s = 0;
                                         const int64_t ex = iv[t * 2 + i];
                                         for (int64_t j = 0; j < k; ++j)
                                             s += wd[(ex * n + c) * k + j] * xv[t * k + j];
                                         want.push_back(s);
                                     }
                             return want;
                         },
                         wt == DWELL_F32 ? 1e-5 : 3e-2});
    }
    cases.push_back({"moe_combine",
                     [](OpTestGraph& g) {
                         const int y = g.tensor(DWELL_F32, {8, 2, 3});
                         const auto yv = random_floats(8 * 2 * 3, 24);
                         g.set(y, yv);
                         const int w = g.tensor(DWELL_F32, {2, 3});
                         const auto wv = random_floats(2 * 3, 25, 0, 1);
                         g.set(w, wv);
                         const int out = g.tensor(DWELL_F32, {8, 3});
                         g.node(DWELL_OP_MOE_COMBINE, out, {y, w});
                         std::vector<double> want;
                         for (int t = 0; t < 3; ++t)
                             for (int c = 0; c < 8; ++c)
                                 want.push_back(double(wv[t * 2]) * yv[(t * 2) * 8 + c] +
                                                double(wv[t * 2 + 1]) * yv[(t * 2 + 1) * 8 + c]);
                         return want;
                     },
                     1e-6});
}

// SHORT_CONV (ABI 1.6) in double, as graph.h defines it: `calls` batches
// of the same x [C, T] from `state` [C, K - 1], kernel w [C rows of K
// taps]; returns the last batch's output then the state after it.
std::vector<double> ref_short_conv(const std::vector<double>& x, const std::vector<double>& w,
                                   std::vector<double> state, int64_t C, int64_t K, int64_t T,
                                   int calls) {
    std::vector<double> out(static_cast<size_t>(C * T));
    for (int call = 0; call < calls; ++call) {
        std::vector<double> xx = state;  // K - 1 rows, then the batch
        xx.insert(xx.end(), x.begin(), x.end());
        for (int64_t t = 0; t < T; ++t)
            for (int64_t c = 0; c < C; ++c) {
                double s = 0;
                for (int64_t j = 0; j < K; ++j)
                    s += w[static_cast<size_t>(c * K + j)] *
                         xx[static_cast<size_t>((t + j) * C + c)];
                out[static_cast<size_t>(t * C + c)] = s;
            }
        state.assign(xx.end() - static_cast<std::ptrdiff_t>(C * (K - 1)), xx.end());
    }
    out.insert(out.end(), state.begin(), state.end());
    return out;
}

// SHORT_CONV: decode (T = 1) and prefill (T > K - 1) with K = 3, other
// K with F16 taps, and two calls in a row whose second starts from the
// state the first wrote (T < K - 1 there: the state keeps some of its own
// rows). Both the output and the state written are checked.
void add_short_conv_cases(std::vector<Case>& cases) {
    struct Shape {
        const char* name;
        int64_t K, T;
        dwell_dtype taps;
        int calls;
    };
    const Shape shapes[] = {
        {"short_conv_k3_decode", 3, 1, DWELL_F32, 1},
        {"short_conv_k3_prefill", 3, 7, DWELL_F32, 1},
        {"short_conv_k4_f16_prefill", 4, 6, DWELL_F16, 1},
        {"short_conv_k3_two_decodes", 3, 1, DWELL_F32, 2},
        {"short_conv_k5_f16_two_batches", 5, 2, DWELL_F16, 2},
    };
    for (const Shape& sh : shapes) {
        Case c{sh.name,
               [sh](OpTestGraph& g) {
                   const int64_t C = 48, K = sh.K, T = sh.T;
                   const int x = g.tensor(DWELL_F32, {C, T});
                   const auto xv = random_floats(static_cast<size_t>(C * T), 40 + uint32_t(K));
                   g.set(x, xv);
                   const int w = g.tensor(sh.taps, {K, C});
                   g.set_raw_rows(w, random_weight_rows(sh.taps, K, C, 41));
                   const int st = g.tensor(DWELL_F32, {C, K - 1});
                   const auto sv = random_floats(static_cast<size_t>(C * (K - 1)), 42, -2, 2);
                   g.set(st, sv);
                   const int out = g.tensor(DWELL_F32, {C, T});
                   g.node(DWELL_OP_SHORT_CONV, out, {x, w, st});
                   return ref_short_conv(to_double(xv), decode_rows(g, w), to_double(sv), C, K, T,
                                         sh.calls);
               },
               1e-5};
        c.calls = sh.calls;
        c.written_input = 2;
        cases.push_back(std::move(c));
    }
}

// GATED_DELTA_NET (ABI 1.7) in double, as graph.h defines it: `calls`
// batches of the same q, k [Dk, Hk, T], v [Dv, Hv, T], g, beta [Hv, T] from
// `state` [Dk, Dv, Hv] (q and k L2-normalised); returns the last batch's
// output then the state after it.
std::vector<double> ref_gated_delta_net(const std::vector<double>& q, const std::vector<double>& k,
                                        const std::vector<double>& v, const std::vector<double>& g,
                                        const std::vector<double>& beta, std::vector<double> S,
                                        int64_t dk, int64_t hk, int64_t dv, int64_t hv, int64_t T,
                                        double scale, int calls) {
    std::vector<double> out(static_cast<size_t>(dv * hv * T));
    const auto l2 = [&](const double* x) {
        double ss = 0;
        for (int64_t i = 0; i < dk; ++i) ss += x[i] * x[i];
        const double inv = 1 / std::sqrt(ss + 1e-6);
        std::vector<double> y(x, x + dk);
        for (double& e : y) e *= inv;
        return y;
    };
    for (int call = 0; call < calls; ++call)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < hv; ++h) {
                const auto qn = l2(&q[static_cast<size_t>((t * hk + h % hk) * dk)]);
                const auto kn = l2(&k[static_cast<size_t>((t * hk + h % hk) * dk)]);
                double* s = &S[static_cast<size_t>(h * dv * dk)];
                const double decay = std::exp(g[static_cast<size_t>(t * hv + h)]);
                const double b = beta[static_cast<size_t>(t * hv + h)];
                for (int64_t i = 0; i < dv * dk; ++i) s[i] *= decay;
                for (int64_t j = 0; j < dv; ++j) {
                    double r = 0;
                    for (int64_t i = 0; i < dk; ++i) r += s[j * dk + i] * kn[i];
                    const double d = b * (v[static_cast<size_t>((t * hv + h) * dv + j)] - r);
                    for (int64_t i = 0; i < dk; ++i) s[j * dk + i] += kn[i] * d;
                }
                for (int64_t j = 0; j < dv; ++j) {
                    double o = 0;
                    for (int64_t i = 0; i < dk; ++i) o += s[j * dk + i] * qn[i];
                    out[static_cast<size_t>((t * hv + h) * dv + j)] = scale * o;
                }
            }
    out.insert(out.end(), S.begin(), S.end());
    return out;
}

// GATED_DELTA_NET: decode (T = 1) and prefill (T = 7) from a carried state
// with two value heads per key head, and two calls in a row whose second
// starts from the state the first wrote. Output and state are checked.
void add_gated_delta_net_cases(std::vector<Case>& cases) {
    struct Shape {
        const char* name;
        int64_t T;
        int calls;
    };
    const Shape shapes[] = {
        {"gated_delta_net_decode", 1, 1},
        {"gated_delta_net_prefill", 7, 1},
        {"gated_delta_net_two_batches", 3, 2},
    };
    for (const Shape& sh : shapes) {
        Case c{
            sh.name,
            [sh](OpTestGraph& g) {
                const int64_t dk = 16, hk = 2, dv = 16, hv = 4, T = sh.T;
                const auto make = [&](std::vector<int64_t> ne, uint32_t seed, float lo, float hi) {
                    int64_t n = 1;
                    for (int64_t e : ne) n *= e;
                    const int id = g.tensor(DWELL_F32, std::move(ne));
                    const auto vals = random_floats(static_cast<size_t>(n), seed, lo, hi);
                    g.set(id, vals);
                    return std::pair{id, to_double(vals)};
                };
                const auto [q, qv] = make({dk, hk, T}, 50, -1.5f, 1.5f);
                const auto [k, kv] = make({dk, hk, T}, 51, -1.5f, 1.5f);
                const auto [v, vv] = make({dv, hv, T}, 52, -2, 2);
                const auto [gt, gv] = make({hv, T}, 53, -2, 0);
                const auto [bt, bv] = make({hv, T}, 54, 0, 1);
                const auto [st, sv] = make({dk, dv, hv}, 55, -0.5f, 0.5f);
                const int out = g.tensor(DWELL_F32, {dv, hv, T});
                g.node(DWELL_OP_GATED_DELTA_NET, out, {q, k, v, gt, bt, st}, {1}, {0.25f, 1e-6f});
                return ref_gated_delta_net(qv, kv, vv, gv, bv, sv, dk, hk, dv, hv, T, 0.25,
                                           sh.calls);
            },
            1e-5};
        c.calls = sh.calls;
        c.written_input = 5;
        cases.push_back(std::move(c));
    }
}

}  // namespace

std::vector<Case> all_cases() {
    std::vector<Case> cases;
    add_weight_cases(cases);
    add_elementwise_cases(cases);
    add_norm_cases(cases);
    add_rope_cases(cases);
    add_rope_factor_cases(cases);
    add_attention_cases(cases);
    add_fp8_offset_key_attention_cases(cases);
    add_window_attention_cases(cases);
    add_cpy_cases(cases);
    add_topk_and_gather_cases(cases);
    add_expert_cases(cases);
    add_short_conv_cases(cases);
    add_gated_delta_net_cases(cases);
    return cases;
}

}  // namespace dwell::conformance
