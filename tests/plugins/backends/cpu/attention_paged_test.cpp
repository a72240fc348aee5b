// ATTENTION over every cache dtype (F32, F16, Q8_0, FP8_E4M3) in both forms
// of graph.h: contiguous caches and a page space with a page table. Each
// scenario runs prompt (T > 1, causal) and decode steps with GQA against a
// double-precision reference that keeps its own copy of the cache; checks
// every byte of cache storage afterwards (written rows hold the SDK
// encoders' bytes, or for FP8 keys the test's own rendering of quant.h's
// offset-key contract; everything else its sentinel), that the paged form gives
// the contiguous form's bits under a scrambled page table with padded
// pages, and how bad page tables are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "cpu_test_graph.hpp"
#include "dwell/quant.h"
#include "fp8_key_reference.hpp"

namespace dwell::cpu {
namespace {

using test::TestGraph;

constexpr unsigned char kSentinel = 0x5a;

size_t sz(int64_t v) {
    return static_cast<size_t>(v);
}

struct Shape {
    int64_t hd, n_head, n_kv;
    int64_t width() const { return hd * n_kv; }
};

// The bytes a cache row must hold: the SDK's reference encoders (Q8_0 is
// ggml's rounding, FP8 round-to-nearest-even with saturation).
std::vector<uint8_t> encode_row(dwell_dtype t, const float* x, int64_t n) {
    std::vector<uint8_t> out(dwell_row_bytes(t, n));
    for (int64_t i = 0; i < n; ++i) {
        if (t == DWELL_F32) std::memcpy(&out[sz(4 * i)], &x[i], 4);
        if (t == DWELL_F16) {
            const uint16_t h = dwell_fp32_to_fp16(x[i]);
            std::memcpy(&out[sz(2 * i)], &h, 2);
        }
        if (t == DWELL_FP8_E4M3) out[sz(i)] = dwell_fp32_to_fp8_e4m3(x[i]);
    }
    if (t == DWELL_Q8_0) {
        std::vector<dwell_block_q8_0> blocks(sz(n / 32));
        dwell_quantize_row_q8_0(x, blocks.data(), n);
        std::memcpy(out.data(), blocks.data(), out.size());
    }
    return out;
}

// Stored bytes to values, from the documented layouts (FP8: the OCP
// formula).
std::vector<double> decode_row(dwell_dtype t, const uint8_t* p, int64_t n) {
    if (t != DWELL_FP8_E4M3) return test::ref_decode_row(t, p, n);
    std::vector<double> out(sz(n));
    for (int64_t i = 0; i < n; ++i) out[sz(i)] = dwell::test::ref_fp8_value(p[i]);
    return out;
}

double round_half(double v) {
    return test::ref_half(dwell_fp32_to_fp16(static_cast<float>(v)));
}

// One step's attention from the reference cache, in double, plus for every
// output the slack the fp16 rounding of the softmax weights may need: the
// kernel's weight comes from its own expf, so a weight within float error
// of a half-way point between two halves may round either way.
struct RefOutput {
    std::vector<double> out, slack;
};

RefOutput reference_attention(const Shape& s, dwell_dtype kt, dwell_dtype vt,
                              const std::vector<std::vector<double>>& k_cache,
                              const std::vector<std::vector<double>>& v_cache,
                              const std::vector<float>& q, const std::vector<int32_t>& positions,
                              float scale) {
    const auto n_tokens = static_cast<int64_t>(positions.size());
    RefOutput r;
    r.out.assign(sz(s.hd * s.n_head * n_tokens), 0.0);
    r.slack.assign(r.out.size(), 0.0);
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int32_t p = positions[sz(t)];
        for (int64_t h = 0; h < s.n_head; ++h) {
            const int64_t off = (h / (s.n_head / s.n_kv)) * s.hd;
            std::vector<double> w(sz(p + 1));
            double max = -INFINITY;
            for (int32_t j = 0; j <= p; ++j) {
                double dot = 0;
                for (int64_t d = 0; d < s.hd; ++d) {
                    // llama.cpp rounds q to fp16 against an F16 key cache.
                    const double qd = q[sz((t * s.n_head + h) * s.hd + d)];
                    dot += (kt == DWELL_F16 ? round_half(qd) : qd) * k_cache[sz(j)][sz(off + d)];
                }
                w[sz(j)] = scale * dot;
                max = std::max(max, w[sz(j)]);
            }
            double sum = 0;
            for (double& e : w) sum += (e = std::exp(e - max));
            std::vector<double> alt(w.size(), 0.0);
            for (size_t j = 0; j < w.size(); ++j) {
                w[j] /= sum;
                if (vt != DWELL_F16) continue;
                const double lo = round_half(w[j] * (1 - 1e-5)), hi = round_half(w[j] * (1 + 1e-5));
                w[j] = round_half(w[j]);
                alt[j] = hi - lo;
            }
            for (int64_t d = 0; d < s.hd; ++d) {
                double o = 0, slack = 0;
                for (int32_t j = 0; j <= p; ++j) {
                    o += w[sz(j)] * v_cache[sz(j)][sz(off + d)];
                    slack += alt[sz(j)] * std::fabs(v_cache[sz(j)][sz(off + d)]);
                }
                r.out[sz((t * s.n_head + h) * s.hd + d)] = o;
                r.slack[sz((t * s.n_head + h) * s.hd + d)] = slack;
            }
        }
    }
    return r;
}

// A KV cache of either form inside a test graph, the attention steps run
// over it, and the reference's copy of what it must hold.
class Scenario {
public:
    static constexpr int64_t kRowsPerPage = 4;
    static constexpr int64_t kLogicalPages = 10;
    static constexpr int64_t kSparePages = 3;

