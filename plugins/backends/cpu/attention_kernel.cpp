// ATTENTION: q [hd, n_head, T], k, v [hd, n_kv, T] F32, k_cache, v_cache
// [hd * n_kv, n_ctx] F32 or F16, positions I32 [T] -> [hd, n_head, T] F32.
//
// First stores k/v of token t into cache row positions[t], then each
// (token, head) attends causally over cache rows 0..positions[t] with kv head
// h / (n_head / n_kv).
//
// Numerics follow llama.cpp's CPU path: with an F16 key cache, q is rounded
// to fp16 before the dot products (ggml converts the f32 operand to the
// f16 vec-dot type), products are accumulated in f32, and the softmax sums
// its exps in double. The dots, softmax and weighted value sums run on the
// vector math table (vec_math.hpp); the value sum adds the positions in
// order, one multiply and one add per element, so only the q.k dots and the
// exps round differently from the scalar table.
#include <algorithm>
#include <vector>

#include "kernels.hpp"
#include "row_quantize.hpp"
#include "tensor_access.hpp"
#include "vec_math.hpp"

namespace dwell::cpu {

namespace {

bool is_cache_dtype(dwell_dtype t) {
    return t == DWELL_F32 || t == DWELL_F16;
}

}  // namespace

OpVerdict check_attention(const NodeArgs& a) {
    const dwell_tensor& q = a.input(0);
    const dwell_tensor& k = a.input(1);
    const dwell_tensor& v = a.input(2);
    const dwell_tensor& kc = a.input(3);
    const dwell_tensor& vc = a.input(4);
    const dwell_tensor& pos = a.input(5);
    const dwell_tensor& out = a.output();
    if (q.dtype != DWELL_F32 || k.dtype != DWELL_F32 || v.dtype != DWELL_F32) {
        return unsupported("q, k and v must be F32");
    }
    if (!is_cache_dtype(kc.dtype) || !is_cache_dtype(vc.dtype)) {
        return unsupported(std::string("KV cache dtype ") + dwell_dtype_name(kc.dtype) + "/" +
                           dwell_dtype_name(vc.dtype) + " is not supported (F32 or F16)");
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
    if (kc.ne[0] != hd * n_kv || kc.ne[2] != 1 || kc.ne[3] != 1 || !same_shape(kc, vc)) {
        return invalid("caches must be [" + std::to_string(hd * n_kv) + ", n_ctx], got " +
                       shape_string(kc) + " and " + shape_string(vc));
    }
    if (pos.dtype != DWELL_I32 || pos.ne[0] != n_tokens || pos.ne[1] != 1 || pos.ne[2] != 1 ||
        pos.ne[3] != 1) {
        return invalid("positions must be I32 [" + std::to_string(n_tokens) + "], got " +
                       shape_string(pos));
    }
    if (out.dtype != DWELL_F32 || !same_shape(out, q)) {
        return invalid("output must be F32 " + shape_string(q) + ", got " + shape_string(out));
    }
    // The kernel writes the caches and reads q/k/v: none of them may be the
    // output or a cache.
    for (int i = 0; i < 6; ++i) {
        for (int j = 3; j < 5; ++j) {
            if (i != j && a.node->inputs[i] == a.node->inputs[j]) {
                return invalid("the KV caches must be distinct tensors");
            }
        }
    }
    return std::nullopt;
}

void run_attention(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& q = a.input(0);
    const dwell_tensor& k = a.input(1);
    const dwell_tensor& v = a.input(2);
    const dwell_tensor& kc = a.input(3);
    const dwell_tensor& vc = a.input(4);
    const dwell_tensor& out = a.output();
    const int32_t* pos = i32_row(a.input(5), 0);
    const int64_t hd = q.ne[0];
    const int64_t n_head = q.ne[1];
    const int64_t n_tokens = q.ne[2];
    const int64_t n_kv = k.ne[1];
    const int64_t n_ctx = kc.ne[1];
    const int64_t group = n_head / n_kv;
    const float scale = a.node->fparams[0];

    for (int64_t t = 0; t < n_tokens; ++t) {
        if (pos[t] < 0 || pos[t] >= n_ctx) {
            throw KernelError(DWELL_ERR_INVALID_ARGUMENT, "position " + std::to_string(pos[t]) +
                                                              " of token " + std::to_string(t) +
                                                              " is outside the cache's " +
                                                              std::to_string(n_ctx) + " rows");
        }
    }

    // Serial, in token order: two tokens with one position must leave the
    // later token's values, and this part is tiny next to the attention.
    const size_t kc_elem = dwell_dtype_block_bytes(kc.dtype);
    const size_t vc_elem = dwell_dtype_block_bytes(vc.dtype);
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < n_kv; ++h) {
            const int64_t off = h * hd;
            store_row(kc.dtype, f32_row(k, h, t), row_at(kc, pos[t]) + off * kc_elem, hd);
            store_row(vc.dtype, f32_row(v, h, t), row_at(vc, pos[t]) + off * vc_elem, hd);
        }
    }

    const bool k_f16 = kc.dtype == DWELL_F16;
    const bool v_f16 = vc.dtype == DWELL_F16;
    const VecKernels& vk = vec_kernels();
    // Items are head-major: causal rows cost in proportion to their
    // position, so token-major ranges would give the last thread most of a
    // prompt's work, while every head costs the same.
    pool.parallel_for(n_tokens * n_head, [&](int64_t begin, int64_t end) {
        std::vector<float> qv(static_cast<size_t>(hd));
        std::vector<float> acc(static_cast<size_t>(hd));
        std::vector<float> scores(static_cast<size_t>(n_ctx));
        for (int64_t item = begin; item < end; ++item) {
            const int64_t h = item / n_tokens;
            const int64_t t = item % n_tokens;
            const int64_t kv_off = (h / group) * hd;
            const int64_t n_keys = static_cast<int64_t>(pos[t]) + 1;

            const float* qrow = f32_row(q, h, t);
            if (k_f16) {
                vk.round_f16(qrow, qv.data(), hd);
                for (int64_t j = 0; j < n_keys; ++j) {
                    const unsigned char* krow = row_at(kc, j) + kv_off * kc_elem;
                    scores[static_cast<size_t>(j)] = scale * vk.dot_f16_f32(krow, qv.data(), hd);
                }
            } else {
                for (int64_t j = 0; j < n_keys; ++j) {
                    const auto* krow = reinterpret_cast<const float*>(row_at(kc, j)) + kv_off;
                    scores[static_cast<size_t>(j)] = scale * vk.dot_f32(krow, qrow, hd);
                }
            }
            softmax_row(vk, scores.data(), scores.data(), n_keys);

            std::fill(acc.begin(), acc.end(), 0.0f);
            const unsigned char* v0 = row_at(vc, 0) + kv_off * vc_elem;
            const auto v_stride = static_cast<int64_t>(vc.nb[1]);
            if (v_f16) {
                // The softmax weights meet an F16 value cache as fp16 too.
                vk.round_f16(scores.data(), scores.data(), n_keys);
                vk.axpy_f16(scores.data(), v0, v_stride, n_keys, acc.data(), hd);
            } else {
                vk.axpy_f32(scores.data(), v0, v_stride, n_keys, acc.data(), hd);
            }
            std::copy(acc.begin(), acc.end(), f32_row(out, h, t));
        }
    });
}

}  // namespace dwell::cpu
