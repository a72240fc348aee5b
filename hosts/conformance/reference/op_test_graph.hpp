// Graphs for op tests, owning their tensors' memory, with random data and
// reference decoders written independently of any backend (plain bit
// arithmetic and double precision). Used by dwell-conformance and by the
// cpu backend's tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "dwell/graph.h"

namespace dwell::test {

class OpTestGraph {
public:
    // A tensor of shape ne (trailing dims default to 1). row_pad adds bytes
    // after every row, so nb[1] > row size and rows are not contiguous.
    int tensor(dwell_dtype dtype, std::vector<int64_t> ne, uint64_t row_pad = 0) {
        dwell_tensor t{};
        t.dtype = dtype;
        t.n_dims = static_cast<int32_t>(ne.size());
        for (int d = 0; d < DWELL_MAX_DIMS; ++d)
            t.ne[d] = d < static_cast<int>(ne.size()) ? ne[d] : 1;
        t.nb[0] = dwell_dtype_block_bytes(dtype);
        t.nb[1] = dwell_row_bytes(dtype, t.ne[0]) + row_pad;
        t.nb[2] = t.nb[1] * static_cast<uint64_t>(t.ne[1]);
        t.nb[3] = t.nb[2] * static_cast<uint64_t>(t.ne[2]);
        storage_.emplace_back(t.nb[3] * static_cast<uint64_t>(t.ne[3]) / sizeof(uint64_t) + 1, 0);
        t.data = storage_.back().data();
        tensors_.push_back(t);
        return static_cast<int>(tensors_.size()) - 1;
    }

    dwell_tensor& t(int id) { return tensors_[static_cast<size_t>(id)]; }
    size_t bytes(int id) const {
        return storage_[static_cast<size_t>(id)].size() * sizeof(uint64_t);
    }

    unsigned char* row(int id, int64_t r) {
        const dwell_tensor& x = t(id);
        const int64_t i1 = r % x.ne[1];
        const int64_t i2 = (r / x.ne[1]) % x.ne[2];
        const int64_t i3 = r / (x.ne[1] * x.ne[2]);
        return static_cast<unsigned char*>(x.data) + i1 * x.nb[1] + i2 * x.nb[2] + i3 * x.nb[3];
    }

    // Logical (row-major, unpadded) values of an F32 or I32 tensor.
    template <typename T>
    void set(int id, const std::vector<T>& v) {
        const dwell_tensor& x = t(id);
        for (int64_t r = 0; r < dwell_tensor_nrows(&x); ++r) {
            memcpy(row(id, r), v.data() + r * x.ne[0], static_cast<size_t>(x.ne[0]) * sizeof(T));
        }
    }
    template <typename T>
    std::vector<T> get(int id) {
        const dwell_tensor& x = t(id);
        std::vector<T> v(static_cast<size_t>(dwell_tensor_nelements(&x)));
        for (int64_t r = 0; r < dwell_tensor_nrows(&x); ++r) {
            memcpy(v.data() + r * x.ne[0], row(id, r), static_cast<size_t>(x.ne[0]) * sizeof(T));
        }
        return v;
    }
    std::vector<float> f32(int id) { return get<float>(id); }
    std::vector<int32_t> i32(int id) { return get<int32_t>(id); }

    // Raw row bytes (for quantized tensors), row after row.
    void set_raw_rows(int id, const std::vector<uint8_t>& bytes) {
        const dwell_tensor& x = t(id);
        const size_t rb = dwell_row_bytes(x.dtype, x.ne[0]);
        for (int64_t r = 0; r < dwell_tensor_nrows(&x); ++r)
            memcpy(row(id, r), bytes.data() + r * rb, rb);
    }
    std::vector<uint8_t> raw_rows(int id) {
        const dwell_tensor& x = t(id);
        const size_t rb = dwell_row_bytes(x.dtype, x.ne[0]);
        std::vector<uint8_t> out(rb * static_cast<size_t>(dwell_tensor_nrows(&x)));
        for (int64_t r = 0; r < dwell_tensor_nrows(&x); ++r)
            memcpy(out.data() + r * rb, row(id, r), rb);
        return out;
    }

    int node(dwell_op op, int out, std::vector<int> inputs, std::vector<int32_t> ip = {},
             std::vector<float> fp = {}) {
        dwell_node n{};
        n.op = op;
        n.output = out;
        n.n_inputs = static_cast<int32_t>(inputs.size());
        for (int i = 0; i < DWELL_MAX_INPUTS; ++i) {
            n.inputs[i] = i < static_cast<int>(inputs.size()) ? inputs[static_cast<size_t>(i)] : -1;
        }
        for (size_t i = 0; i < ip.size(); ++i) n.iparams[i] = ip[i];
        for (size_t i = 0; i < fp.size(); ++i) n.fparams[i] = fp[i];
        n.layer = -1;
        nodes_.push_back(n);
        return static_cast<int>(nodes_.size()) - 1;
    }
    dwell_node& node_at(int i) { return nodes_[static_cast<size_t>(i)]; }

