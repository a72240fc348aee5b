// The column layout's packing, the activation digest and the portable
// kernel (the scalar level's twin of dot_q4_0_q8_0, same rounding), plus the
// level dispatch. Compiled with -ffp-contract=off like the scalar dots it
// must match bit for bit.
#include "simd/sparse_matvec.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "dwell/quant.h"
#include "quant/activation_quant.hpp"

namespace dwell::cpu {

void build_sparse_acts(const float* x, int64_t k, SparseActs& out) {
    const int64_t nb = k / 32;
    out.blocks.resize(static_cast<size_t>(nb));
    out.active_blocks = out.active_channels = out.zero_inputs = 0;
    constexpr int64_t kChunk = 64;
    dwell_block_q8_0 tmp[kChunk];
    for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
        const int64_t m = std::min(kChunk, nb - b0);
        quantize_act_q8_0(x + b0 * 32, tmp, m * 32);
        for (int64_t i = 0; i < m; ++i) {
            SparseBlock& blk = out.blocks[static_cast<size_t>(b0 + i)];
            blk.d = dwell_fp16_to_fp32(tmp[i].d);
            std::memcpy(blk.q, tmp[i].qs, 32);
            blk.qsum = 0;
            blk.n = 0;
            for (int c = 0; c < 32; ++c) {
                blk.qsum += blk.q[c];
                // A zero code adds nothing to any row's integer sum, whether
                // SPARSIFY zeroed it or it rounded to zero.
                if (blk.q[c] != 0) blk.idx[blk.n++] = static_cast<uint8_t>(c);
                if (x[(b0 + i) * 32 + c] == 0.0f) ++out.zero_inputs;
            }
            if (blk.n > 0) ++out.active_blocks;
            out.active_channels += blk.n;
        }
    }
}

int64_t sparse_padded_rows(const SparseKernel& kern, int64_t n) {
    const int64_t r = kern.rows_per_tile;
    return (n + r - 1) / r * r;
}

size_t sparse_tile_code_bytes(const SparseKernel& kern) {
    const auto r = static_cast<size_t>(kern.rows_per_tile);
    return kern.weight == DWELL_Q8_0 ? r : r / 2;
}

namespace {

// Bytes of one block column: the scales, then 32 channels' codes.
size_t column_bytes(const SparseKernel& kern, size_t np) {
    return 2 * np + 32 * (kern.weight == DWELL_Q8_0 ? np : np / 2);
}

}  // namespace

size_t sparse_layout_bytes(const SparseKernel& kern, int64_t k, int64_t n) {
    return static_cast<size_t>(k / 32) *
           column_bytes(kern, static_cast<size_t>(sparse_padded_rows(kern, n)));
}

namespace {

template <typename Block>
void pack_tiles(const SparseKernel& kern, const void* w, size_t row_bytes, int64_t k, int64_t n,
                int64_t t0, int64_t t1, unsigned char* out) {
    constexpr bool kQ8 = std::is_same_v<Block, dwell_block_q8_0>;
    const int R = kern.rows_per_tile;
    const int64_t np = sparse_padded_rows(kern, n);
    const size_t tcb = sparse_tile_code_bytes(kern);
    const size_t col = static_cast<size_t>(np / R) * tcb;
    const size_t block_col = column_bytes(kern, static_cast<size_t>(np));
    const auto* src = static_cast<const unsigned char*>(w);
    auto block_of = [&](int64_t row, int64_t j) {
        Block b;
        std::memcpy(&b, src + static_cast<size_t>(row) * row_bytes + j * sizeof b, sizeof b);
        return b;
    };
    // A code as the kernel reads it: Q4_0 nibbles 0..15 (element e < 16 in
    // the low half); Q8_0 bytes, offset by 128 where the kernel wants them
    // unsigned.
    auto code = [&](const Block& b, int e) -> unsigned {
        if constexpr (kQ8) {
            return static_cast<uint8_t>(b.qs[e]) ^ (kern.offset_codes ? 0x80u : 0u);
        } else {
            return e < 16 ? (b.qs[e] & 0x0f) : (b.qs[e - 16] >> 4);
        }
    };
    std::vector<Block> tile(static_cast<size_t>(R));
    for (int64_t j = 0; j < k / 32; ++j) {
        unsigned char* base = out + static_cast<size_t>(j) * block_col;
        for (int64_t t = t0; t < t1; ++t) {
            for (int r = 0; r < R; ++r) {
                const int64_t row = t * R + r;
                tile[static_cast<size_t>(r)] = row < n ? block_of(row, j) : Block{};
            }
            // Scales in accumulator order.
            auto* sc = base + static_cast<size_t>(t) * 2 * R;
            for (int s = 0; s < R; ++s) {
                const uint16_t d = tile[static_cast<size_t>(kern.slot_vrow(s))].d;
                std::memcpy(sc + 2 * s, &d, 2);
            }
            for (int c = 0; c < 32; ++c) {
                unsigned char* dst = base + 2 * np + c * col + static_cast<size_t>(t) * tcb;
                if constexpr (kQ8) {
                    // Padded rows: code 0 (stored offset where the kernel
                    // offsets), with a zero scale.
                    for (int p = 0; p < R; ++p)
                        dst[p] = static_cast<unsigned char>(code(tile[static_cast<size_t>(p)], c));
                } else {
                    for (int p = 0; p < R / 2; ++p) {
                        const unsigned vlo = code(tile[static_cast<size_t>(p)], c);
                        const unsigned vhi = code(tile[static_cast<size_t>(R / 2 + p)], c);
                        dst[p] = static_cast<unsigned char>(vlo | (vhi << 4));
                    }
                }
            }
        }
    }
}

}  // namespace

