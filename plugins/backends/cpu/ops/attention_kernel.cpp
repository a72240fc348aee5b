// ATTENTION: q [hd, n_head, T], k, v [hd, n_kv, T] F32, a KV cache of rows
// of hd * n_kv values in F32, F16, Q8_0 or FP8_E4M3, positions I32 [T] ->
// [hd, n_head, T] F32. The cache is contiguous (in3 k_cache, in4 v_cache,
// [hd * n_kv, n_ctx] each) or paged (in3 a page space, in4 an I32 page
// table); graph.h has the layouts.
//
// First stores k/v of token t as cache row positions[t], then each
// (token, head) attends causally over cache rows 0..positions[t] with kv head
// h / (n_head / n_kv) — only the last `window` of them when iparams[0] > 0,
// with the scaled scores soft-capped (c * tanh(s / c)) when fparams[1] > 0
// (ABI 1.5). The window only narrows the rows every path walks, so the
// vector paths honour it as the scalar one does.
//
// Numerics follow llama.cpp's CPU path: with an F16 key cache, q is rounded
// to fp16 before the dot products (ggml converts the f32 operand to the
// f16 vec-dot type), products are accumulated in f32, and the softmax sums
// its exps in double. The dots, softmax and weighted value sums run on the
// vector math table (vec_math.hpp); the value sum adds the positions in
// order, one multiply and one add per element, so only the q.k dots and the
// exps round differently from the scalar table. Q8_0 and FP8 caches are read
// in place, a block or a code at a time; q and the softmax weights meet them
// as f32, since rounding those too would only add error.
//
// An FP8 key cache holds offset keys (quant.h, DWELL_FP8_KEY_BLOCK): the
// store adds up the decoded rows before the new row's block and rounds the
// key minus their mean against the token's own query; the reader adds to
// each raw dot 1/16 of the raw dots of the earlier blocks.
//
// Rows of consecutive positions inside one page are evenly strided, so the
// kernel walks the cache run by run (the contiguous cache being one run) and
// hands each run to the same vector entries: both forms take the same
// per-row dots and the same ordered value sums, hence give identical bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "dwell/quant.h"
#include "ops/kernels.hpp"
#include "ops/tensor_access.hpp"
#include "quant/row_quantize.hpp"
#include "simd/vec_math.hpp"

namespace dwell::cpu {

namespace {

bool is_cache_dtype(dwell_dtype t) {
    return t == DWELL_F32 || t == DWELL_F16 || t == DWELL_Q8_0 || t == DWELL_FP8_E4M3;
}

constexpr const char* kKindName[2] = {"K", "V"};

// The cache rows of one kind (kind 0: K, 1: V): position r is row
// r % rows_per_page of the page the table names for logical page
// r / rows_per_page. A contiguous cache is a single page of n_ctx rows.
class CacheRows {
public:
    explicit CacheRows(const dwell_tensor& cache)
        : data_(static_cast<unsigned char*>(cache.data)),
          row_stride_(cache.nb[1]),
          rows_per_page_(cache.ne[1]) {}
    CacheRows(const dwell_tensor& space, const dwell_tensor& table, int kind)
        : data_(static_cast<unsigned char*>(space.data)),
          row_stride_(space.nb[1]),
          page_stride_(space.nb[2]),
          rows_per_page_(space.ne[1]),
          table_(&table),
          kind_(kind) {}

    uint64_t row_stride() const { return row_stride_; }

    unsigned char* row(int64_t r) const {
        return page(r / rows_per_page_) + static_cast<uint64_t>(r % rows_per_page_) * row_stride_;
    }

