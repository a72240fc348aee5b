// Matrix-vector products that skip the weight bytes of zero inputs: the
// decode path of a MATMUL whose input comes from SPARSIFY (graph.h, ABI 1.9).
//
// The column layout. A dense kernel reads a weight row by row, so a zero
// input still costs its bytes in every row. Here one input channel of one
// block of 32 channels is one contiguous memory range across all rows, so a
// zero channel is a range never touched. For a Q4_0 weight [k, n], rows
// padded to Np (a multiple of the kernel's tile of R rows), block column j
// (channels 32j..32j+31) is 18 * Np bytes at j * 18 * Np:
//   - the rows' fp16 scales, 2 * Np bytes, tile by tile, each tile's R
//     scales in the kernel's accumulator order (slot_vrow);
//   - then channel c = 0..31 of the block: Np / 2 bytes, tile by tile R / 2
//     bytes, byte p holding the 4-bit code of the tile's row p in its low
//     nibble and of row R / 2 + p in its high nibble.
// The bytes are the GGUF blocks' own (same size, lossless), moved; padded
// rows are zero codes with zero scales and never stored. Q8_0 is the same
// with one byte per code (34 * Np bytes per block column, a channel's tile
// R bytes, byte p row p), stored as w + 128 where the kernel says so. A
// block column with
// no non-zero input is skipped whole; otherwise its scales and its non-zero
// channels are read.
//
// Results contract (tests/plugins/backends/cpu/sparse_matvec_test.cpp): the
// output equals the dense blocked kernel of the same SIMD level
// (gemm_kernel_for) bit for bit on the same input: the integer block sums
// are the same exact integers (a zero input adds nothing), and the float
// epilogue runs per row in block order with the dense kernel's rounding
// (a skipped block would have added an exact zero).
//
// Thread-safety: pure functions over caller-owned buffers. Ownership: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dwell/tensor.h"
#include "simd/simd_dots.hpp"

namespace dwell::cpu {

// One block of 32 inputs, quantized as the dense kernels quantize them
// (quantize_act_q8_0's numbers), with the list of its non-zero channels.
struct SparseBlock {
    float d = 0;       // the block's scale
    int32_t qsum = 0;  // sum of its int8 values
    int32_t n = 0;     // non-zero channels, listed first in idx
    uint8_t idx[32] = {};
    int8_t q[32] = {};
};

struct SparseActs {
    std::vector<SparseBlock> blocks;
    int64_t active_blocks = 0;    // blocks with n > 0
    int64_t active_channels = 0;  // sum of n
    int64_t zero_inputs = 0;      // x entries that are exactly zero
};

// The digest of one input row, kept while no node rewrites it: `data` is
// the row it was made from (null: none).
struct SparseActsCache {
    const void* data = nullptr;
    int64_t k = 0;
    SparseActs acts;
};

// Quantizes x[0..k) (k a multiple of 32) into `out`.
void build_sparse_acts(const float* x, int64_t k, SparseActs& out);

struct SparseKernel {
    const char* name;    // e.g. "q4_0/avx512vnni"
    dwell_dtype weight;  // Q4_0 or Q8_0
    int rows_per_tile;   // R
    // Q8_0: codes stored as w + 128 (unsigned, for vpdpbusd), else as w.
    bool offset_codes;
    // The row of a tile (0..R-1) whose output sits in accumulator slot s.
    int (*slot_vrow)(int s);
    // Rows of tiles [t0, t1): out[row] for row < n. `zeros` is at least
    // (t1 - t0) * sparse_tile_code_bytes zero bytes (what a padded channel
    // group reads).
    void (*run)(const unsigned char* layout, int64_t k, int64_t n, const SparseActs& a, int64_t t0,
                int64_t t1, const unsigned char* zeros, float* out);
};

// The kernel for dtype t (Q4_0 or Q8_0) at SIMD level `level` (every x86
// and aarch64 level and scalar), or nullptr for other types.
const SparseKernel* sparse_kernel_for(dwell_dtype t, SimdLevel level);
// sparse_kernel_for(t, dot_kernels().level), honouring DWELL_CPU_SIMD.
const SparseKernel* sparse_kernel(dwell_dtype t);

int64_t sparse_padded_rows(const SparseKernel& kern, int64_t n);
// Bytes of one channel's codes for R rows (one tile).
size_t sparse_tile_code_bytes(const SparseKernel& kern);
size_t sparse_layout_bytes(const SparseKernel& kern, int64_t k, int64_t n);
// Writes tiles [t0, t1) of weight rows (rows of row_bytes bytes, GGUF Q4_0
// or Q8_0 blocks) into the layout at `out` (sparse_layout_bytes large).
void sparse_pack_tiles(const SparseKernel& kern, const void* w, size_t row_bytes, int64_t k,
                       int64_t n, int64_t t0, int64_t t1, unsigned char* out);
// Weight bytes one product with `a` reads: scales of active blocks, codes
// of active channels.
uint64_t sparse_bytes_read(const SparseKernel& kern, int64_t n, const SparseActs& a);

// What the SIMD kernels share (portable code, called once per block or per
// call, so no ISA-specific copy is needed):
//
// Four non-zero channels of one block: where each one's codes for tile t0
// start, and their four int8 inputs as one little-endian word.
struct SparseGroup {
    const unsigned char* ch[4];
    int32_t a4;
};
// The groups of block `blk` whose block column starts at `column` (np
// padded rows: the scales, then 32 channels of `channel_bytes`), for tiles
// from t0 (a channel's tile is `tile_code_bytes`); a last group of 1-3
// channels points the rest at `zeros`, with input 0. Returns the count
// (<= 8).
int sparse_groups(const SparseBlock& blk, const unsigned char* column, size_t np,
                  size_t channel_bytes, size_t tile_code_bytes, int64_t t0,
                  const unsigned char* zeros, SparseGroup* g);
// Writes out[row] for the rows of tiles [t0, t0 + nt) below n from `acc`
// (R floats per tile in accumulator order).
void sparse_store_rows(const float* acc, int64_t t0, int64_t nt, int R, int (*slot_vrow)(int),
                       int64_t n, float* out);

const SparseKernel* sparse_kernel_scalar(dwell_dtype t);
#if defined(__x86_64__)
const SparseKernel* sparse_kernel_avx2(dwell_dtype t);    // arch/x86/sparse_matvec_avx2.cpp
const SparseKernel* sparse_kernel_avx512(dwell_dtype t);  // arch/x86/sparse_matvec_avx512.cpp
#endif
#if defined(__aarch64__)
// arch/arm/sparse_matvec_neon_dotprod.cpp, for the dotprod and i8mm levels.
const SparseKernel* sparse_kernel_neon_dotprod(dwell_dtype t);
#endif

}  // namespace dwell::cpu