void sparse_pack_tiles(const SparseKernel& kern, const void* w, size_t row_bytes, int64_t k,
                       int64_t n, int64_t t0, int64_t t1, unsigned char* out) {
    if (kern.weight == DWELL_Q8_0) {
        pack_tiles<dwell_block_q8_0>(kern, w, row_bytes, k, n, t0, t1, out);
    } else {
        pack_tiles<dwell_block_q4_0>(kern, w, row_bytes, k, n, t0, t1, out);
    }
}

int sparse_groups(const SparseBlock& blk, const unsigned char* column, size_t np,
                  size_t channel_bytes, size_t tile_code_bytes, int64_t t0,
                  const unsigned char* zeros, SparseGroup* g) {
    const int ng = (blk.n + 3) / 4;
    for (int i = 0; i < ng; ++i) {
        uint32_t a4 = 0;
        for (int c = 0; c < 4; ++c) {
            const int e = 4 * i + c;
            if (e < blk.n) {
                const int ch = blk.idx[e];
                g[i].ch[c] = column + 2 * np + ch * channel_bytes +
                             static_cast<size_t>(t0) * tile_code_bytes;
                a4 |= static_cast<uint32_t>(static_cast<uint8_t>(blk.q[ch])) << (8 * c);
            } else {
                g[i].ch[c] = zeros;
            }
        }
        g[i].a4 = static_cast<int32_t>(a4);
    }
    return ng;
}

void sparse_store_rows(const float* acc, int64_t t0, int64_t nt, int R, int (*slot_vrow)(int),
                       int64_t n, float* out) {
    for (int64_t t = 0; t < nt; ++t) {
        for (int s = 0; s < R; ++s) {
            const int64_t row = (t0 + t) * R + slot_vrow(s);
            if (row < n) out[row] = acc[static_cast<size_t>(t * R + s)];
        }
    }
}

uint64_t sparse_bytes_read(const SparseKernel& kern, int64_t n, const SparseActs& a) {
    const auto np = static_cast<uint64_t>(sparse_padded_rows(kern, n));
    const uint64_t per_channel = kern.weight == DWELL_Q8_0 ? np : np / 2;
    return static_cast<uint64_t>(a.active_blocks) * 2 * np +
           static_cast<uint64_t>(a.active_channels) * per_channel;
}