    Scenario(dwell_dtype dtype, bool paged, Shape shape) : dtype_(dtype), paged_(paged), s_(shape) {
        const int64_t w = s_.width();
        if (paged_) {
            // One spare row per page: page bytes exceed rows_per_page rows.
            space_ = g_.tensor(dtype_, {w, kRowsPerPage + 1, 2 * kLogicalPages + kSparePages}, 8);
            g_.t(space_).ne[1] = kRowsPerPage;
            std::vector<int32_t> ids(sz(2 * kLogicalPages + kSparePages));
            std::iota(ids.begin(), ids.end(), 0);
            std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
            table_.assign(ids.begin(), ids.begin() + 2 * kLogicalPages);
            table_id_ = g_.tensor(DWELL_I32, {2, kLogicalPages});
            g_.set(table_id_, table_);
            storages_ = {space_};
        } else {
            kc_ = g_.tensor(dtype_, {w, kRowsPerPage * kLogicalPages}, 8);
            vc_ = g_.tensor(dtype_, {w, kRowsPerPage * kLogicalPages}, 12);
            storages_ = {kc_, vc_};
        }
        for (int id : storages_) std::memset(g_.t(id).data, kSentinel, g_.bytes(id));
        ref_k_.resize(sz(kRowsPerPage * kLogicalPages));
        ref_v_.resize(ref_k_.size());
        bytes_k_.resize(ref_k_.size());
        bytes_v_.resize(ref_k_.size());
    }

    TestGraph& graph() { return g_; }
    int space() const { return space_; }

    // Row `pos` of K (kind 0) or V (kind 1).
    unsigned char* row(int kind, int64_t pos) {
        if (!paged_) {
            const dwell_tensor& t = g_.t(kind ? vc_ : kc_);
            return static_cast<unsigned char*>(t.data) + sz(pos) * t.nb[1];
        }
        const dwell_tensor& t = g_.t(space_);
        const auto page = static_cast<uint64_t>(table_[sz(2 * (pos / kRowsPerPage) + kind)]);
        return static_cast<unsigned char*>(t.data) + page * t.nb[2] +
               static_cast<uint64_t>(pos % kRowsPerPage) * t.nb[1];
    }

