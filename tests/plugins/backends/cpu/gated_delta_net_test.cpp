// GATED_DELTA_NET, SIGMOID, SOFTPLUS and SLICE (ABI 1.7) against
// double-precision scalar references of graph.h's definitions: the delta
// rule per value head over the carried state, q and k L2-normalised, value
// head h reading key head h % Hk.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu_test_graph.hpp"

namespace dwell::cpu {
namespace {

using test::random_floats;
using test::TestGraph;

struct Shape {
    int64_t dk, hk, dv, hv;
};

struct Result {
    std::vector<double> out;    // [T][Hv][Dv]
    std::vector<double> state;  // [Hv][Dv][Dk]
};

// q, k [T][Hk][Dk], v [T][Hv][Dv], g, beta [T][Hv], state [Hv][Dv][Dk].
Result reference(const Shape& s, int64_t T, const std::vector<float>& q,
                 const std::vector<float>& k, const std::vector<float>& v,
                 const std::vector<float>& g, const std::vector<float>& beta,
                 const std::vector<double>& state, bool l2, double scale, double eps) {
    Result r{std::vector<double>(static_cast<size_t>(T * s.hv * s.dv)), state};
    const auto norm = [&](const float* x) {
        std::vector<double> y(x, x + s.dk);
        if (!l2) return y;
        double ss = 0;
        for (double e : y) ss += e * e;
        const double inv = 1.0 / std::sqrt(ss + eps);
        for (double& e : y) e *= inv;
        return y;
    };
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < s.hv; ++h) {
            const int64_t hq = h % s.hk;
            const auto qn = norm(&q[static_cast<size_t>((t * s.hk + hq) * s.dk)]);
            const auto kn = norm(&k[static_cast<size_t>((t * s.hk + hq) * s.dk)]);
            const float* vr = &v[static_cast<size_t>((t * s.hv + h) * s.dv)];
            double* S = &r.state[static_cast<size_t>(h * s.dv * s.dk)];
            const double decay = std::exp(double{g[static_cast<size_t>(t * s.hv + h)]});
            const double b = beta[static_cast<size_t>(t * s.hv + h)];
            for (int64_t i = 0; i < s.dv * s.dk; ++i) S[i] *= decay;
            for (int64_t j = 0; j < s.dv; ++j) {
                double recalled = 0;
                for (int64_t i = 0; i < s.dk; ++i) recalled += S[j * s.dk + i] * kn[i];
                const double d = b * (vr[j] - recalled);
                for (int64_t i = 0; i < s.dk; ++i) S[j * s.dk + i] += kn[i] * d;
            }
            for (int64_t j = 0; j < s.dv; ++j) {
                double o = 0;
                for (int64_t i = 0; i < s.dk; ++i) o += S[j * s.dk + i] * qn[i];
                r.out[static_cast<size_t>((t * s.hv + h) * s.dv + j)] = scale * o;
            }
        }
    }
    return r;
}

struct Inputs {
    std::vector<float> q, k, v, g, beta;
};

Inputs random_inputs(const Shape& s, int64_t T, uint32_t seed) {
    Inputs in;
    in.q = random_floats(static_cast<size_t>(T * s.hk * s.dk), seed, -1.5f, 1.5f);
    in.k = random_floats(static_cast<size_t>(T * s.hk * s.dk), seed + 1, -1.5f, 1.5f);
    in.v = random_floats(static_cast<size_t>(T * s.hv * s.dv), seed + 2, -2.0f, 2.0f);
    // g = softplus(.) * a with a < 0: log decays in about -3..0.
    in.g = random_floats(static_cast<size_t>(T * s.hv), seed + 3, -3.0f, 0.0f);
    in.beta = random_floats(static_cast<size_t>(T * s.hv), seed + 4, 0.0f, 1.0f);
    return in;
}