namespace {

constexpr int kScalarRows = 64;

int scalar_slot(int s) {
    return s;
}

// dot_q4_0_q8_0's arithmetic per row: sum += (float(sumi) * dw) * dx over the
// blocks in order, sumi the exact integer dot, here over non-zero channels
// only (the others add 0) and with the code offset through qsum.
void scalar_run(const unsigned char* layout, int64_t k, int64_t n, const SparseActs& a, int64_t t0,
                int64_t t1, const unsigned char*, float* out) {
    constexpr int R = kScalarRows;
    const int64_t np = (n + R - 1) / R * R;
    const size_t col = static_cast<size_t>(np) / 2;
    for (int64_t t = t0; t < t1; ++t) {
        float sum[R] = {};
        for (int64_t j = 0; j < k / 32; ++j) {
            const SparseBlock& blk = a.blocks[static_cast<size_t>(j)];
            if (blk.n == 0) continue;
            const unsigned char* base = layout + static_cast<size_t>(j) * 18 * np;
            int32_t isum[R];
            for (int r = 0; r < R; ++r) isum[r] = -8 * blk.qsum;
            for (int i = 0; i < blk.n; ++i) {
                const int c = blk.idx[i];
                const int32_t q = blk.q[c];
                const unsigned char* v = base + 2 * np + c * col + static_cast<size_t>(t) * (R / 2);
                for (int p = 0; p < R / 2; ++p) {
                    isum[p] += (v[p] & 0x0f) * q;
                    isum[R / 2 + p] += (v[p] >> 4) * q;
                }
            }
            const unsigned char* sc = base + static_cast<size_t>(t) * 2 * R;
            for (int r = 0; r < R; ++r) {
                uint16_t h;
                std::memcpy(&h, sc + 2 * r, 2);
                sum[r] += static_cast<float>(isum[r]) * dwell_fp16_to_fp32(h) * blk.d;
            }
        }
        for (int r = 0; r < R && t * R + r < n; ++r) out[t * R + r] = sum[r];
    }
}

// dot_q8_0_q8_0's arithmetic per row: sum += float(sumi) * (dw * dx).
void scalar_run_q8(const unsigned char* layout, int64_t k, int64_t n, const SparseActs& a,
                   int64_t t0, int64_t t1, const unsigned char*, float* out) {
    constexpr int R = kScalarRows;
    const int64_t np = (n + R - 1) / R * R;
    const size_t col = static_cast<size_t>(np);
    for (int64_t t = t0; t < t1; ++t) {
        float sum[R] = {};
        for (int64_t j = 0; j < k / 32; ++j) {
            const SparseBlock& blk = a.blocks[static_cast<size_t>(j)];
            if (blk.n == 0) continue;
            const unsigned char* base = layout + static_cast<size_t>(j) * 34 * np;
            int32_t isum[R] = {};
            for (int i = 0; i < blk.n; ++i) {
                const int c = blk.idx[i];
                const int32_t q = blk.q[c];
                const auto* v = reinterpret_cast<const int8_t*>(base + 2 * np + c * col +
                                                                static_cast<size_t>(t) * R);
                for (int p = 0; p < R; ++p) isum[p] += v[p] * q;
            }
            const unsigned char* sc = base + static_cast<size_t>(t) * 2 * R;
            for (int r = 0; r < R; ++r) {
                uint16_t h;
                std::memcpy(&h, sc + 2 * r, 2);
                sum[r] += static_cast<float>(isum[r]) * (dwell_fp16_to_fp32(h) * blk.d);
            }
        }
        for (int r = 0; r < R && t * R + r < n; ++r) out[t * R + r] = sum[r];
    }
}

}  // namespace

const SparseKernel* sparse_kernel_scalar(dwell_dtype t) {
    static const SparseKernel q4_0{"q4_0/scalar", DWELL_Q4_0,  kScalarRows,
                                   false,         scalar_slot, scalar_run};
    static const SparseKernel q8_0{"q8_0/scalar", DWELL_Q8_0,  kScalarRows,
                                   false,         scalar_slot, scalar_run_q8};
    return t == DWELL_Q4_0 ? &q4_0 : t == DWELL_Q8_0 ? &q8_0 : nullptr;
}

const SparseKernel* sparse_kernel_for(dwell_dtype t, SimdLevel level) {
    const SparseKernel* k = nullptr;
    switch (level) {
#if defined(__x86_64__)
        case SimdLevel::Avx512:
            k = sparse_kernel_avx512(t);
            break;
        case SimdLevel::Avx2:
            k = sparse_kernel_avx2(t);
            break;
#endif
#if defined(__aarch64__)
        case SimdLevel::NeonI8mm:
        case SimdLevel::NeonDotprod:
            // The i8mm level's dense Q4_0 / Q8_0 kernels round as the
            // dotprod level's (gemm_kernel_neon.hpp: only the integer dot
            // differs).
            k = sparse_kernel_neon_dotprod(t);
            break;
#endif
        case SimdLevel::Neon:
            // The plain NEON level's dense Q4_0 / Q8_0 kernels are the
            // scalar ones (gemm_kernel_for), so is its sparse kernel.
        case SimdLevel::Scalar:
            k = sparse_kernel_scalar(t);
            break;
        default:
            break;
    }
    return k;
}

const SparseKernel* sparse_kernel(dwell_dtype t) {
    return sparse_kernel_for(t, dot_kernels().level);
}

}  // namespace dwell::cpu
