// MATMUL: W [K, N] (weight dtype), x [K, M...] F32 -> [N, M...] F32,
// out[m][n] = W[n] . x[m]. Split over threads by weight rows (n), so every
// output value is computed by the same code whatever the thread count.
//
// Quantized weights with a blocked kernel (gemm_kernel.hpp) take the fast
// path: x quantized to int8 once per call, W repacked once per context, and
// tiles of R weight rows x C activation rows. Other dtypes convert x to their
// activation format (activation_quant.hpp) and run one row dot per output.
#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "ops/kernels.hpp"
#include "ops/packed_weights.hpp"
#include "ops/quantized_acts.hpp"
#include "ops/tensor_access.hpp"
#include "quant/activation_quant.hpp"
#include "simd/gemm_kernel.hpp"
#include "simd/integer_dot.hpp"
#include "simd/sparse_matvec.hpp"
#include "simd/weight_rows.hpp"

namespace dwell::cpu {

OpVerdict check_matmul(const NodeArgs& a) {
    const dwell_tensor& w = a.input(0);
    const dwell_tensor& x = a.input(1);
    const dwell_tensor& out = a.output();
    if (!is_weight_dtype(w.dtype)) {
        return unsupported(std::string("weight dtype ") + dwell_dtype_name(w.dtype) +
                           " is not supported");
    }
    if (w.ne[2] != 1 || w.ne[3] != 1) {
        return invalid("weight must be [K, N], got " + shape_string(w));
    }
    if (x.dtype != DWELL_F32) return unsupported("x must be F32");
    if (x.ne[0] != w.ne[0]) {
        return invalid("x " + shape_string(x) + " does not match weight " + shape_string(w));
    }
    if (out.dtype != DWELL_F32 || out.ne[0] != w.ne[1] || out.ne[1] != x.ne[1] ||
        out.ne[2] != x.ne[2] || out.ne[3] != x.ne[3]) {
        return invalid("output must be F32 [N, M] = [" + std::to_string(w.ne[1]) + ", ...] " +
                       "with x's rows, got " + shape_string(out));
    }
    return std::nullopt;
}

namespace {

// Outputs one tile() call may produce (R x C); every kernel stays far below.
constexpr int kMaxTileOutputs = 1024;

void run_blocked(const GemmKernel& kernel, const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& w = a.input(0);
    const dwell_tensor& x = a.input(1);
    const dwell_tensor& out = a.output();
    const int64_t k = w.ne[0];
    const int64_t n_rows = w.ne[1];
    const int64_t m_rows = dwell_tensor_nrows(&x);
    const int R = kernel.rows_per_block;
    const int C = kernel.max_cols;
    if (R * C > kMaxTileOutputs) {
        throw KernelError(DWELL_ERR_INTERNAL, std::string("matmul kernel ") + kernel.name +
                                                  " has tiles larger than the driver allows");
    }

    // A weight that may change between calls (written by the graph, or
    // streamed) is packed block by block inside the tile loop: each block is
    // read once, packed into a small buffer while hot, and used at once,
    // instead of a whole packed copy made and read back every call.
    const unsigned char* packed = a.packed != nullptr ? a.packed->get(kernel, w, pool) : nullptr;
    const size_t block_bytes = kernel.block_bytes(k);

    const size_t act_bytes = kernel.act_row_bytes(k);
    AlignedBytes own_acts;
    unsigned char* acts = nullptr;
    bool have_acts = false;
    if (a.acts != nullptr) {
        acts = a.acts->lookup(x, kernel, act_bytes, &have_acts);
    } else {
        own_acts = make_aligned_bytes(act_bytes * static_cast<size_t>(m_rows));
        acts = own_acts.get();
    }
    if (!have_acts) {
        pool.parallel_for(
            m_rows,
            [&](int64_t begin, int64_t end) {
                for (int64_t m = begin; m < end; ++m) {
                    kernel.quantize_act(f32_row_flat(x, m), k, acts + m * act_bytes);
                }
            },
            std::max<int64_t>(1, 16384 / k));
        if (a.acts != nullptr) a.acts->filled();
    }

    const int64_t blocks = (n_rows + R - 1) / R;
    // Dynamic ranges: decode is memory bound, and a thread the OS delays
    // would otherwise leave the other cores' share of bandwidth idle. Every
    // output is computed by the same tile code whoever runs it.
    pool.parallel_for_dynamic(
        blocks,
        [&](int64_t begin, int64_t end) {
            std::array<float, kMaxTileOutputs> tile;
            AlignedBytes own = packed == nullptr ? make_aligned_bytes(block_bytes) : AlignedBytes();
            for (int64_t b = begin; b < end; ++b) {
                const int64_t n0 = b * R;
                const int nr = static_cast<int>(std::min<int64_t>(R, n_rows - n0));
                const unsigned char* block = packed + static_cast<size_t>(b) * block_bytes;
                if (packed == nullptr) {
                    kernel.pack_block(row_at(w, n0), static_cast<size_t>(w.nb[1]), nr, k,
                                      own.get());
                    block = own.get();
                }
                for (int64_t m0 = 0; m0 < m_rows; m0 += C) {
                    const int nc = static_cast<int>(std::min<int64_t>(C, m_rows - m0));
                    kernel.tile(k, block, nr, acts + m0 * act_bytes, act_bytes, nc, tile.data(),
                                static_cast<size_t>(R));
                    for (int c = 0; c < nc; ++c) {
                        std::copy_n(tile.data() + static_cast<ptrdiff_t>(c) * R, nr,
                                    f32_row_flat(out, m0 + c) + n0);
                    }
                }
            }
        },
        std::max<int64_t>(1, blocks / (8 * static_cast<int64_t>(pool.size()))));
}

// A SPARSIFY-fed matmul on a weight a sparse kernel serves: the column
// layout, one matvec per input row, reading only the non-zero channels.
// Rows of a batch run one by one (each has its own zero channels).
void run_sparse(const SparseKernel& kernel, const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& w = a.input(0);
    const dwell_tensor& x = a.input(1);
    const dwell_tensor& out = a.output();
    const int64_t k = w.ne[0];
    const int64_t n = w.ne[1];
    const int64_t m_rows = dwell_tensor_nrows(&x);
    const unsigned char* layout = a.packed->get_sparse(kernel, w, pool);
    const int64_t tiles = sparse_padded_rows(kernel, n) / kernel.rows_per_tile;
    // One range of tiles per thread: each channel's codes are then read as
    // one run as long as the thread's rows allow (the kernel's passes
    // stream a few channels at a time; shorter runs measured slower).
    const int64_t chunk = std::max<int64_t>(
        1, (tiles + static_cast<int64_t>(pool.size()) - 1) / static_cast<int64_t>(pool.size()));
    std::vector<unsigned char> zeros(
        static_cast<size_t>(chunk) * sparse_tile_code_bytes(kernel) + 64, 0);
    SparseActsCache own;
    SparseActsCache& cache = a.sparse_acts != nullptr && m_rows == 1 ? *a.sparse_acts : own;
    const SparseActs& acts = cache.acts;
    for (int64_t m = 0; m < m_rows; ++m) {
        const float* xr = f32_row_flat(x, m);
        if (cache.data != xr || cache.k != k || m_rows > 1) {
            build_sparse_acts(xr, k, cache.acts);
            cache.data = xr;
            cache.k = k;
        }
        float* y = f32_row_flat(out, m);
        pool.parallel_for_dynamic(
            tiles,
            [&](int64_t begin, int64_t end) {
                kernel.run(layout, k, n, acts, begin, end, zeros.data(), y);
            },
            chunk);
        if (a.reads != nullptr) {
            a.reads->bytes_read += sparse_bytes_read(kernel, n, acts);
            a.reads->inputs += static_cast<uint64_t>(k);
            a.reads->inputs_zero += static_cast<uint64_t>(acts.zero_inputs);
        }
    }
}

}  // namespace

void run_matmul(const NodeArgs& a, ThreadPool& pool) {
    const dwell_tensor& w = a.input(0);
    const dwell_tensor& x = a.input(1);
    const dwell_tensor& out = a.output();
    const int64_t k = w.ne[0];
    const uint64_t full =
        static_cast<uint64_t>(dwell_row_bytes(w.dtype, k)) * static_cast<uint64_t>(w.ne[1]);
    if (a.reads != nullptr) a.reads->matmuls += 1;
    if (a.sparse_input && a.packed != nullptr && k % 32 == 0) {
        if (const SparseKernel* sk = sparse_kernel(w.dtype)) {
            if (a.reads != nullptr)
                a.reads->bytes_dense += full * static_cast<uint64_t>(dwell_tensor_nrows(&x));
            run_sparse(*sk, a, pool);
            return;
        }
    }
    if (a.reads != nullptr) {
        // A dense kernel reads the whole weight once per call (the rows of
        // a batch share it), whatever zeros its input holds.
        a.reads->bytes_read += full;
        a.reads->bytes_dense += full;
        if (a.sparse_input) {
            for (int64_t m = 0; m < dwell_tensor_nrows(&x); ++m) {
                const float* r = f32_row_flat(x, m);
                a.reads->inputs += static_cast<uint64_t>(k);
                a.reads->inputs_zero += static_cast<uint64_t>(std::count(r, r + k, 0.0f));
            }
        }
    }
    if (const GemmKernel* kernel = gemm_kernel(w.dtype);
        kernel != nullptr && k % kernel->k_multiple == 0) {
        run_blocked(*kernel, a, pool);
        return;
    }
    const int64_t n_rows = w.ne[1];
    const int64_t m_rows = dwell_tensor_nrows(&x);
    // Keep each range big enough that waking a thread pays off.
    const int64_t min_chunk = std::max<int64_t>(1, 16384 / (k * m_rows));
    const ActFormat format = activation_format(w.dtype);
    if (format == ActFormat::F32) {
        pool.parallel_for(
            n_rows,
            [&](int64_t begin, int64_t end) {
                for (int64_t n = begin; n < end; ++n) {
                    // One weight row against every x row while it is hot in cache.
                    const unsigned char* wrow = row_at(w, n);
                    for (int64_t m = 0; m < m_rows; ++m) {
                        f32_row_flat(out, m)[n] = dot_row(w.dtype, wrow, f32_row_flat(x, m), k);
                    }
                }
            },
            min_chunk);
        return;
    }
    ActivationRows acts(format, k, m_rows);
    pool.parallel_for(
        m_rows,
        [&](int64_t begin, int64_t end) {
            for (int64_t m = begin; m < end; ++m) acts.set(m, f32_row_flat(x, m));
        },
        std::max<int64_t>(1, 16384 / k));
    pool.parallel_for(
        n_rows,
        [&](int64_t begin, int64_t end) {
            for (int64_t n = begin; n < end; ++n) {
                const unsigned char* wrow = row_at(w, n);
                for (int64_t m = 0; m < m_rows; ++m) {
                    f32_row_flat(out, m)[n] =
                        dot_row_prepared(w.dtype, format, wrow, acts.row(m), k);
                }
            }
        },
        min_chunk);
}

}  // namespace dwell::cpu