    dwell_graph graph() {
        dwell_graph g{};
        g.struct_size = sizeof g;
        g.n_tensors = static_cast<int32_t>(tensors_.size());
        g.tensors = tensors_.data();
        g.n_nodes = static_cast<int32_t>(nodes_.size());
        g.nodes = nodes_.data();
        g.tensor_stride = sizeof(dwell_tensor);
        g.node_stride = sizeof(dwell_node);
        return g;
    }

    size_t n_nodes() const { return nodes_.size(); }

private:
    std::vector<dwell_tensor> tensors_;
    std::vector<std::vector<uint64_t>> storage_;  // uint64_t: 8-byte aligned rows
    std::vector<dwell_node> nodes_;
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// IEEE half -> double by the textbook formula (independent of the SDK's
// bit-twiddling converter).
inline double ref_half(uint16_t h) {
    const int sign = (h >> 15) & 1;
    const int exp = (h >> 10) & 0x1f;
    const int man = h & 0x3ff;
    double v;
    if (exp == 0) {
        v = std::ldexp(static_cast<double>(man), -24);
    } else if (exp == 31) {
        v = man ? NAN : INFINITY;
    } else {
        v = std::ldexp(static_cast<double>(man + 1024), exp - 25);
    }
    return sign ? -v : v;
}

inline double ref_bf16(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

// Code k (bits wide) of a little-endian bit stream, read one bit at a time.
inline int ref_stream_code(const uint8_t* stream, int bits, int64_t k) {
    int code = 0;
    for (int b = 0; b < bits; ++b) {
        const int64_t bit = k * bits + b;
        code |= ((stream[bit / 8] >> (bit % 8)) & 1) << b;
    }
    return code;
}

inline uint16_t ref_u16(const uint8_t* b) {
    return static_cast<uint16_t>(b[0] | (b[1] << 8));
}

// Element i of an I4_G or I6_G row. Groups of 128: fp16 d, fp16 m,
// ceil(128 * bits / 8) bytes of codes; every group before element i's is a
// full one.
inline double ref_group_element(const uint8_t* p, int bits, int64_t i) {
    const uint8_t* group = p + (i / 128) * (4 + 128 * bits / 8);
    return ref_half(ref_u16(group)) * ref_stream_code(group + 4, bits, i % 128) +
           ref_half(ref_u16(group + 2));
}

// Element i of an I8_C row: one f32 scale, then int8 codes.
inline double ref_i8_c_element(const uint8_t* p, int64_t i) {
    const uint32_t bits = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                          (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
    float d;
    memcpy(&d, &bits, sizeof d);
    return static_cast<double>(d) * static_cast<int8_t>(p[4 + i]);
}

// Element i of a Q5_0 or Q5_1 row: [d][m for Q5_1] qh[4] qs[16]; bit j of
// the 32 qh bits is the fifth bit of element j.
inline double ref_q5_element(const uint8_t* p, bool has_min, int64_t i) {
    const uint8_t* block = p + (i / 32) * (has_min ? 24 : 22);
    const uint8_t* qh = block + (has_min ? 4 : 2);
    const uint8_t* qs = qh + 4;
    const int j = static_cast<int>(i % 32);
    const int nib = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
    const int q = nib + 16 * ((qh[j / 8] >> (j % 8)) & 1);
    const double d = ref_half(ref_u16(block));
    return has_min ? d * q + ref_half(ref_u16(block + 2)) : d * (q - 16);
}

// Element i of a Q4_K or Q5_K row: d, dmin, scales[12], [qh[32] for Q5_K],
// qs[128]. Sub-block s (32 elements) has a 6-bit scale and min: s < 4
// keeps them in the low 6 bits of bytes s and s + 4; s >= 4 keeps the low
// 4 bits in byte s + 4 (scale low nibble, min high nibble) and the top 2
// bits in the top bits of bytes s - 4 and s.
inline double ref_k_element(const uint8_t* p, bool five, int64_t i) {
    const uint8_t* block = p + (i / 256) * (five ? 176 : 144);
    const uint8_t* sc = block + 4;
    const uint8_t* qh = block + 16;
    const uint8_t* qs = block + (five ? 48 : 16);
    const int e = static_cast<int>(i % 256);
    const int s = e / 32, l = e % 32;
    int scale, min;
    if (s < 4) {
        scale = sc[s] % 64;
        min = sc[s + 4] % 64;
    } else {
        scale = sc[s + 4] % 16 + 16 * (sc[s - 4] / 64);
        min = sc[s + 4] / 16 + 16 * (sc[s] / 64);
    }
    // Sub-blocks 2k and 2k + 1 share bytes qs[32k .. 32k + 31].
    const uint8_t byte = qs[32 * (s / 2) + l];
    int q = s % 2 == 0 ? byte % 16 : byte / 16;
    if (five) q += 16 * ((qh[l] >> s) & 1);
    return ref_half(ref_u16(block)) * scale * q - ref_half(ref_u16(block + 2)) * min;
}

// Element i of a Q6_K row: ql[128] qh[64] int8 scales[16] d. Element
// e = 128 h + 32 c + l takes a nibble of ql[64 h + 32 (c % 2) + l] (low for
// c < 2), bits 2c..2c+1 of qh[32 h + l] on top, and the scale of its
// 16-element sub-block e / 16.
inline double ref_q6_k_element(const uint8_t* p, int64_t i) {
    const uint8_t* block = p + (i / 256) * 210;
    const int e = static_cast<int>(i % 256);
    const int h = e / 128, c = (e % 128) / 32, l = e % 32;
    const uint8_t lo = block[64 * h + 32 * (c % 2) + l];
    const int nib = c < 2 ? lo % 16 : lo / 16;
    const int top = (block[128 + 32 * h + l] >> (2 * c)) & 3;
    const int q = nib + 16 * top - 32;
    const auto scale = static_cast<int8_t>(block[192 + e / 16]);
    return ref_half(ref_u16(block + 208)) * scale * q;
}

// Element i of a row of weight dtype t, decoded in double from its
// documented layout (0 for a dtype that is not a weight's).
inline double ref_decode_element(dwell_dtype t, const uint8_t* p, int64_t i) {
    switch (t) {
        case DWELL_I4_G:
        case DWELL_I6_G:
            return ref_group_element(p, t == DWELL_I4_G ? 4 : 6, i);
        case DWELL_I8_C:
            return ref_i8_c_element(p, i);
        case DWELL_F32: {
            float f;
            memcpy(&f, p + 4 * i, 4);
            return f;
        }
        case DWELL_F16:
            return ref_half(ref_u16(p + 2 * i));
        case DWELL_BF16:
            return ref_bf16(ref_u16(p + 2 * i));
        case DWELL_Q8_0: {
            const uint8_t* block = p + (i / 32) * 34;
            return ref_half(ref_u16(block)) * static_cast<int8_t>(block[2 + i % 32]);
        }
        case DWELL_Q4_0: {
            const uint8_t* block = p + (i / 32) * 18;
            const int j = static_cast<int>(i % 32);
            const int nib = j < 16 ? (block[2 + j] & 15) : (block[2 + j - 16] >> 4);
            return ref_half(ref_u16(block)) * (nib - 8);
        }
        case DWELL_Q4_1: {
            // d, m, then 16 bytes of nibbles: x = d * q + m.
            const uint8_t* block = p + (i / 32) * 20;
            const int j = static_cast<int>(i % 32);
            const int nib = j < 16 ? (block[4 + j] & 15) : (block[4 + j - 16] >> 4);
            return ref_half(ref_u16(block)) * nib + ref_half(ref_u16(block + 2));
        }
        case DWELL_Q5_0:
        case DWELL_Q5_1:
            return ref_q5_element(p, t == DWELL_Q5_1, i);
        case DWELL_Q4_K:
        case DWELL_Q5_K:
            return ref_k_element(p, t == DWELL_Q5_K, i);
        case DWELL_Q6_K:
            return ref_q6_k_element(p, i);
        default:
            return 0;
    }
}

// One row of a weight dtype decoded in double from its documented layout.
inline std::vector<double> ref_decode_row(dwell_dtype t, const uint8_t* p, int64_t n) {
    std::vector<double> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = ref_decode_element(t, p, i);
    return out;
}

// Random rows of a weight dtype, generated directly in its byte layout
// (random scales and quants for the block formats).
// A [n0, n1] tensor of dtype t over caller-owned, packed rows.
inline dwell_tensor tensor_2d(dwell_dtype t, void* data, int64_t n0, int64_t n1) {
    dwell_tensor x{};
    x.dtype = t;
    x.n_dims = 2;
    x.ne[0] = n0;
    x.ne[1] = n1;
    x.ne[2] = x.ne[3] = 1;
    x.nb[0] = dwell_dtype_block_bytes(t);
    x.nb[1] = dwell_row_bytes(t, n0);
    x.nb[2] = x.nb[3] = x.nb[1] * static_cast<uint64_t>(n1);
    x.data = data;
    return x;
}

// Bytes starting `offset` past a 64-byte boundary, like a row of a mapped
// file.
class OffsetBuffer {
public:
    OffsetBuffer(const std::vector<uint8_t>& bytes, size_t offset)
        : storage_(bytes.size() + 64 + offset) {
        const auto base = reinterpret_cast<uintptr_t>(storage_.data());
        start_ = storage_.data() + ((64 - base % 64) % 64) + offset;
        if (!bytes.empty()) std::memcpy(start_, bytes.data(), bytes.size());
    }
    const uint8_t* data() const { return start_; }

private:
    std::vector<uint8_t> storage_;
    uint8_t* start_;
};

inline std::vector<uint8_t> random_weight_rows(dwell_dtype t, int64_t n, int64_t rows,
                                               uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> val(-1.0f, 1.0f);
    std::uniform_real_distribution<float> scale(0.001f, 0.05f);
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<uint8_t> out;
    auto put16 = [&](uint16_t h) {
        out.push_back(static_cast<uint8_t>(h & 0xff));
        out.push_back(static_cast<uint8_t>(h >> 8));
    };
    for (int64_t r = 0; r < rows; ++r) {
        if (t == DWELL_I4_G || t == DWELL_I6_G) {
            // Per group: d, m (about -d * qmax / 2, so values straddle 0), the
            // codes, and zeros in the padding bits as an encoder writes them.
            const int bits = t == DWELL_I4_G ? 4 : 6;
            for (int64_t g = 0; g < n; g += 128) {
                const int64_t len = std::min<int64_t>(128, n - g);
                const float d = scale(rng) / static_cast<float>(1 << (bits - 4));
                put16(dwell_fp32_to_fp16(d));
                put16(dwell_fp32_to_fp16(-d * static_cast<float>((1 << bits) - 1) / 2 + scale(rng) -
                                         0.025f));
                const int64_t stream_bits = len * bits;
                for (int64_t b = 0; b < (stream_bits + 7) / 8; ++b) {
                    uint8_t v = static_cast<uint8_t>(byte(rng));
                    if (b == stream_bits / 8)
                        v &= static_cast<uint8_t>((1 << (stream_bits % 8)) - 1);
                    out.push_back(v);
                }
            }
            continue;
        }
        if (t == DWELL_I8_C) {
            const float d = scale(rng) / 8;
            uint32_t bits;
            memcpy(&bits, &d, sizeof bits);
            for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(bits >> (8 * b)));
            for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(byte(rng)));
            continue;
        }
        for (int64_t i = 0; i < n; ++i) {
            switch (t) {
                case DWELL_F32: {
                    const float f = val(rng);
                    uint8_t b[4];
                    memcpy(b, &f, 4);
                    out.insert(out.end(), b, b + 4);
                    break;
                }
                case DWELL_F16:
                    put16(dwell_fp32_to_fp16(val(rng)));
                    break;
                case DWELL_BF16: {
                    const float f = val(rng);
                    uint32_t bits;
                    memcpy(&bits, &f, 4);
                    put16(static_cast<uint16_t>(bits >> 16));
                    break;
                }
                case DWELL_Q8_0:
                    if (i % 32 == 0) {
                        put16(dwell_fp32_to_fp16(scale(rng)));
                        for (int j = 0; j < 32; ++j) out.push_back(static_cast<uint8_t>(byte(rng)));
                    }
                    break;
                case DWELL_Q4_0:
                    if (i % 32 == 0) {
                        put16(dwell_fp32_to_fp16(scale(rng)));
                        for (int j = 0; j < 16; ++j) out.push_back(static_cast<uint8_t>(byte(rng)));
                    }
                    break;
                case DWELL_Q4_1:
                case DWELL_Q5_0:
                case DWELL_Q5_1:
                    if (i % 32 == 0) {
                        put16(dwell_fp32_to_fp16(scale(rng)));
                        if (t != DWELL_Q5_0) put16(dwell_fp32_to_fp16(-scale(rng) * 8));  // m
                        const int rest = t == DWELL_Q4_1 ? 16 : 20;
                        for (int j = 0; j < rest; ++j)
                            out.push_back(static_cast<uint8_t>(byte(rng)));
                    }
                    break;
                case DWELL_Q4_K:
                case DWELL_Q5_K:
                case DWELL_Q6_K:
                    if (i % 256 == 0) {
                        // Sub-block scales multiply d, so keep d small.
                        if (t == DWELL_Q6_K) {
                            for (int j = 0; j < 208; ++j)
                                out.push_back(static_cast<uint8_t>(byte(rng)));
                            put16(dwell_fp32_to_fp16(scale(rng) / 64));
                        } else {
                            put16(dwell_fp32_to_fp16(scale(rng) / 32));
                            put16(dwell_fp32_to_fp16(scale(rng) / 32));
                            const int rest = t == DWELL_Q4_K ? 140 : 172;
                            for (int j = 0; j < rest; ++j)
                                out.push_back(static_cast<uint8_t>(byte(rng)));
                        }
                    }
                    break;
                default:
                    break;
            }
        }
    }
    return out;
}

}  // namespace dwell::test
