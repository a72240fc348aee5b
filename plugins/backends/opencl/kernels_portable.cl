// dwell's portable OpenCL kernels: OpenCL C 1.2, fp16 only as storage
// (vload_half / vstore_half), no subgroups, so they build on any OpenCL
// 1.2 device (PoCL in CI). One work-item per output element or row; the
// host wraps dwell's host memory in buffers and passes byte strides.
//
// Weight dtypes (dwell_dtype values): 0 F32, 1 F16, 3 Q8_0, 4 Q4_0.

#define DT_F32 0
#define DT_F16 1
#define DT_Q8_0 3
#define DT_Q4_0 4
#define DT_FP8 8

// OCP FP8 E4M3FN: bias 7, 3 mantissa bits, no infinities, 0x7f the NaN.
float fp8_to_f32(uchar v) {
    const uint sign = (uint)(v & 0x80) << 24;
    const uint mag = v & 0x7f;
    if (mag == 0x7f) return as_float(sign | 0x7fc00000u);
    if (mag >= 8) return as_float(sign | ((mag + ((127u - 7u) << 3)) << 20));
    const float f = (float)mag * (1.0f / 512.0f);
    return sign ? -f : f;
}

// Round to nearest even, saturating at 448 (as the host's encoder).
uchar f32_to_fp8(float f) {
    const uint x = as_uint(f);
    const uchar sign = (uchar)((x >> 24) & 0x80);
    const uint a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7f;
    if (a >= 0x43e00000u) return sign | 0x7e;
    if (a < 0x3c800000u) {
        const float s = as_float(a) * 512.0f;
        uint m = (uint)s;
        const float rest = s - (float)m;
        if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
        return sign | (uchar)m;
    }
    const uint r = a + 0x7ffffu + ((a >> 20) & 1u);
    return sign | (uchar)((r >> 20) - ((127u - 7u) << 3));
}

// Element j of a row of `dtype` starting at `row`.
float load_elem(__global const uchar* row, int dtype, int j) {
    if (dtype == DT_F32) return ((__global const float*)row)[j];
    if (dtype == DT_FP8) return fp8_to_f32(row[j]);
    if (dtype == DT_F16) return vload_half(j, (__global const half*)row);
    if (dtype == DT_Q8_0) {
        __global const uchar* b = row + (j / 32) * 34;
        const float d = vload_half(0, (__global const half*)b);
        return d * (float)((__global const char*)(b + 2))[j % 32];
    }
    // Q4_0: byte i of qs holds element i (low nibble) and i + 16 (high).
    __global const uchar* b = row + (j / 32) * 18;
    const float d = vload_half(0, (__global const half*)b);
    const int i = j % 32;
    const uchar q = b[2 + (i & 15)];
    return d * (float)((i < 16 ? (q & 15) : (q >> 4)) - 8);
}

// sum_k W[n][k] * x[k] over a whole row.
float dot_row(__global const uchar* w, int dtype, __global const float* x, int k) {
    float s = 0.0f;
    if (dtype == DT_F32) {
        __global const float* r = (__global const float*)w;
        for (int i = 0; i < k; ++i) s += r[i] * x[i];
    } else if (dtype == DT_F16) {
        for (int i = 0; i < k; ++i) s += vload_half(i, (__global const half*)w) * x[i];
    } else if (dtype == DT_Q8_0) {
        for (int b = 0; b < k / 32; ++b) {
            __global const uchar* blk = w + b * 34;
            __global const char* q = (__global const char*)(blk + 2);
            float t = 0.0f;
            for (int i = 0; i < 32; ++i) t += (float)q[i] * x[b * 32 + i];
            s += vload_half(0, (__global const half*)blk) * t;
        }
    } else {
        for (int b = 0; b < k / 32; ++b) {
            __global const uchar* blk = w + b * 18;
            float t = 0.0f;
            for (int i = 0; i < 16; ++i) {
                const uchar q = blk[2 + i];
                t += (float)((q & 15) - 8) * x[b * 32 + i] + (float)((q >> 4) - 8) * x[b * 32 + 16 + i];
            }
            s += vload_half(0, (__global const half*)blk) * t;
        }
    }
    return s;
}

// out [n, k_ids]: row ids[r] of the table, dequantized. Global (n, k_ids).
__kernel void get_rows(__global const uchar* table, ulong table_row_bytes, int dtype,
                       __global const int* ids, __global float* out, int n) {
    const int j = get_global_id(0);
    const int r = get_global_id(1);
    out[(long)r * n + j] = load_elem(table + (ulong)ids[r] * table_row_bytes, dtype, j);
}

