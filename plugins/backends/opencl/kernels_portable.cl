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

// Element j of a row of `dtype` starting at `row`.
float load_elem(__global const uchar* row, int dtype, int j) {
    if (dtype == DT_F32) return ((__global const float*)row)[j];
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

// op 0: scale by f, 1: silu, 2: gelu (tanh). Global (count).
__kernel void unary(__global const float* a, __global float* out, int op, float f) {
    const int i = get_global_id(0);
    const float x = a[i];
    if (op == 0) {
        out[i] = x * f;
    } else if (op == 1) {
        out[i] = x / (1.0f + exp(-x));
    } else {
        out[i] = 0.5f * x * (1.0f + tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
    }
}

__kernel void swiglu(__global const float* gate, __global const float* up, __global float* out) {
    const int i = get_global_id(0);
    const float g = gate[i];
    out[i] = g / (1.0f + exp(-g)) * up[i];
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

// Stores k/v of token t into cache row pos[t]. Global (hd * n_kv, T).
__kernel void attention_store(__global const float* k, __global const float* v,
                              __global uchar* kc, __global uchar* vc, __global const int* table,
                              int paged, int base_page, ulong row_bytes, ulong page_bytes,
                              int rows_per_page, __global const int* pos, int width, int f16) {
    const int i = get_global_id(0);
    const int t = get_global_id(1);
    for (int kind = 0; kind < 2; ++kind) {
        __global uchar* row = cache_row(kc, vc, table, paged, base_page, row_bytes, page_bytes,
                                        rows_per_page, kind, pos[t]);
        const float x = (kind ? v : k)[(long)t * width + i];
        if (f16) {
            vstore_half_rte(x, i, (__global half*)row);
        } else {
            ((__global float*)row)[i] = x;
        }
    }
}

// One (head, token) per work-item, softmax computed online. Global (n_head, T).
__kernel void attention(__global const float* q, __global uchar* kc, __global uchar* vc,
                        __global const int* table, int paged, int base_page, ulong row_bytes,
                        ulong page_bytes, int rows_per_page, __global const int* pos,
                        __global float* out, int hd,
                        int n_head, int n_kv, int f16, float scale) {
    const int h = get_global_id(0);
    const int t = get_global_id(1);
    const int g = h / (n_head / n_kv);
    __global const float* qh = q + ((long)t * n_head + h) * hd;
    float acc[256];
    for (int i = 0; i < hd; ++i) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int r = 0; r <= pos[t]; ++r) {
        __global const uchar* kr = cache_row(kc, vc, table, paged, base_page, row_bytes,
                                             page_bytes, rows_per_page, 0, r);
        __global const uchar* vr = cache_row(kc, vc, table, paged, base_page, row_bytes,
                                             page_bytes, rows_per_page, 1, r);
        float s = 0.0f;
        for (int i = 0; i < hd; ++i) {
            const float kv = f16 ? vload_half(g * hd + i, (__global const half*)kr)
                                 : ((__global const float*)kr)[g * hd + i];
            s += qh[i] * kv;
        }
        s *= scale;
        const float m2 = fmax(m, s);
        const float a = exp(m - m2), e = exp(s - m2);
        l = l * a + e;
        for (int i = 0; i < hd; ++i) {
            const float vv = f16 ? vload_half(g * hd + i, (__global const half*)vr)
                                 : ((__global const float*)vr)[g * hd + i];
            acc[i] = acc[i] * a + e * vv;
        }
        m = m2;
    }
    __global float* o = out + ((long)t * n_head + h) * hd;
    for (int i = 0; i < hd; ++i) o[i] = acc[i] / l;
}