    // f(first position, its row, count) for each run of rows begin..end-1
    // that share a page.
    template <typename F>
    void for_each_run(int64_t begin, int64_t end, F&& f) const {
        for (int64_t r0 = begin; r0 < end;) {
            const int64_t n = std::min(rows_per_page_ - r0 % rows_per_page_, end - r0);
            f(r0, static_cast<const unsigned char*>(row(r0)), n);
            r0 += n;
        }
    }
    template <typename F>
    void for_each_run(int64_t n, F&& f) const {
        for_each_run(0, n, f);
    }

private:
    unsigned char* page(int64_t logical) const {
        if (table_ == nullptr) return data_;
        const auto id = static_cast<uint64_t>(i32_row(*table_, logical)[kind_]);
        return data_ + id * page_stride_;
    }

    unsigned char* data_;
    uint64_t row_stride_;
    uint64_t page_stride_ = 0;
    int64_t rows_per_page_;
    const dwell_tensor* table_ = nullptr;
    int kind_ = 0;
};

// What the contents of positions and the page table must satisfy, checked
// before anything is written: every position inside the cache, every page
// id the op touches inside the page space, and every page it writes named
// by no other table entry it reads (else a write would change, or race
// with, another row it attends over).
void check_positions_and_pages(const NodeArgs& a, bool paged, const int32_t* pos,
                               int64_t n_tokens) {
    const dwell_tensor& cache = a.input(3);
    const int64_t rows_per_page = cache.ne[1];
    const int64_t n_logical = paged ? a.input(4).ne[1] : 1;
    const int64_t capacity = rows_per_page * n_logical;
    int32_t max_pos = 0;
    for (int64_t t = 0; t < n_tokens; ++t) {
        if (pos[t] < 0 || pos[t] >= capacity) {
            throw KernelError(
                DWELL_ERR_INVALID_ARGUMENT,
                "position " + std::to_string(pos[t]) + " of token " + std::to_string(t) +
                    (paged ? " is beyond the page table's " + std::to_string(n_logical) +
                                 " logical pages of " + std::to_string(rows_per_page) + " rows"
                           : " is outside the cache's " + std::to_string(capacity) + " rows"));
        }
        max_pos = std::max(max_pos, pos[t]);
    }
    if (!paged) return;

    const dwell_tensor& table = a.input(4);
    const int64_t n_pages = cache.ne[2];
    const int64_t used = max_pos / rows_per_page + 1;
    const auto entry = [&](int64_t lp, int kind) { return i32_row(table, lp)[kind]; };
    for (int64_t lp = 0; lp < used; ++lp) {
        for (int kind = 0; kind < 2; ++kind) {
            if (entry(lp, kind) < 0 || entry(lp, kind) >= n_pages) {
                throw KernelError(
                    DWELL_ERR_INVALID_ARGUMENT,
                    "page table entry " + std::to_string(lp) + " (" + kKindName[kind] +
                        ") names page " + std::to_string(entry(lp, kind)) +
                        ", outside the page space's " + std::to_string(n_pages) + " pages");
            }
        }
    }
    // A scan per written page, not a sort of the table: decoding writes one
    // logical page and must not pay for the context's length more than once.
    std::vector<int64_t> written(static_cast<size_t>(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t) written[static_cast<size_t>(t)] = pos[t] / rows_per_page;
    std::sort(written.begin(), written.end());
    written.erase(std::unique(written.begin(), written.end()), written.end());
    for (const int64_t lp : written) {
        for (int kind = 0; kind < 2; ++kind) {
            const int32_t id = entry(lp, kind);
            int64_t named = 0;
            for (int64_t other = 0; other < used; ++other) {
                named += (entry(other, 0) == id) + (entry(other, 1) == id);
            }
            if (named > 1) {
                throw KernelError(DWELL_ERR_INVALID_ARGUMENT,
                                  "page " + std::to_string(id) + " is written through page " +
                                      "table entry " + std::to_string(lp) + " (" + kKindName[kind] +
                                      ") but named by another entry too");
            }
        }
    }
}

// The offsets of an FP8 key cache's rows (quant.h): the sum of the decoded
// rows before a block, kept across the tokens of one call so a prompt adds
// each row once.
class Fp8KeyOffsets {
public:
    Fp8KeyOffsets(const CacheRows& rows, int64_t width)
        : rows_(&rows), sum_(static_cast<size_t>(width)), offset_(static_cast<size_t>(width)) {}

    // offset(p); every row before p's block must be stored. A row is only
    // ever written right after its offset is asked for, at or after the
    // summed rows, so the sum goes stale only when positions go back,
    // which restarts it.
    const float* at(const VecKernels& vk, int64_t p) {
        const int64_t start = p - p % DWELL_FP8_KEY_BLOCK;
        if (start < summed_) restart();
        if (ones_.size() < static_cast<size_t>(start - summed_)) {
            ones_.assign(static_cast<size_t>(start - summed_), 1.0f);
        }
        rows_->for_each_run(summed_, start, [&](int64_t, const unsigned char* rows, int64_t n) {
            vk.axpy_fp8(ones_.data(), rows, static_cast<int64_t>(rows_->row_stride()), n,
                        sum_.data(), static_cast<int64_t>(sum_.size()));
        });
        summed_ = start;
        vk.scale(sum_.data(), 1.0f / DWELL_FP8_KEY_BLOCK, offset_.data(),
                 static_cast<int64_t>(offset_.size()));
        return offset_.data();
    }

private:
    void restart() {
        std::fill(sum_.begin(), sum_.end(), 0.0f);
        summed_ = 0;
    }

    const CacheRows* rows_;
    std::vector<float> sum_, offset_, ones_;
    int64_t summed_ = 0;
};

// Raw q . code dots of an FP8 key cache to q . key: each gets 1/16 of the
// raw dots of the blocks before its own.
void add_key_offsets(float* s, int64_t n) {
    double before = 0.0;
    for (int64_t j0 = 0; j0 < n; j0 += DWELL_FP8_KEY_BLOCK) {
        const auto offset = static_cast<float>(before / DWELL_FP8_KEY_BLOCK);
        const int64_t end = std::min(n, j0 + DWELL_FP8_KEY_BLOCK);
        float block = 0.0f;
        for (int64_t j = j0; j < end; ++j) {
            block += s[j];
            s[j] += offset;
        }
        before += block;
    }
}

// c * tanh(s / c) in place, as llama.cpp caps attention logits: a multiply
// by 1/c, tanh, a multiply by c.
void soft_cap(float* s, int64_t n, float c) {
    const float inv = 1.0f / c;
    for (int64_t j = 0; j < n; ++j) s[j] = c * std::tanh(s[j] * inv);
}

// q . the key row's slice that starts at value `off`.
float key_dot(const VecKernels& vk, dwell_dtype t, const unsigned char* row, int64_t off,
              const float* q, int64_t hd) {
    switch (t) {
        case DWELL_F16:
            return vk.dot_f16_f32(row + 2 * off, q, hd);
        case DWELL_Q8_0:
            return vk.dot_q8_0_f32(row, off, q, hd);
        case DWELL_FP8_E4M3:
            return vk.dot_fp8_f32(row + off, q, hd);
        default:
            return vk.dot_f32(reinterpret_cast<const float*>(row) + off, q, hd);
    }
}

// acc += sum_j w[j] * the slice from value `off` of value row j.
void add_values(const VecKernels& vk, dwell_dtype t, const float* w, const unsigned char* rows,
                int64_t stride, int64_t n_rows, int64_t off, float* acc, int64_t hd) {
    switch (t) {
        case DWELL_F16:
            vk.axpy_f16(w, rows + 2 * off, stride, n_rows, acc, hd);
            return;
        case DWELL_Q8_0:
            vk.axpy_q8_0(w, rows, stride, n_rows, off, acc, hd);
            return;
        case DWELL_FP8_E4M3:
            vk.axpy_fp8(w, rows + off, stride, n_rows, acc, hd);
            return;
        default:
            vk.axpy_f32(w, rows + 4 * off, stride, n_rows, acc, hd);
            return;
    }
}

}  // namespace

bool attention_writes_input4(const dwell_tensor& in4) {
    int32_t dtype;
    std::memcpy(&dtype, &in4.dtype, sizeof dtype);
    return dtype != DWELL_I32;
}

OpVerdict check_attention(const NodeArgs& a) {
    const dwell_tensor& q = a.input(0);
    const dwell_tensor& k = a.input(1);
    const dwell_tensor& v = a.input(2);
    const dwell_tensor& kc = a.input(3);
    const dwell_tensor& vc = a.input(4);
    const dwell_tensor& pos = a.input(5);
    const dwell_tensor& out = a.output();
    const bool paged = !attention_writes_input4(vc);
    if (q.dtype != DWELL_F32 || k.dtype != DWELL_F32 || v.dtype != DWELL_F32) {
        return unsupported("q, k and v must be F32");
    }
    if (!is_cache_dtype(kc.dtype) || (!paged && !is_cache_dtype(vc.dtype))) {
        return unsupported(std::string("KV cache dtype ") + dwell_dtype_name(kc.dtype) +
                           (paged ? "" : std::string("/") + dwell_dtype_name(vc.dtype)) +
                           " is not supported (F32, F16, Q8_0 or FP8_E4M3)");
    }
    const int64_t hd = q.ne[0];
    const int64_t n_head = q.ne[1];
    const int64_t n_tokens = q.ne[2];
    const int64_t n_kv = k.ne[1];
    if (q.ne[3] != 1) return invalid("q must be [hd, n_head, T], got " + shape_string(q));
    if (k.ne[0] != hd || k.ne[2] != n_tokens || k.ne[3] != 1 || !same_shape(k, v)) {
        return invalid("k and v must be [" + std::to_string(hd) + ", n_kv, " +
                       std::to_string(n_tokens) + "], got " + shape_string(k) + " and " +
                       shape_string(v));
    }
    if (n_head % n_kv != 0) {
        return invalid("n_head " + std::to_string(n_head) + " is not a multiple of n_kv " +
                       std::to_string(n_kv));
    }
    const std::string width = std::to_string(hd * n_kv);
    if (paged) {
        if (kc.ne[0] != hd * n_kv || kc.ne[3] != 1) {
            return invalid("the page space must be [" + width + ", rows_per_page, n_pages], got " +
                           shape_string(kc));
        }
        // Pages may be padded, never overlap.
        if (kc.ne[2] > 1 && kc.nb[2] < kc.nb[1] * static_cast<uint64_t>(kc.ne[1])) {
            return invalid("page bytes nb[2] = " + std::to_string(kc.nb[2]) + " are fewer than " +
                           std::to_string(kc.ne[1]) + " rows of " + std::to_string(kc.nb[1]) +
                           " bytes");
        }
        if (vc.ne[0] != 2 || vc.ne[2] != 1 || vc.ne[3] != 1) {
            return invalid("the page table must be I32 [2, n_logical], got " + shape_string(vc));
        }
    } else if (kc.ne[0] != hd * n_kv || kc.ne[2] != 1 || kc.ne[3] != 1 || !same_shape(kc, vc)) {
        return invalid("caches must be [" + width + ", n_ctx], got " + shape_string(kc) + " and " +
                       shape_string(vc));
    }
    // op_dispatch's layout check already demands whole blocks; this says why.
    if (kc.dtype == DWELL_Q8_0 && (hd * n_kv) % DWELL_QK8_0 != 0) {
        return invalid("q8_0 cache rows of " + width + " values are not whole blocks of 32");
    }
    if (pos.dtype != DWELL_I32 || pos.ne[0] != n_tokens || pos.ne[1] != 1 || pos.ne[2] != 1 ||
        pos.ne[3] != 1) {
        return invalid("positions must be I32 [" + std::to_string(n_tokens) + "], got " +
                       shape_string(pos));
    }
    if (out.dtype != DWELL_F32 || !same_shape(out, q)) {
        return invalid("output must be F32 " + shape_string(q) + ", got " + shape_string(out));
    }
    if (a.node->iparams[0] < 0) {
        return invalid("the window iparams[0] = " + std::to_string(a.node->iparams[0]) +
                       " must be >= 0");
    }
    const float cap = a.node->fparams[1];
    if (!(cap >= 0.0f) || !std::isfinite(cap)) {
        return invalid("the soft-cap fparams[1] = " + std::to_string(cap) + " must be >= 0");
    }
    // The kernel writes the caches and reads everything else: no written
    // cache may be another input.
    const int n_written = paged ? 1 : 2;
    for (int i = 0; i < 6; ++i) {
        for (int j = 3; j < 3 + n_written; ++j) {
            if (i != j && a.node->inputs[i] == a.node->inputs[j]) {
                return invalid(paged ? "the page space must not be another input"
                                     : "the KV caches must be distinct tensors");
            }
        }
    }
    return std::nullopt;
}

namespace {

// One ATTENTION node's operands and shapes, as the store and the attention
// read them.
struct Attention {
    const dwell_tensor& q;
    const dwell_tensor& k;
    const dwell_tensor& v;
    const dwell_tensor& out;
    const int32_t* pos;
    int64_t hd, n_head, n_tokens, n_kv, width, group;
    float scale;
    int64_t window;  // ABI 1.5: the last `window` rows only (0: all)
    float cap;       // ABI 1.5: soft-cap of the scaled scores (0: none)
    CacheRows k_rows, v_rows;
    dwell_dtype k_type, v_type;
    int64_t n_keys_max;  // the longest row of scores
};

// The node's operands; throws when a position or a page is out of range.
Attention attention_of(const NodeArgs& a) {
    const dwell_tensor& q = a.input(0);
    const dwell_tensor& k = a.input(1);
    const int32_t* pos = i32_row(a.input(5), 0);
    const int64_t n_tokens = q.ne[2];
    const bool paged = !attention_writes_input4(a.input(4));
    const CacheRows k_rows = paged ? CacheRows(a.input(3), a.input(4), 0) : CacheRows(a.input(3));
    const CacheRows v_rows = paged ? CacheRows(a.input(3), a.input(4), 1) : CacheRows(a.input(4));
    const dwell_dtype k_type = a.input(3).dtype;
    const dwell_dtype v_type = paged ? k_type : a.input(4).dtype;

    check_positions_and_pages(a, paged, pos, n_tokens);
    const int64_t n_keys_max = *std::max_element(pos, pos + n_tokens) + int64_t{1};
    return Attention{q,
                     k,
                     a.input(2),
                     a.output(),
                     pos,
                     q.ne[0],
                     q.ne[1],
                     n_tokens,
                     k.ne[1],
                     q.ne[0] * k.ne[1],
                     q.ne[1] / k.ne[1],
                     a.node->fparams[0],
                     a.node->iparams[0],
                     a.node->fparams[1],
                     k_rows,
                     v_rows,
                     k_type,
                     v_type,
                     n_keys_max};
}

// Stores k and v of token t as cache row pos[t]. Serial, in token order:
// two tokens with one position must leave the later token's values, an
// FP8 key's offset needs the rows before it, and this part is small next
// to the attention. Whole rows, since a Q8_0 block may span two heads.
void store_new_rows(const Attention& x, const VecKernels& vk) {
    const int64_t hd = x.hd, n_kv = x.n_kv, group = x.group;
    std::vector<float> row(static_cast<size_t>(x.width));
    const auto gather = [&](const dwell_tensor& src, int64_t t) {
        for (int64_t h = 0; h < n_kv; ++h) std::copy_n(f32_row(src, h, t), hd, row.data() + h * hd);
    };
    Fp8KeyOffsets key_offsets(x.k_rows, x.k_type == DWELL_FP8_E4M3 ? x.width : 0);
    std::vector<float> q_sum(static_cast<size_t>(hd));
    const auto store_fp8_key = [&](int64_t t) {
        const float* offset = key_offsets.at(vk, x.pos[t]);
        auto* dst = reinterpret_cast<uint8_t*>(x.k_rows.row(x.pos[t]));
        for (int64_t h = 0; h < n_kv; ++h) {
            std::fill(q_sum.begin(), q_sum.end(), 0.0f);
            for (int64_t hh = 0; hh < group; ++hh) {
                vk.add(q_sum.data(), f32_row(x.q, h * group + hh, t), q_sum.data(), hd);
            }
            dwell_fp8_encode_key(row.data() + h * hd, offset + h * hd, q_sum.data(), hd,
                                 dst + h * hd);
        }
    };
    for (int64_t t = 0; t < x.n_tokens; ++t) {
        gather(x.k, t);
        if (x.k_type == DWELL_FP8_E4M3) {
            store_fp8_key(t);
        } else {
            store_row(x.k_type, row.data(), x.k_rows.row(x.pos[t]), x.width);
        }
        gather(x.v, t);
        store_row(x.v_type, row.data(), x.v_rows.row(x.pos[t]), x.width);
    }
}

// One thread's working rows for the query heads of one KV head: their
// queries, their scores (a row of n_keys_max each) and their value sums.
struct AttendScratch {
    explicit AttendScratch(const Attention& x)
        : qv(static_cast<size_t>(x.group * x.hd)),
          acc(static_cast<size_t>(x.group * x.hd)),
          scores(static_cast<size_t>(x.group) * static_cast<size_t>(x.n_keys_max)) {}
    std::vector<float> qv, acc, scores;
};

// The queries of the heads sharing KV head g at token t, rounded to fp16
// when they meet an F16 key cache.
void load_queries(const Attention& x, const VecKernels& vk, int64_t g, int64_t t,
                  std::vector<float>& qv) {
    for (int64_t hh = 0; hh < x.group; ++hh) {
        const float* qrow = f32_row(x.q, g * x.group + hh, t);
        float* dst = qv.data() + hh * x.hd;
        if (x.k_type == DWELL_F16) {
            vk.round_f16(qrow, dst, x.hd);
        } else {
            std::copy_n(qrow, x.hd, dst);
        }
    }
}

// The first cache row inside the window of a query that sees n_keys rows.
int64_t first_row(const Attention& x, int64_t n_keys) {
    return x.window > 0 ? std::max<int64_t>(0, n_keys - x.window) : 0;
}

// The raw q.k dots over cache rows first..n_keys-1, each cached row read
// once for every query head of the group. An FP8 key's offset needs the raw
// dots of every earlier block, so its dots still start at row 0.
void score_keys(const Attention& x, const VecKernels& vk, int64_t kv_off, int64_t n_keys,
                AttendScratch& s) {
    const auto k_stride = static_cast<int64_t>(x.k_rows.row_stride());
    const auto ld = static_cast<size_t>(x.n_keys_max);
    const int64_t dot_first = x.k_type == DWELL_FP8_E4M3 ? 0 : first_row(x, n_keys);
    x.k_rows.for_each_run(dot_first, n_keys, [&](int64_t r0, const unsigned char* rows, int64_t n) {
        if (x.k_type == DWELL_F16) {
            vk.dots_f16_f32(rows + 2 * kv_off, k_stride, n, s.qv.data(), x.hd, x.group, x.hd,
                            s.scores.data() + r0, x.n_keys_max);
            return;
        }
        for (int64_t hh = 0; hh < x.group; ++hh) {
            float* row = s.scores.data() + static_cast<size_t>(hh) * ld + r0;
            for (int64_t j = 0; j < n; ++j) {
                row[j] = key_dot(vk, x.k_type, rows + j * k_stride, kv_off, s.qv.data() + hh * x.hd,
                                 x.hd);
            }
        }
    });
}

// The dots to softmax weights, head by head, over the rows in the window
// (scaled, soft-capped when the node asks, then normalised).
void softmax_scores(const Attention& x, const VecKernels& vk, int64_t n_keys, AttendScratch& s) {
    const auto ld = static_cast<size_t>(x.n_keys_max);
    const int64_t first = first_row(x, n_keys);
    const int64_t n_seen = n_keys - first;
    for (int64_t hh = 0; hh < x.group; ++hh) {
        float* row = s.scores.data() + static_cast<size_t>(hh) * ld;
        if (x.k_type == DWELL_FP8_E4M3) add_key_offsets(row, n_keys);
        row += first;
        vk.scale(row, x.scale, row, n_seen);
        if (x.cap > 0.0f) soft_cap(row, n_seen, x.cap);
        softmax_row(vk, row, row, n_seen);
        // The softmax weights meet an F16 value cache as fp16 too.
        if (x.v_type == DWELL_F16) vk.round_f16(row, row, n_seen);
    }
}

// The weighted sums of value rows first..n_keys-1 into s.acc.
void sum_values(const Attention& x, const VecKernels& vk, int64_t kv_off, int64_t n_keys,
                AttendScratch& s) {
    const auto v_stride = static_cast<int64_t>(x.v_rows.row_stride());
    const auto ld = static_cast<size_t>(x.n_keys_max);
    std::fill(s.acc.begin(), s.acc.end(), 0.0f);
    x.v_rows.for_each_run(
        first_row(x, n_keys), n_keys, [&](int64_t r0, const unsigned char* rows, int64_t n) {
            if (x.v_type == DWELL_F16) {
                vk.axpy_f16_multi(s.scores.data() + r0, x.n_keys_max, rows + 2 * kv_off, v_stride,
                                  n, s.acc.data(), x.hd, x.group, x.hd);
                return;
            }
            for (int64_t hh = 0; hh < x.group; ++hh) {
                add_values(vk, x.v_type, s.scores.data() + static_cast<size_t>(hh) * ld + r0, rows,
                           v_stride, n, kv_off, s.acc.data() + hh * x.hd, x.hd);
            }
        });
}

// The query heads sharing KV head g, at token t, over cache rows
// 0..pos[t] (the last `window` of them when the node has one); their
// outputs written.
void attend(const Attention& x, const VecKernels& vk, int64_t g, int64_t t, AttendScratch& s) {
    const int64_t kv_off = g * x.hd;
    const int64_t n_keys = static_cast<int64_t>(x.pos[t]) + 1;
    load_queries(x, vk, g, t, s.qv);
    score_keys(x, vk, kv_off, n_keys, s);
    softmax_scores(x, vk, n_keys, s);
    sum_values(x, vk, kv_off, n_keys, s);
    for (int64_t hh = 0; hh < x.group; ++hh) {
        std::copy_n(s.acc.data() + hh * x.hd, x.hd, f32_row(x.out, g * x.group + hh, t));
    }
}

}  // namespace

void run_attention(const NodeArgs& a, ThreadPool& pool) {
    const Attention x = attention_of(a);
    const VecKernels& vk = vec_kernels();
    store_new_rows(x, vk);
    // Items are (KV head, token), KV-head-major: causal rows cost in
    // proportion to their position, so token-major ranges would give the
    // last thread most of a prompt's work, while every head costs the same.
    // The query heads that share a KV head (GQA) are done together, so each
    // cached row is read and widened once for all of them.
    pool.parallel_for(x.n_tokens * x.n_kv, [&](int64_t begin, int64_t end) {
        AttendScratch scratch(x);
        for (int64_t item = begin; item < end; ++item) {
            attend(x, vk, item / x.n_tokens, item % x.n_tokens, scratch);
        }
    });
}

}  // namespace dwell::cpu