// out [N, M] = W [K, N] x [K, M]. Global (N, M).
__kernel void matmul(__global const uchar* w, ulong w_row_bytes, int dtype,
                     __global const float* x, __global float* out, int k, int n_out) {
    const int n = get_global_id(0);
    const int m = get_global_id(1);
    out[(long)m * n_out + n] = dot_row(w + (ulong)n * w_row_bytes, dtype, x + (long)m * k, k);
}

// op 0: add, 1: mul; b has `b_len` elements repeated (broadcast) or all. Global (count).
__kernel void binary(__global const float* a, __global const float* b, __global float* out,
                     int op, int b_len) {
    const int i = get_global_id(0);
    const float y = b[i % b_len];
    out[i] = op == 0 ? a[i] + y : a[i] * y;
}

// op 0: scale by f, 1: silu, 2: gelu (tanh), 3: sigmoid, 4: softplus (x
// itself above 20, as graph.h says). Global (count).
__kernel void unary(__global const float* a, __global float* out, int op, float f) {
    const int i = get_global_id(0);
    const float x = a[i];
    if (op == 0) {
        out[i] = x * f;
    } else if (op == 1) {
        out[i] = x / (1.0f + exp(-x));
    } else if (op == 3) {
        out[i] = 1.0f / (1.0f + exp(-x));
    } else if (op == 4) {
        out[i] = x > 20.0f ? x : log(1.0f + exp(x));
    } else {
        out[i] = 0.5f * x * (1.0f + tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
    }
}

__kernel void swiglu(__global const float* gate, __global const float* up, __global float* out) {
    const int i = get_global_id(0);
    const float g = gate[i];
    out[i] = g / (1.0f + exp(-g)) * up[i];
}

// SHORT_CONV's outputs (graph.h): out[t][c] = sum_j w[c][j] * xx[t + j][c],
// xx the K - 1 state rows then the T rows of x. One output per work-item.
// Global (C, T).
__kernel void short_conv(__global const float* x, __global const uchar* w, int w_f16,
                         __global const float* state, __global float* out, int C, int K) {
    const int c = get_global_id(0);
    const int t = get_global_id(1);
    float s = 0.0f;
    for (int j = 0; j < K; ++j) {
        const int r = t + j;
        const float v = r < K - 1 ? state[(long)r * C + c] : x[(long)(r - (K - 1)) * C + c];
        const float tap = w_f16 ? vload_half(c * K + j, (__global const half*)w)
                                : ((__global const float*)w)[c * K + j];
        s += tap * v;
    }
    out[(long)t * C + c] = s;
}

// SHORT_CONV's state after the batch: the last K - 1 rows of xx, in place.
// Row j reads row T + j > j, which this loop has not overwritten yet. One
// channel per work-item. Global (C).
__kernel void short_conv_state(__global const float* x, __global float* state, int C, int K,
                               int T) {
    const int c = get_global_id(0);
    for (int j = 0; j < K - 1; ++j) {
        const int r = T + j;
        state[(long)j * C + c] =
            r < K - 1 ? state[(long)r * C + c] : x[(long)(r - (K - 1)) * C + c];
    }
}

// One row per work-item. Global (rows).
__kernel void rms_norm(__global const float* x, __global float* out, int n, float eps) {
    const long r = get_global_id(0);
    __global const float* row = x + r * n;
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += row[i] * row[i];
    const float scale = 1.0f / sqrt(s / (float)n + eps);
    for (int i = 0; i < n; ++i) out[r * n + i] = row[i] * scale;
}

__kernel void softmax(__global const float* x, __global float* out, int n) {
    const long r = get_global_id(0);
    __global const float* row = x + r * n;
    float m = row[0];
    for (int i = 1; i < n; ++i) m = fmax(m, row[i]);
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += exp(row[i] - m);
    for (int i = 0; i < n; ++i) out[r * n + i] = exp(row[i] - m) / s;
}

// x [hd, n_head, T]; global (n_rot / 2, n_head, T). Dims past n_rot are
// copied by the host-side `copy` first when out != x.
__kernel void rope(__global const float* x, __global float* out, __global const int* pos,
                   int hd, int n_head, int n_rot, int neox, float base, float fscale) {
    const int i = get_global_id(0);
    const int h = get_global_id(1);
    const int t = get_global_id(2);
    const long off = ((long)t * n_head + h) * hd;
    const float theta = (float)pos[t] * fscale * pow(base, -2.0f * (float)i / (float)n_rot);
    const float c = cos(theta), s = sin(theta);
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + n_rot / 2 : 2 * i + 1;
    const float x0 = x[off + a], x1 = x[off + b];
    out[off + a] = x0 * c - x1 * s;
    out[off + b] = x0 * s + x1 * c;
}

__kernel void copy_tail(__global const float* x, __global float* out, int hd, int n_rot) {
    const long row = get_global_id(1);
    const int i = n_rot + get_global_id(0);
    out[row * hd + i] = x[row * hd + i];
}

// Address of cache row r of kind (0 K, 1 V): paged when table != 0 rows.
// A paged cache buffer starts at page `base_page` of the page space.
__global uchar* cache_row(__global uchar* kc, __global uchar* vc, __global const int* table,
                          int paged, int base_page, ulong row_bytes, ulong page_bytes,
                          int rows_per_page, int kind, int r) {
    if (!paged) return (kind ? vc : kc) + (ulong)r * row_bytes;
    const int page = table[(r / rows_per_page) * 2 + kind] - base_page;
    return kc + (ulong)page * page_bytes + (ulong)(r % rows_per_page) * row_bytes;
}

// One value in a row of dtype F32, F16 or FP8.
void store_elem(__global uchar* row, int dtype, int i, float x) {
    if (dtype == DT_F16) {
        vstore_half_rte(x, i, (__global half*)row);
    } else if (dtype == DT_FP8) {
        row[i] = f32_to_fp8(x);
    } else {
        ((__global float*)row)[i] = x;
    }
}

// Block b of a Q8_0 row from 32 values: d = max|x| / 127, q = round(x / d).
void store_q8_0_block(__global uchar* row, int b, __global const float* x) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = fmax(amax, fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    __global uchar* blk = row + b * 34;
    vstore_half_rte(d, 0, (__global half*)blk);
    for (int i = 0; i < 32; ++i) ((__global char*)(blk + 2))[i] = (char)rint(x[i] * id);
}

// The E4M3 code on the far side of x from its nearest code c (quant.h,
// dwell_fp8_e4m3_other_neighbour).
uchar fp8_other_neighbour(uchar c, float x) {
    const float v = fp8_to_f32(c);
    const uchar mag = c & 0x7f, sign = c & 0x80;
    if (v == x || isnan(x)) return c;
    if (mag == 0) return (x < 0.0f ? 0x80 : 0) | 1;
    if (fabs(v) < fabs(x)) return mag >= 0x7e ? c : (sign | (mag + 1));
    return sign | (mag - 1);
}

#define FP8_KEY_BLOCK 16

// FP8 keys (quant.h: offset keys rounded against the token's own query).
// One work-item per KV head walks the tokens in order, since a key's offset
// sums the stored rows before its block. Global (n_kv).
__kernel void attention_store_fp8_keys(__global const float* q, __global const float* k,
                                       __global uchar* kc, __global uchar* vc,
                                       __global const int* table, int paged, int base_page,
                                       ulong row_bytes, ulong page_bytes, int rows_per_page,
                                       __global const int* pos, int hd, int n_head, int n_kv,
                                       int n_tokens) {
    const int g = get_global_id(0);
    const int group = n_head / n_kv;
    float sum[256];
    for (int i = 0; i < hd; ++i) sum[i] = 0.0f;
    int summed = 0;
    for (int t = 0; t < n_tokens; ++t) {
        const int p = pos[t];
        const int start = p - p % FP8_KEY_BLOCK;
        if (start < summed) {
            for (int i = 0; i < hd; ++i) sum[i] = 0.0f;
            summed = 0;
        }
        for (; summed < start; ++summed) {
            __global const uchar* r = cache_row(kc, vc, table, paged, base_page, row_bytes,
                                                page_bytes, rows_per_page, 0, summed);
            for (int i = 0; i < hd; ++i) sum[i] += fp8_to_f32(r[g * hd + i]);
        }
        __global uchar* dst = cache_row(kc, vc, table, paged, base_page, row_bytes, page_bytes,
                                        rows_per_page, 0, p) + g * hd;
        __global const float* x = k + ((long)t * n_kv + g) * hd;
        float err = 0.0f;
        for (int i = 0; i < hd; ++i) {
            float qs = 0.0f;
            for (int hh = 0; hh < group; ++hh) qs += q[((long)t * n_head + g * group + hh) * hd + i];
            const float r = x[i] - sum[i] * (1.0f / FP8_KEY_BLOCK);
            const uchar c0 = f32_to_fp8(r);
            const uchar c1 = fp8_other_neighbour(c0, r);
            const float e0 = err + qs * (fp8_to_f32(c0) - r);
            if (c1 == c0) {
                dst[i] = c0;
                if (!isnan(r)) err = e0;
                continue;
            }
            const float e1 = err + qs * (fp8_to_f32(c1) - r);
            const int far = fabs(e1) < fabs(e0);
            dst[i] = far ? c1 : c0;
            err = far ? e1 : e0;
        }
    }
}

// Stores k/v of token t into cache row pos[t]; keys only from first_kind 0
// (FP8 keys have their own kernel). Global (hd * n_kv, T), or
// (hd * n_kv / 32, T) blocks for Q8_0.
__kernel void attention_store(__global const float* k, __global const float* v,
                              __global uchar* kc, __global uchar* vc, __global const int* table,
                              int paged, int base_page, ulong row_bytes, ulong page_bytes,
                              int rows_per_page, __global const int* pos, int width, int dtype,
                              int first_kind) {
    const int i = get_global_id(0);
    const int t = get_global_id(1);
    for (int kind = first_kind; kind < 2; ++kind) {
        __global uchar* row = cache_row(kc, vc, table, paged, base_page, row_bytes, page_bytes,
                                        rows_per_page, kind, pos[t]);
        __global const float* src = (kind ? v : k) + (long)t * width;
        if (dtype == DT_Q8_0) {
            store_q8_0_block(row, i, src + i * 32);
        } else {
            store_elem(row, dtype, i, src[i]);
        }
    }
}

// One (head, token) per work-item, softmax computed online. Global (n_head, T).
__kernel void attention(__global const float* q, __global uchar* kc, __global uchar* vc,
                        __global const int* table, int paged, int base_page, ulong row_bytes,
                        ulong page_bytes, int rows_per_page, __global const int* pos,
                        __global float* out, int hd,
                        int n_head, int n_kv, int dtype, float scale) {
    const int h = get_global_id(0);
    const int t = get_global_id(1);
    const int g = h / (n_head / n_kv);
    __global const float* qh = q + ((long)t * n_head + h) * hd;
    float acc[256];
    for (int i = 0; i < hd; ++i) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    // FP8 keys: each raw dot gets 1/16 of the earlier blocks' raw dots.
    float before = 0.0f, block = 0.0f;
    for (int r = 0; r <= pos[t]; ++r) {
        __global const uchar* kr = cache_row(kc, vc, table, paged, base_page, row_bytes,
                                             page_bytes, rows_per_page, 0, r);
        __global const uchar* vr = cache_row(kc, vc, table, paged, base_page, row_bytes,
                                             page_bytes, rows_per_page, 1, r);
        float s = 0.0f;
        for (int i = 0; i < hd; ++i) s += qh[i] * load_elem(kr, dtype, g * hd + i);
        if (dtype == DT_FP8) {
            if (r % FP8_KEY_BLOCK == 0) {
                before += block;
                block = 0.0f;
            }
            block += s;
            s += before * (1.0f / FP8_KEY_BLOCK);
        }
        s *= scale;
        const float m2 = fmax(m, s);
        const float a = exp(m - m2), e = exp(s - m2);
        l = l * a + e;
        for (int i = 0; i < hd; ++i) acc[i] = acc[i] * a + e * load_elem(vr, dtype, g * hd + i);
        m = m2;
    }
    __global float* o = out + ((long)t * n_head + h) * hd;
    for (int i = 0; i < hd; ++i) o[i] = acc[i] / l;
}

// CPY of F32 rows of n values into F32, F16, FP8 or Q8_0 rows. Global
// (n, rows), or (n / 32, rows) blocks for Q8_0.
__kernel void cpy_f32(__global const float* x, __global uchar* out, ulong out_row_bytes, int n,
                      int dtype) {
    const int i = get_global_id(0);
    const long r = get_global_id(1);
    __global uchar* row = out + r * out_row_bytes;
    if (dtype == DT_Q8_0) {
        store_q8_0_block(row, i, x + r * n + i * 32);
    } else {
        store_elem(row, dtype, i, x[r * n + i]);
    }
}

__kernel void layer_norm(__global const float* x, __global float* out, int n, float eps) {
    const long r = get_global_id(0);
    __global const float* row = x + r * n;
    float mean = 0.0f;
    for (int i = 0; i < n; ++i) mean += row[i];
    mean /= (float)n;
    float var = 0.0f;
    for (int i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
    const float scale = 1.0f / sqrt(var / (float)n + eps);
    for (int i = 0; i < n; ++i) out[r * n + i] = (row[i] - mean) * scale;
}

// out [k, R]: x[r][ids[r][i]]. Global (k, R).
__kernel void gather(__global const float* x, __global const int* ids, __global float* out, int n,
                     int k) {
    const int i = get_global_id(0);
    const long r = get_global_id(1);
    out[r * k + i] = x[r * n + ids[r * k + i]];
}

// Indices of the k largest values of each row, largest first (ties: the
// lower index first). Global (R).
__kernel void topk(__global const float* x, __global int* out, int n, int k) {
    const long r = get_global_id(0);
    __global const float* row = x + r * n;
    for (int j = 0; j < k; ++j) {
        int best = -1;
        for (int i = 0; i < n; ++i) {
            bool taken = false;
            for (int p = 0; p < j; ++p) taken = taken || out[r * k + p] == i;
            if (!taken && (best < 0 || row[i] > row[best])) best = i;
        }
        out[r * k + j] = best;
    }
}

// out [N, k, T]: expert ids[t][i]'s rows (of [K, N, E] weights) times x[t].
// Global (N, k, T).
__kernel void expert_matmul(__global const uchar* w, ulong w_row_bytes, int dtype,
                            __global const float* x, __global const int* ids, __global float* out,
                            int k_dim, int n_out, int n_used) {
    const int n = get_global_id(0);
    const int i = get_global_id(1);
    const int t = get_global_id(2);
    const int e = ids[t * n_used + i];
    out[((long)t * n_used + i) * n_out + n] =
        dot_row(w + ((ulong)e * n_out + n) * w_row_bytes, dtype, x + (long)t * k_dim, k_dim);
}

// out [N, T] = sum_i w[t][i] * y[t][i]. Global (N, T).
__kernel void moe_combine(__global const float* y, __global const float* w, __global float* out,
                          int n_out, int n_used) {
    const int n = get_global_id(0);
    const int t = get_global_id(1);
    float s = 0.0f;
    for (int i = 0; i < n_used; ++i) s += w[t * n_used + i] * y[((long)t * n_used + i) * n_out + n];
    out[(long)t * n_out + n] = s;
}

// SLICE (ABI 1.7): columns [first, first + n) of every row of `row_len`
// values. Global (n, rows).
__kernel void slice_cols(__global const float* a, __global float* out, int row_len, int first,
                         int n) {
    const int i = get_global_id(0);
    const long r = get_global_id(1);
    out[r * n + i] = a[r * row_len + first + i];
}

// x / sqrt(sum x^2 + eps) of an n-long row, as the factor (graph.h).
float gdn_l2_factor(__global const float* x, int n, int l2, float eps) {
    if (!l2) return 1.0f;
    float ss = 0.0f;
    for (int i = 0; i < n; ++i) ss += x[i] * x[i];
    return 1.0f / sqrt(ss + eps);
}

// GATED_DELTA_NET (ABI 1.7): one work-item per state row, value dim j of
// value head h: every step of the delta rule reads and writes only row j
// (graph.h), so rows need no synchronisation. The state is advanced in
// place over the batch. Global (Dv, Hv).
__kernel void gated_delta_net(__global const float* q, __global const float* k,
                              __global const float* v, __global const float* g,
                              __global const float* beta, __global float* state,
                              __global float* out, int Dk, int Hk, int Dv, int Hv, int T, int l2,
                              float scale, float eps) {
    const int j = get_global_id(0);
    const int h = get_global_id(1);
    const int hq = h % Hk;
    __global float* s = state + ((long)h * Dv + j) * Dk;
    for (int t = 0; t < T; ++t) {
        __global const float* qr = q + ((long)t * Hk + hq) * Dk;
        __global const float* kr = k + ((long)t * Hk + hq) * Dk;
        const float qf = gdn_l2_factor(qr, Dk, l2, eps);
        const float kf = gdn_l2_factor(kr, Dk, l2, eps);
        const float decay = exp(g[(long)t * Hv + h]);
        float recalled = 0.0f;
        for (int i = 0; i < Dk; ++i) {
            s[i] *= decay;
            recalled += s[i] * kr[i] * kf;
        }
        const float d = (v[((long)t * Hv + h) * Dv + j] - recalled) * beta[(long)t * Hv + h];
        float o = 0.0f;
        for (int i = 0; i < Dk; ++i) {
            s[i] += kr[i] * kf * d;
            o += s[i] * qr[i] * qf;
        }
        out[((long)t * Hv + h) * Dv + j] = o * scale;
    }
}