// One node over tokens [t0, t1) of `in`, from `state` (updated), with
// padded rows so that the kernel goes through the strides.
std::vector<float> run_gdn(const Shape& s, const Inputs& in, int64_t t0, int64_t t1,
                           std::vector<float>& state, bool l2, float scale, float eps,
                           unsigned threads) {
    const int64_t T = t1 - t0;
    const auto part = [&](const std::vector<float>& x, int64_t per_token) {
        return std::vector<float>(x.begin() + t0 * per_token, x.begin() + t1 * per_token);
    };
    TestGraph g;
    const int q = g.tensor(DWELL_F32, {s.dk, s.hk, T}, 8);
    const int k = g.tensor(DWELL_F32, {s.dk, s.hk, T}, 4);
    const int v = g.tensor(DWELL_F32, {s.dv, s.hv, T}, 12);
    const int gt = g.tensor(DWELL_F32, {s.hv, T});
    const int bt = g.tensor(DWELL_F32, {s.hv, T}, 4);
    const int st = g.tensor(DWELL_F32, {s.dk, s.dv, s.hv});
    const int y = g.tensor(DWELL_F32, {s.dv, s.hv, T});
    g.set<float>(q, part(in.q, s.hk * s.dk));
    g.set<float>(k, part(in.k, s.hk * s.dk));
    g.set<float>(v, part(in.v, s.hv * s.dv));
    g.set<float>(gt, part(in.g, s.hv));
    g.set<float>(bt, part(in.beta, s.hv));
    g.set<float>(st, state);
    g.node(DWELL_OP_GATED_DELTA_NET, y, {q, k, v, gt, bt, st}, {l2 ? 1 : 0}, {scale, eps});
    const auto p = g.run(threads);
    EXPECT_FALSE(p) << p->message;
    state = g.f32(st);
    return g.f32(y);
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
}

// A prefill batch (T = 9) from a non-zero carried state, with two value
// heads per key head (the tiling h % Hk) and Dk != Dv, L2 on and off.
TEST(GatedDeltaNet, BatchFromCarriedStateMatchesReference) {
    const Shape s{8, 2, 6, 4};
    const int64_t T = 9;
    for (const bool l2 : {true, false}) {
        SCOPED_TRACE(l2 ? "L2-normalised" : "as given");
        const Inputs in = random_inputs(s, T, 11);
        const auto state0 = random_floats(static_cast<size_t>(s.hv * s.dv * s.dk), 17, -0.5f, 0.5f);
        const Result want = reference(s, T, in.q, in.k, in.v, in.g, in.beta,
                                      std::vector<double>(state0.begin(), state0.end()), l2,
                                      1.0 / std::sqrt(8.0), 1e-6);
        std::vector<float> state = state0;
        const auto out = run_gdn(s, in, 0, T, state, l2, 1.0f / std::sqrt(8.0f), 1e-6f, 3);
        expect_near_all(out, want.out, 2e-5);
        expect_near_all(state, want.state, 2e-5);
    }
}

// Decoding one token per call (T = 1), then a batch of the rest, carries
// the state exactly as one batch over the whole sequence does.
TEST(GatedDeltaNet, StepsAndBatchesCarryTheStateLikeOneBatch) {
    const Shape s{16, 1, 16, 3};
    const int64_t T = 12;
    const Inputs in = random_inputs(s, T, 23);
    const std::vector<double> zero(static_cast<size_t>(s.hv * s.dv * s.dk), 0.0);
    const Result want = reference(s, T, in.q, in.k, in.v, in.g, in.beta, zero, true, 0.25, 1e-6);

    std::vector<float> state(zero.size(), 0.0f);
    std::vector<float> outs;
    for (int64_t t = 0; t < 5; ++t) {
        const auto o = run_gdn(s, in, t, t + 1, state, true, 0.25f, 1e-6f, 2);
        outs.insert(outs.end(), o.begin(), o.end());
    }
    const auto rest = run_gdn(s, in, 5, T, state, true, 0.25f, 1e-6f, 2);
    outs.insert(outs.end(), rest.begin(), rest.end());
    expect_near_all(outs, want.out, 2e-5);
    expect_near_all(state, want.state, 2e-5);
}