    // Runs one step; returns the output and, through *ref, the reference's.
    std::vector<float> step(const std::vector<int32_t>& positions, uint32_t seed, RefOutput* ref) {
        const auto t = static_cast<int64_t>(positions.size());
        const float scale = 1.0f / std::sqrt(static_cast<float>(s_.hd));
        const int q = g_.tensor(DWELL_F32, {s_.hd, s_.n_head, t});
        const int k = g_.tensor(DWELL_F32, {s_.hd, s_.n_kv, t});
        const int v = g_.tensor(DWELL_F32, {s_.hd, s_.n_kv, t});
        const int pos = g_.tensor(DWELL_I32, {t});
        const int out = g_.tensor(DWELL_F32, {s_.hd, s_.n_head, t});
        const auto qs = test::random_floats(sz(s_.hd * s_.n_head * t), seed, -2, 2);
        const auto ks = test::random_floats(sz(s_.width() * t), seed + 1, -2, 2);
        const auto vs = test::random_floats(sz(s_.width() * t), seed + 2);
        g_.set(q, qs);
        g_.set(k, ks);
        g_.set(v, vs);
        g_.set(pos, positions);
        const int in4 = paged_ ? table_id_ : vc_;
        const int node = g_.node(DWELL_OP_ATTENTION, out,
                                 {q, k, v, paged_ ? space_ : kc_, in4, pos}, {}, {scale});
        const auto problem = g_.run_nodes({node}, 1);
        EXPECT_FALSE(problem) << problem->message;
        const auto got = g_.f32(out);
        // Rerunning with 3 threads rewrites the same rows, the same bits.
        const auto problem3 = g_.run_nodes({node}, 3);
        EXPECT_FALSE(problem3) << problem3->message;
        EXPECT_EQ(0, std::memcmp(got.data(), g_.f32(out).data(), got.size() * sizeof(float)));

        for (int64_t i = 0; i < t; ++i) {
            const auto p = sz(positions[sz(i)]);
            const float* key = &ks[sz(i * s_.width())];
            if (dtype_ == DWELL_FP8_E4M3) {
                const auto q_sums = dwell::test::ref_fp8_query_sums(&qs[sz(i * s_.hd * s_.n_head)],
                                                                    s_.hd, s_.n_head, s_.n_kv);
                bytes_k_[p] = dwell::test::ref_fp8_key_codes(
                    key, dwell::test::ref_fp8_key_offset(bytes_k_, positions[sz(i)], s_.width()),
                    q_sums, s_.hd);
                ref_k_[p] = dwell::test::ref_fp8_key_decode(bytes_k_, positions[sz(i)], s_.width());
            } else {
                bytes_k_[p] = encode_row(dtype_, key, s_.width());
                ref_k_[p] = decode_row(dtype_, bytes_k_[p].data(), s_.width());
            }
            bytes_v_[p] = encode_row(dtype_, &vs[sz(i * s_.width())], s_.width());
            ref_v_[p] = decode_row(dtype_, bytes_v_[p].data(), s_.width());
        }
        *ref = reference_attention(s_, dtype_, dtype_, ref_k_, ref_v_, qs, positions, scale);
        return got;
    }

    // Every byte of cache storage: written rows as encoded, the rest (rows
    // not written, row and page padding, spare pages) still the sentinel.
    void expect_storage_exact() {
        std::vector<std::vector<unsigned char>> want;
        for (int id : storages_) want.emplace_back(g_.bytes(id), kSentinel);
        for (int64_t p = 0; p < static_cast<int64_t>(bytes_k_.size()); ++p) {
            for (int kind = 0; kind < 2; ++kind) {
                const auto& bytes = kind ? bytes_v_[sz(p)] : bytes_k_[sz(p)];
                if (bytes.empty()) continue;
                unsigned char* at = row(kind, p);
                for (size_t i = 0; i < storages_.size(); ++i) {
                    auto* base = static_cast<unsigned char*>(g_.t(storages_[i]).data);
                    if (at >= base && at < base + want[i].size()) {
                        std::copy(bytes.begin(), bytes.end(), want[i].begin() + (at - base));
                    }
                }
            }
        }
        for (size_t i = 0; i < storages_.size(); ++i) {
            EXPECT_EQ(0, std::memcmp(g_.t(storages_[i]).data, want[i].data(), want[i].size()))
                << "storage " << i;
        }
    }

