// Single-thread speed of the column-layout matvec (sparse_matvec.hpp)
// against the dense blocked kernel of the same level, one Q4_0 weight
// [k, n] with a share of its input zero, weights rotated over copies larger
// than the last-level cache, as decode streams a model from memory.
//
//   dwell-bench-sparse-matvec [--k 2048] [--n 5632] [--runs 9]
//                             [--zeros 0,0.25,0.4,0.5] [--copies 40]
//
// Prints one JSON object per line: level, k, n, zero share, median and
// fastest us of a dense and of a sparse product (timed alternately), the
// bytes each read, and the speed-ups.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dwell/quant.h"
#include "ops/packed_weights.hpp"
#include "simd/gemm_kernel.hpp"
#include "simd/simd_dots.hpp"
#include "simd/sparse_matvec.hpp"

using namespace dwell::cpu;

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int64_t k = 2048, n = 5632;
    int runs = 9, copies = 40;
    std::vector<double> zeros = {0, 0.25, 0.4, 0.5};
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--k")
            k = std::atoll(v.c_str());
        else if (a == "--n")
            n = std::atoll(v.c_str());
        else if (a == "--runs")
            runs = std::atoi(v.c_str());
        else if (a == "--copies")
            copies = std::atoi(v.c_str());
        else if (a == "--zeros") {
            zeros.clear();
            std::stringstream ss(v);
            for (std::string z; std::getline(ss, z, ',');) zeros.push_back(std::atof(z.c_str()));
        } else {
            std::fprintf(stderr, "dwell-bench-sparse-matvec: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    if (k % 32 != 0 || k <= 0 || n <= 0 || runs < 1 || copies < 1) {
        std::fprintf(stderr, "dwell-bench-sparse-matvec: k must be a positive multiple of 32\n");
        return 2;
    }
    const GemmKernel* dk = gemm_kernel(DWELL_Q4_0);
    const SparseKernel* sk = sparse_kernel(DWELL_Q4_0);
    if (dk == nullptr || sk == nullptr) {
        std::fprintf(stderr, "dwell-bench-sparse-matvec: no sparse Q4_0 kernel at this level\n");
        return 1;
    }
    std::mt19937 rng(1);
    const size_t rb = dwell_row_bytes(DWELL_Q4_0, k);
    std::vector<uint8_t> rows(rb * static_cast<size_t>(n));
    for (auto& b : rows) b = static_cast<uint8_t>(rng());
    const uint16_t d = dwell_fp32_to_fp16(0.01f);
    for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < k / 32; ++j) std::memcpy(&rows[r * rb + j * 18], &d, 2);
    const int R = dk->rows_per_block;
    const int64_t nbk = (n + R - 1) / R;
    const size_t bb = dk->block_bytes(k);
    const int64_t tiles = sparse_padded_rows(*sk, n) / sk->rows_per_tile;
    std::vector<AlignedBytes> packs, lays;
    for (int c = 0; c < copies; ++c) {
        packs.push_back(make_aligned_bytes(bb * static_cast<size_t>(nbk)));
        for (int64_t b = 0; b < nbk; ++b)
            dk->pack_block(rows.data() + b * R * rb, rb,
                           static_cast<int>(std::min<int64_t>(R, n - b * R)), k,
                           packs.back().get() + b * bb);
        lays.push_back(make_aligned_bytes(sparse_layout_bytes(*sk, k, n)));
        sparse_pack_tiles(*sk, rows.data(), rb, k, n, 0, tiles, lays.back().get());
    }
    std::vector<unsigned char> zero_bytes(static_cast<size_t>(tiles * sk->rows_per_tile), 0);
    std::vector<float> out(static_cast<size_t>(n)), tile(static_cast<size_t>(R * dk->max_cols));
    AlignedBytes act = make_aligned_bytes(dk->act_row_bytes(k));
    std::uniform_real_distribution<float> u(-1, 1), p(0, 1);
    for (double zero : zeros) {
        std::vector<float> x(static_cast<size_t>(k));
        for (auto& v : x) v = p(rng) < zero ? 0.0f : u(rng);
        dk->quantize_act(x.data(), k, act.get());
        SparseActs sa;
        build_sparse_acts(x.data(), k, sa);
        std::vector<double> td, ts;
        for (int run = 0; run < runs; ++run) {
            auto t0 = Clock::now();
            for (int c = 0; c < copies; ++c)
                for (int64_t b = 0; b < nbk; ++b)
                    dk->tile(k, packs[static_cast<size_t>(c)].get() + b * bb,
                             static_cast<int>(std::min<int64_t>(R, n - b * R)), act.get(),
                             dk->act_row_bytes(k), 1, tile.data(), static_cast<size_t>(R));
            auto t1 = Clock::now();
            for (int c = 0; c < copies; ++c)
                sk->run(lays[static_cast<size_t>(c)].get(), k, n, sa, 0, tiles, zero_bytes.data(),
                        out.data());
            auto t2 = Clock::now();
            td.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / copies);
            ts.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count() / copies);
        }
        const double dense_us = median(td), sparse_us = median(ts);
        // The fastest run of each: on a shared machine the least disturbed.
        const double dense_min = *std::min_element(td.begin(), td.end());
        const double sparse_min = *std::min_element(ts.begin(), ts.end());
        std::printf(
            "{\"level\": \"%s\", \"k\": %lld, \"n\": %lld, \"zero\": %.3f, \"dense_us\": %.1f, "
            "\"sparse_us\": %.1f, \"dense_min_us\": %.1f, \"sparse_min_us\": %.1f, "
            "\"dense_bytes\": %llu, \"sparse_bytes\": %llu, \"speedup\": %.3f, "
            "\"speedup_min\": %.3f}\n",
            simd_level_name(dot_kernels().level), static_cast<long long>(k),
            static_cast<long long>(n), zero, dense_us, sparse_us, dense_min, sparse_min,
            static_cast<unsigned long long>(rb * static_cast<size_t>(n)),
            static_cast<unsigned long long>(sparse_bytes_read(*sk, n, sa)), dense_us / sparse_us,
            dense_min / sparse_min);
    }
    return 0;
}