// The L2 epsilon keeps the normalisation of an all-zero key finite.
TEST(GatedDeltaNet, ZeroKeyStaysFinite) {
    const Shape s{4, 1, 4, 1};
    Inputs in = random_inputs(s, 1, 5);
    std::fill(in.k.begin(), in.k.end(), 0.0f);
    std::vector<float> state(16, 0.5f);
    const auto out = run_gdn(s, in, 0, 1, state, true, 0.5f, 1e-6f, 1);
    const Result want = reference(s, 1, in.q, in.k, in.v, in.g, in.beta,
                                  std::vector<double>(16, 0.5), true, 0.5, 1e-6);
    expect_near_all(out, want.out, 1e-5);
}

TEST(GatedDeltaNet, RefusesMismatchedShapes) {
    TestGraph g;
    const int q = g.tensor(DWELL_F32, {8, 2, 3});
    const int k = g.tensor(DWELL_F32, {8, 2, 3});
    const int v = g.tensor(DWELL_F32, {8, 3, 3});  // 3 value heads over 2 key heads
    const int gt = g.tensor(DWELL_F32, {3, 3});
    const int bt = g.tensor(DWELL_F32, {3, 3});
    const int st = g.tensor(DWELL_F32, {8, 8, 3});
    const int y = g.tensor(DWELL_F32, {8, 3, 3});
    g.node(DWELL_OP_GATED_DELTA_NET, y, {q, k, v, gt, bt, st}, {1}, {1.0f, 1e-6f});
    const auto p = g.check(0);
    ASSERT_TRUE(p);
    EXPECT_NE(p->message.find("multiple"), std::string::npos) << p->message;
}

TEST(GatedDeltaNet, RefusesAZeroEpsilonWithL2) {
    TestGraph g;
    const int q = g.tensor(DWELL_F32, {8, 1, 2});
    const int k = g.tensor(DWELL_F32, {8, 1, 2});
    const int v = g.tensor(DWELL_F32, {8, 1, 2});
    const int gt = g.tensor(DWELL_F32, {1, 2});
    const int bt = g.tensor(DWELL_F32, {1, 2});
    const int st = g.tensor(DWELL_F32, {8, 8, 1});
    const int y = g.tensor(DWELL_F32, {8, 1, 2});
    g.node(DWELL_OP_GATED_DELTA_NET, y, {q, k, v, gt, bt, st}, {1}, {1.0f, 0.0f});
    EXPECT_TRUE(g.check(0));
}

// SIGMOID and SOFTPLUS elementwise against double, SOFTPLUS's large
// inputs passing through; SLICE a column range of every row.
TEST(DeltaNetHelpers, SigmoidSoftplusAndSliceMatchReference) {
    const int64_t n = 40, R = 3;
    auto xs = random_floats(static_cast<size_t>(n * R), 31, -8.0f, 8.0f);
    xs[5] = 25.0f;
    xs[6] = -30.0f;
    TestGraph g;
    const int x = g.tensor(DWELL_F32, {n, R}, 8);
    const int sg = g.tensor(DWELL_F32, {n, R});
    const int sp = g.tensor(DWELL_F32, {n, R});
    const int sl = g.tensor(DWELL_F32, {7, R});
    g.set<float>(x, xs);
    g.node(DWELL_OP_SIGMOID, sg, {x});
    g.node(DWELL_OP_SOFTPLUS, sp, {x});
    g.node(DWELL_OP_SLICE, sl, {x}, {30, 7});
    const auto p = g.run(2);
    ASSERT_FALSE(p) << p->message;
    const auto a = g.f32(sg), b = g.f32(sp), c = g.f32(sl);
    for (size_t i = 0; i < xs.size(); ++i) {
        const double e = xs[i];
        EXPECT_NEAR(a[i], 1.0 / (1.0 + std::exp(-e)), 1e-6) << i;
        EXPECT_NEAR(b[i], std::log1p(std::exp(e)), 2e-6 * std::max(1.0, e)) << i;
    }
    for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < 7; ++i)
            EXPECT_EQ(c[static_cast<size_t>(r * 7 + i)], xs[static_cast<size_t>(r * n + 30 + i)]);
}

}  // namespace
}  // namespace dwell::cpu