    const std::vector<uint8_t>& stored_k(int64_t p) const { return bytes_k_[sz(p)]; }

private:
    TestGraph g_;
    dwell_dtype dtype_;
    bool paged_;
    Shape s_;
    int space_ = -1, table_id_ = -1, kc_ = -1, vc_ = -1;
    std::vector<int32_t> table_;
    std::vector<int> storages_;
    std::vector<std::vector<double>> ref_k_, ref_v_;
    std::vector<std::vector<uint8_t>> bytes_k_, bytes_v_;
};

void expect_matches(const std::vector<float>& got, const RefOutput& ref, const std::string& what) {
    ASSERT_EQ(got.size(), ref.out.size());
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], ref.out[i], 3e-5 + ref.slack[i]) << what << " output " << i;
    }
}

// Prompts of 5, 3, 12 and 13 tokens (causal inside each, crossing pages of
// 4 rows and, at 16 and 32, FP8 key blocks) and single-token decoding steps.
std::vector<int32_t> positions_from(int32_t first, int32_t n) {
    std::vector<int32_t> p(sz(n));
    std::iota(p.begin(), p.end(), first);
    return p;
}
const std::vector<std::vector<int32_t>> kSteps = {
    {0, 1, 2, 3, 4},        {5}, {6, 7, 8}, {9}, positions_from(10, 12), {22},
    positions_from(23, 13), {36}};
constexpr int64_t kPositions = 37;

// Runs kSteps over both forms, checking each against the reference and
// the paged outputs and rows against the contiguous ones, bit for bit.
void run_both_forms(dwell_dtype dtype, Shape shape) {
    Scenario contiguous(dtype, false, shape), paged(dtype, true, shape);
    uint32_t seed = 100;
    for (const auto& positions : kSteps) {
        RefOutput ref_c, ref_p;
        const auto got_c = contiguous.step(positions, seed, &ref_c);
        const auto got_p = paged.step(positions, seed, &ref_p);
        seed += 3;
        const std::string at = std::string(dwell_dtype_name(dtype)) + " hd " +
                               std::to_string(shape.hd) + " step at " +
                               std::to_string(positions[0]);
        expect_matches(got_c, ref_c, "contiguous " + at);
        expect_matches(got_p, ref_p, "paged " + at);
        EXPECT_EQ(0, std::memcmp(got_c.data(), got_p.data(), got_c.size() * sizeof(float))) << at;
    }
    contiguous.expect_storage_exact();
    paged.expect_storage_exact();
    for (int64_t p = 0; p < kPositions; ++p) {
        EXPECT_EQ(0, std::memcmp(contiguous.row(0, p), paged.row(0, p), paged.stored_k(p).size()));
        EXPECT_EQ(0, std::memcmp(contiguous.row(1, p), paged.row(1, p), paged.stored_k(p).size()));
    }
}

class CacheDtypeTest : public ::testing::TestWithParam<dwell_dtype> {};

// GQA (4 query heads on 2 kv heads), heads of 32 values.
TEST_P(CacheDtypeTest, BothFormsMatchReferenceAndEachOther) {
    run_both_forms(GetParam(), {32, 4, 2});
}

// Heads of 8 (stories260K) and 24: Q8_0 blocks hold four heads, or a head
// straddles two blocks; the other dtypes take the same small heads.
TEST_P(CacheDtypeTest, HeadsThatSplitBlocks) {
    run_both_forms(GetParam(), {8, 8, 4});
    run_both_forms(GetParam(), {24, 8, 4});
}

INSTANTIATE_TEST_SUITE_P(AttentionCaches, CacheDtypeTest,
                         ::testing::Values(DWELL_F32, DWELL_F16, DWELL_Q8_0, DWELL_FP8_E4M3),
                         [](const auto& info) {
                             return std::string(dwell_dtype_name(info.param));
                         });

// A paged graph built by hand: one page space, tables made per test.
struct PagedGraph {
    static constexpr int64_t kHd = 32, kRows = 4, kPages = 8;
    TestGraph g;
    int space;
    explicit PagedGraph(dwell_dtype dtype = DWELL_Q8_0, int64_t width = kHd) {
        space = g.tensor(dtype, {width, kRows, kPages});
        std::memset(g.t(space).data, kSentinel, g.bytes(space));
    }
    std::vector<uint8_t> snapshot() {
        const auto* p = static_cast<const uint8_t*>(g.t(space).data);
        return {p, p + g.bytes(space)};
    }
    int table(const std::vector<int32_t>& entries) {
        const int t = g.tensor(DWELL_I32, {2, static_cast<int64_t>(entries.size() / 2)});
        g.set(t, entries);
        return t;
    }
    // One kv head, one query head; q, k, v random; returns the node.
    int attention(int table_id, const std::vector<int32_t>& positions, int* out_id = nullptr,
                  uint32_t seed = 1) {
        const auto t = static_cast<int64_t>(positions.size());
        const int q = g.tensor(DWELL_F32, {kHd, 1, t});
        const int k = g.tensor(DWELL_F32, {kHd, 1, t});
        const int v = g.tensor(DWELL_F32, {kHd, 1, t});
        const int pos = g.tensor(DWELL_I32, {t});
        const int out = g.tensor(DWELL_F32, {kHd, 1, t});
        g.set(q, test::random_floats(sz(kHd * t), seed, -2, 2));
        g.set(k, test::random_floats(sz(kHd * t), seed + 1, -2, 2));
        g.set(v, test::random_floats(sz(kHd * t), seed + 2));
        g.set(pos, positions);
        if (out_id != nullptr) *out_id = out;
        return g.node(DWELL_OP_ATTENTION, out, {q, k, v, space, table_id, pos}, {}, {0.25f});
    }
};

// Two sequences share a prompt's pages: B's table names A's pages for the
// prefix and its own for the rest. B reads the prefix and writes only its
// pages; A, continuing, never sees B's rows.
TEST(AttentionPaged, SharedReadOnlyPages) {
    PagedGraph pg;
    const int table_a = pg.table({0, 1, 2, 3, 4, 5});
    const int table_b = pg.table({0, 1, 2, 3, 6, 7});
    int out_a_prompt, out_b, out_a;
    const int prompt = pg.attention(table_a, {0, 1, 2, 3, 4, 5, 6, 7}, &out_a_prompt, 10);
    ASSERT_FALSE(pg.g.run_nodes({prompt}));
    const auto after_prompt = pg.snapshot();

    // B: positions 8 and 9 into its own page 6 / 7.
    const int b_step = pg.attention(table_b, {8, 9}, &out_b, 20);
    ASSERT_FALSE(pg.g.run_nodes({b_step}));
    const auto after_b = pg.snapshot();
    const size_t page = pg.g.t(pg.space).nb[2];
    EXPECT_EQ(0, std::memcmp(after_b.data(), after_prompt.data(), 6 * page)) << "B wrote A's pages";

    // The same two tokens over a private copy of the prefix give B's bits.
    PagedGraph copy;
    std::memcpy(copy.g.t(copy.space).data, after_prompt.data(), after_prompt.size());
    const int table_copy = copy.table({0, 1, 2, 3, 6, 7});
    int out_copy;
    const int copy_step = copy.attention(table_copy, {8, 9}, &out_copy, 20);
    ASSERT_FALSE(copy.g.run_nodes({copy_step}));
    EXPECT_EQ(copy.g.f32(out_copy), pg.g.f32(out_b));

    // A continues at position 8 in its page 4 / 5: B's rows are not read.
    const int a_step = pg.attention(table_a, {8}, &out_a, 30);
    ASSERT_FALSE(pg.g.run_nodes({a_step}));
    PagedGraph alone;
    std::memcpy(alone.g.t(alone.space).data, after_prompt.data(), after_prompt.size());
    const int table_alone = alone.table({0, 1, 2, 3, 4, 5});
    int out_alone;
    const int alone_step = alone.attention(table_alone, {8}, &out_alone, 30);
    ASSERT_FALSE(alone.g.run_nodes({alone_step}));
    EXPECT_EQ(alone.g.f32(out_alone), pg.g.f32(out_a));
}

// Table contents are checked when the node runs (supports_op may see a
// table before the host fills it), all before any row is written.
TEST(AttentionPaged, BadPageTablesFailBeforeWriting) {
    struct Case {
        std::vector<int32_t> table;
        std::vector<int32_t> positions;
        const char* message;
    };
    const std::vector<Case> cases = {
        {{0, 1, 2, 99}, {4}, "page table entry 1 (V) names page 99, outside the page space's 8"},
        {{0, 1, -1, 3}, {5}, "page table entry 1 (K) names page -1"},
        {{0, 9, 2, 3}, {4}, "entry 0 (V) names page 9"},  // read, not written: still checked
        {{0, 1, 2, 3}, {8}, "position 8 of token 0 is beyond the page table's 2 logical pages"},
        {{0, 1, 2, 3}, {3, 9}, "position 9 of token 1 is beyond"},
        {{0, 1, 2, 2}, {5}, "page 2 is written through page table entry 1 (K)"},
        {{0, 1, 1, 3}, {5}, "page 1 is written through page table entry 1 (K) but named"},
        {{0, 1, 0, 3}, {1, 5}, "page 0 is written through page table entry 0 (K)"},
    };
    for (const auto& c : cases) {
        PagedGraph pg;
        const int node = pg.attention(pg.table(c.table), c.positions);
        EXPECT_FALSE(pg.g.check(node)) << c.message;
        const auto before = pg.snapshot();
        const auto p = pg.g.run_nodes({node});
        ASSERT_TRUE(p) << c.message;
        EXPECT_EQ(p->status, DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_NE(p->message.find(c.message), std::string::npos) << p->message;
        EXPECT_EQ(p->message.rfind("node 0 (attention): ", 0), 0u) << p->message;
        EXPECT_EQ(p->message.find('\n'), std::string::npos) << p->message;
        EXPECT_EQ(pg.snapshot(), before) << c.message;
    }
    // Entries past the last position's page are never read.
    PagedGraph pg;
    const int node = pg.attention(pg.table({0, 1, -5, 1000}), {3});
    EXPECT_FALSE(pg.g.run_nodes({node}));
}

TEST(AttentionPaged, RejectsBadShapes) {
    auto expect_invalid = [](PagedGraph& pg, int node, const char* message) {
        const auto p = pg.g.check(node);
        ASSERT_TRUE(p) << message;
        EXPECT_EQ(p->status, DWELL_ERR_INVALID_ARGUMENT) << p->message;
        EXPECT_NE(p->message.find(message), std::string::npos) << p->message;
    };
    {
        PagedGraph pg(DWELL_Q8_0, 64);  // kv_width mismatch: hd * n_kv = 32
        const int node = pg.attention(pg.table({0, 1}), {0});
        expect_invalid(pg, node, "page space must be [32, rows_per_page, n_pages], got [64, 4, 8]");
    }
    {
        PagedGraph pg;
        const int node = pg.attention(pg.table({0, 1}), {0});
        pg.g.t(pg.space).nb[2] = 3 * pg.g.t(pg.space).nb[1];  // pages overlap
        expect_invalid(pg, node, "page bytes nb[2] = 102 are fewer than 4 rows of 34 bytes");
    }
    {
        PagedGraph pg;
        const int bad_table = pg.g.tensor(DWELL_I32, {3, 2});
        expect_invalid(pg, pg.attention(bad_table, {0}), "page table must be I32 [2, n_logical]");
    }
    {
        // Rows of 8 values cannot be Q8_0 (hd 8 with one kv head).
        TestGraph g;
        const int q = g.tensor(DWELL_F32, {8, 1, 1});
        const int space = g.tensor(DWELL_Q8_0, {32, 4, 2});
        g.t(space).ne[0] = 8;
        const int table = g.tensor(DWELL_I32, {2, 1});
        const int pos = g.tensor(DWELL_I32, {1});
        const int out = g.tensor(DWELL_F32, {8, 1, 1});
        const int node = g.node(DWELL_OP_ATTENTION, out, {q, q, q, space, table, pos}, {}, {1.0f});
        const auto p = g.check(node);
        ASSERT_TRUE(p);
        EXPECT_EQ(p->status, DWELL_ERR_INVALID_ARGUMENT);
        EXPECT_NE(p->message.find("not a multiple of the q8_0 block size"), std::string::npos)
            << p->message;
    }
    {
        PagedGraph pg(DWELL_BF16);
        const auto p = pg.g.check(pg.attention(pg.table({0, 1}), {0}));
        ASSERT_TRUE(p);
        EXPECT_EQ(p->status, DWELL_ERR_UNSUPPORTED);
        EXPECT_NE(p->message.find("KV cache dtype bf16 is not supported"), std::string::npos)
            << p->message;
    }
    {
        // k doubling as the page space ([4, 1, 2] both): it would be written.
        TestGraph g;
        const int q = g.tensor(DWELL_F32, {4, 1, 2});
        const int k = g.tensor(DWELL_F32, {4, 1, 2});
        const int table = g.tensor(DWELL_I32, {2, 1});
        const int pos = g.tensor(DWELL_I32, {2});
        const int out = g.tensor(DWELL_F32, {4, 1, 2});
        const int node = g.node(DWELL_OP_ATTENTION, out, {q, k, q, k, table, pos}, {}, {1.0f});
        const auto p = g.check(node);
        ASSERT_TRUE(p);
        EXPECT_NE(p->message.find("page space must not be another input"), std::string::npos)
            << p->message;
    }
}

// Only in3 is written in the paged form: a matmul reading the page space
// after the attention must see the new rows (the shared int8 activations
// of it are dropped), as for a contiguous cache.
TEST(AttentionPaged, WritingThePageSpaceDropsItsQuantizedActivations) {
    TestGraph g;
    const int space = g.tensor(DWELL_F32, {32, 2, 2});
    const int table = g.tensor(DWELL_I32, {2, 1});
    g.set<int32_t>(table, {1, 0});
    // The matmul's x is page 1, the K page of logical page 0.
    const int x = g.tensor(DWELL_F32, {32, 2});
    g.t(x).data = static_cast<unsigned char*>(g.t(space).data) + g.t(space).nb[2];
    const int w = g.tensor(DWELL_Q8_0, {32, 4});
    g.set_raw_rows(w, test::random_weight_rows(DWELL_Q8_0, 32, 4, 3));
    g.set(space, test::random_floats(32 * 2 * 2, 4));
    const int y1 = g.tensor(DWELL_F32, {4, 2});
    const int y2 = g.tensor(DWELL_F32, {4, 2});
    const int q = g.tensor(DWELL_F32, {32, 1, 1});
    const int k = g.tensor(DWELL_F32, {32, 1, 1});
    const int pos = g.tensor(DWELL_I32, {1});
    const int out = g.tensor(DWELL_F32, {32, 1, 1});
    g.set(k, test::random_floats(32, 5, 50, 60));
    g.set<int32_t>(pos, {1});
    g.node(DWELL_OP_MATMUL, y1, {w, x});
    g.node(DWELL_OP_ATTENTION, out, {q, k, k, space, table, pos}, {}, {1.0f});
    g.node(DWELL_OP_MATMUL, y2, {w, x});
    ASSERT_FALSE(g.run());
    const auto first = g.f32(y1), second = g.f32(y2);
    // Row 0 of x kept its values, row 1 now holds k.
    for (int n = 0; n < 4; ++n) EXPECT_EQ(first[n], second[n]) << n;
    for (int n = 4; n < 8; ++n) EXPECT_NE(first[n], second[n]) << n;
}

}  // namespace
}  // namespace dwell::cpu
